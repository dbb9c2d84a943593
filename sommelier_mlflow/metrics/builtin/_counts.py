"""CountsMeasure (catalog ``CountsMetric``): a text's length in characters, words or tokens.

Length is the cheapest signal that a fine-tuned model changed its output
style (rambling prose around a tool call, truncated calls), and counting in a
model's own tokens shows what the output costs against ``max_new_tokens``.

Tokenizers come from Hugging Face ``transformers``, imported only when an
``encodings`` count is configured so that the measure framework never pays for
(or requires) that import otherwise. An access token for gated models is held
as a secret: it is masked in ``repr``, in ``config`` and in error messages.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import SecretStr, model_validator

from sommelier_mlflow.errors import DependencyError
from sommelier_mlflow.metrics._base import BaseMeasure
from sommelier_mlflow.metrics._catalog import register_measure
from sommelier_mlflow.metrics._config import MASK, MeasureConfig

__all__ = [
    "CountsConfig",
    "CountsMeasure",
    "count_characters",
    "count_tokens",
    "count_encodings",
]

TOKEN_SCHEMES: tuple[str, ...] = ("whitespace", "wordpunct")
_WORDPUNCT = re.compile(r"\w+|[^\w\s]+")


class CountsConfig(MeasureConfig):
    r"""Runtime parameters of :class:`CountsMeasure`.

    Attributes:
        segments: What to count. ``"characters"`` (default) counts the Unicode
            code points of the text with surrounding whitespace stripped;
            ``"tokens"`` counts words; ``"encodings"`` counts a Hugging Face
            tokenizer's token ids (special tokens such as BOS/EOS excluded, so
            the count measures the text, not the model's framing).
        segmentation: How to split. Ignored for characters. For tokens,
            ``"whitespace"`` (default) splits on runs of whitespace and
            ``"wordpunct"`` matches ``\w+|[^\w\s]+`` (words and punctuation
            runs). For encodings (required): a hub model id or a local
            directory holding a saved tokenizer.
        hf_token: Access token for a gated hub model; ``HF_TOKEN`` from the
            environment is used when this is not given.
        revision: The hub commit (or tag) of an ``encodings`` tokenizer given
            by hub id. Required for hub ids, as for the generator: a count is
            only reproducible if every run loads the very same tokenizer
            files. Ignored for local directories.
        allow_unpinned: Explicit opt-out of that requirement: load whatever
            the hub serves today (counts may change when the repo does).
    """

    segments: Literal["characters", "tokens", "encodings"] = "characters"
    segmentation: str | None = None
    hf_token: SecretStr | None = None
    revision: str | None = None
    allow_unpinned: bool = False

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        # An explicit null means "the default", as in the upstream reference.
        if not isinstance(data, dict):
            return data
        filled = dict(data)
        if filled.get("segments", "characters") is None:
            filled["segments"] = "characters"
        if filled.get("segments") == "tokens" and filled.get("segmentation") is None:
            filled["segmentation"] = "whitespace"
        return filled

    @model_validator(mode="after")
    def _check_segmentation(self) -> CountsConfig:
        if self.segments == "tokens" and self.segmentation not in TOKEN_SCHEMES:
            raise ValueError(
                f"segmentation for segments='tokens' must be one of {list(TOKEN_SCHEMES)}, "
                f"got {self.segmentation!r}"
            )
        if self.segments == "encodings" and not (self.segmentation or "").strip():
            raise ValueError(
                "segments='encodings' needs segmentation set to a Hugging Face tokenizer: "
                "a hub model id (e.g. 'gpt2') or a local directory with a saved tokenizer"
            )
        if self.revision is not None and not self.revision.strip():
            raise ValueError("revision must be a non-empty commit hash or tag, or None")
        if (
            self.segments == "encodings"
            and not _looks_like_path((self.segmentation or "").strip())
            and self.revision is None
            and not self.allow_unpinned
        ):
            raise ValueError(
                f"the hub tokenizer {self.segmentation!r} must be pinned so counts are "
                "reproducible: pass revision='<commit hash>' (or allow_unpinned=True to accept "
                "whatever the hub serves today)"
            )
        return self


def _looks_like_path(source: str) -> bool:
    return os.path.isabs(source) or source.startswith((".", "~")) or Path(source).exists()


@functools.lru_cache(maxsize=8)
def _load_tokenizer(source: str, revision: str | None, token: str | None) -> Any:
    """Load (once per source, revision and token) a tokenizer with ``AutoTokenizer``."""
    if _looks_like_path(source) and not Path(source).expanduser().is_dir():
        raise DependencyError(
            f"No tokenizer directory at {source!r} for CountsMeasure encodings. Pass an existing "
            "directory that holds tokenizer files (saved with save_pretrained) or a Hugging Face "
            "hub model id."
        )
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise DependencyError(
            "CountsMeasure with segments='encodings' needs the transformers package: "
            "pip install 'transformers>=4.46'."
        ) from exc
    location = str(Path(source).expanduser()) if _looks_like_path(source) else source
    try:
        return AutoTokenizer.from_pretrained(location, revision=revision, token=token)
    except Exception as exc:  # transformers/hub raise many unrelated types here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if token:
            reason = reason.replace(token, MASK)
        raise DependencyError(
            f"Cannot load the tokenizer {source!r} for CountsMeasure encodings "
            f"({type(exc).__name__}: {reason}). Pass a local directory with the tokenizer files "
            "or a hub model id that is cached or reachable; for a gated model pass hf_token "
            "or set HF_TOKEN."
        ) from (None if token else exc)  # a chained hub error could echo the token


def _counter(config: CountsConfig) -> Callable[[str], int]:
    if config.segments == "characters":
        return lambda text: len(text.strip())
    if config.segments == "tokens":
        if config.segmentation == "wordpunct":
            return lambda text: len(_WORDPUNCT.findall(text))
        return lambda text: len(text.split())
    token = config.hf_token.get_secret_value() if config.hf_token is not None else None
    source = cast(str, config.segmentation).strip()
    tokenizer = _load_tokenizer(
        source,
        None if _looks_like_path(source) else config.revision,
        token or os.environ.get("HF_TOKEN") or None,
    )
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


# Its catalog name predates the measure vocabulary (issue 31) and stays: configs,
# result keys and MLflow keys name it.
@register_measure(name="CountsMetric")
class CountsMeasure(BaseMeasure[int]):
    """Count the characters, words or tokenizer encodings of a text.

    Empty or whitespace-only text counts 0 in every mode. An ``encodings``
    tokenizer is loaded when the measure is built, so a missing tokenizer fails
    at configuration time rather than on the first row.

    Raises:
        MetricConfigError: On invalid parameters (see :class:`CountsConfig`).
        DependencyError: If an encodings tokenizer cannot be loaded.
    """

    config_schema = CountsConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._count = _counter(cast(CountsConfig, self.settings))

    def evaluate(self, text: str) -> dict[str, int]:
        """Count the segments of ``text``."""
        if not text.strip():
            return self.result(0)
        return self.result(self._count(text))


def _count(text: str, **config: Any) -> int:
    metric = CountsMeasure(**config)
    return int(metric.score(text)[metric.result_key])


def count_characters(text: str) -> int:
    """Characters (Unicode code points) of ``text`` without surrounding whitespace."""
    return _count(text)


def count_tokens(text: str, segmentation: str = "whitespace") -> int:
    """Words of ``text``: ``"whitespace"``-separated runs or ``"wordpunct"`` words/punctuation.

    Raises:
        MetricConfigError: If ``segmentation`` is not one of the two schemes.
    """
    return _count(text, segments="tokens", segmentation=segmentation)


def count_encodings(
    text: str,
    model: str,
    hf_token: str | None = None,
    *,
    revision: str | None = None,
    allow_unpinned: bool = False,
) -> int:
    """Token ids ``model``'s tokenizer gives ``text`` (special tokens excluded).

    Args:
        text: The text to encode.
        model: A Hugging Face hub model id or a local tokenizer directory.
        hf_token: Access token for a gated model (else ``HF_TOKEN`` is used).
        revision: The pinned hub commit; required for a hub id.
        allow_unpinned: Accept an unpinned hub id anyway (see :class:`CountsConfig`).

    Raises:
        MetricConfigError: A hub id without ``revision`` (and no opt-out).
        DependencyError: If the tokenizer or ``transformers`` is unavailable.
    """
    return _count(
        text,
        segments="encodings",
        segmentation=model,
        hf_token=hf_token,
        revision=revision,
        allow_unpinned=allow_unpinned,
    )
