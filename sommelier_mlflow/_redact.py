"""The one place that decides what a secret looks like, and scrubs it.

Params, tags, artifacts, printed commands and error messages end up on a
tracking server or a terminal that a whole team (or the public, for a shared
demo) can read, and MLflow keeps them forever. A Hugging Face token passed as
``hf_token`` or exported as ``HF_TOKEN``, an API key, or a URI written as
``https://user:password@host`` must therefore never leave the process.

Every layer uses this module (the metric framework masks secret config fields
with it, the MLflow integration scrubs whatever it sends, the commands scrub
what they print), so there is exactly one list of secret-looking names and one
set of patterns: a name masked in one place is masked in all of them.
Redaction is applied at the last moment, on the strings actually sent, so a
secret that slipped into a path, a report field or an exception message is
caught as well. The module imports only the standard library, so the core
layers may use it.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "REDACTED",
    "is_secret_key",
    "register_secret",
    "redact_registered",
    "redact",
    "redact_value",
    "contains_secret",
]

REDACTED: Final = "**********"
"""What a secret looks like wherever it would otherwise have been shown."""

#: Environment variables whose values are always treated as secrets.
_SECRET_ENV_NAMES: Final = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_HUB_TOKEN",
        "HF_API_TOKEN",
        "MLFLOW_TRACKING_TOKEN",
        "MLFLOW_TRACKING_PASSWORD",
    }
)
#: Any other variable, parameter or mapping key whose name ends in ``token`` or
#: contains one of these holds a secret (``max_new_tokens`` and ``tokenizer`` do not).
_SECRET_HINTS: Final = (
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "access_key",
    "credential",
)
#: Short values (``"1"``, ``"true"``) of secret-looking variables are flags, not
#: secrets; replacing them everywhere would mangle unrelated text.
_MIN_SECRET_LENGTH: Final = 6
_URI_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#@\s\"']+@")
#: Access tokens recognisable by their issuer's prefix: Hugging Face (``hf_``),
#: OpenAI-style API keys (``sk-``), GitHub (``ghp_``, ``github_pat_`` ...).
_TOKEN_SHAPES: Final = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,})\b"
)
_TOKEN_PREFIXES: Final = ("hf_", "sk-", "gh", "github_pat_")
_ASSIGNED_SECRET: Final = re.compile(
    r"(?P<key>\b(?:hf_token|token|access_token|api[_-]?key|apikey|password|passwd|secret))"
    r"(?P<sep>=)(?P<value>[^&\s#\"',;]+)",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=1024)
def is_secret_key(name: str) -> bool:
    """Whether a parameter, field or variable name denotes a secret (``hf_token``, ``password``).

    This is the single rule behind every mask in the package: MLflow params and
    tags, JSON artifacts, and :meth:`MeasureSpec.redacted
    <sommelier_mlflow.metrics.MeasureSpec.redacted>`.
    """
    lowered = name.lower().replace("-", "_")
    return lowered.endswith("token") or any(hint in lowered for hint in _SECRET_HINTS)


#: Values known to be secret by where they came from, whatever their variable is
#: called (the API key a served backend read from ``$api_key_env``).
_REGISTERED: set[str] = set()
_REGISTERED_LOCK: Final = threading.Lock()


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret in every redaction this process makes from now on.

    A served backend's key sits in a variable the user names (``VLLM_KEY``), so
    the name-based rule cannot know it; a server that echoes the key (in
    ``/version``, in a completion) would otherwise carry it into params, traces,
    artifacts and local files. Values shorter than 6 characters are placeholders
    (vLLM's ``EMPTY``), not secrets, and are ignored: replacing them everywhere
    would rewrite ordinary text, model outputs included.
    """
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _REGISTERED_LOCK:
            _REGISTERED.add(value)


def redact_registered(value: Any) -> Any:
    """Replace only the registered secrets (exact values) in a string or JSON-like value.

    For text that must otherwise stay byte-for-byte what it was, such as a
    model's completion that will be scored: the pattern rules of :func:`redact`
    (``token=...``, ``sk-...``) would rewrite legitimate output, an exact known
    secret never is. Mappings and sequences come back as dicts and lists.
    """
    secrets = sorted(_REGISTERED, key=len, reverse=True)
    if not secrets:
        return value
    return _replace_exact(value, secrets)


def _replace_exact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {
            _replace_exact(key, secrets): _replace_exact(item, secrets)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_replace_exact(item, secrets) for item in value]
    return value


def _environment_secrets() -> tuple[str, ...]:
    # Read at call time: a token exported after import must still be caught.
    values = {
        value
        for name, value in os.environ.items()
        if (name.upper() in _SECRET_ENV_NAMES or is_secret_key(name))
        and len(value) >= _MIN_SECRET_LENGTH
    }
    return tuple(values)


class _Redactor:
    """One scan of the environment, applied to any number of strings.

    A per-example table has tens of thousands of cells; scanning ``os.environ``
    once per cell would cost more than everything else the evaluator does.
    """

    def __init__(self, extra: Iterable[str | None] = ()) -> None:
        found = set(_environment_secrets())
        found.update(_REGISTERED)
        found.update(value for value in extra if value)
        # Longest first, so a secret that contains another leaves no partial leftover.
        self._secrets = tuple(sorted(found, key=len, reverse=True))

    def text(self, value: str) -> str:
        text = value
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        # The cheap membership tests skip the regexes for the common clean string.
        if "@" in text:
            text = _URI_USERINFO.sub(lambda match: f"{match.group('scheme')}{REDACTED}@", text)
        if any(prefix in text for prefix in _TOKEN_PREFIXES):
            text = _TOKEN_SHAPES.sub(REDACTED, text)
        if "=" in text:
            text = _ASSIGNED_SECRET.sub(
                lambda match: f"{match.group('key')}{match.group('sep')}{REDACTED}", text
            )
        return text

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                key: (
                    REDACTED
                    if isinstance(key, str) and is_secret_key(key) and value[key] not in (None, "")
                    else self.value(value[key])
                )
                for key in value
            }
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value


def redact(value: str, *, secrets: Iterable[str | None] = ()) -> str:
    """Return ``value`` with every recognisable secret replaced by :data:`REDACTED`.

    Replaced are: the values of secret environment variables (``HF_TOKEN``,
    ``MLFLOW_TRACKING_PASSWORD``, any ``*TOKEN``/``*PASSWORD*``/``*SECRET*``
    variable of 6+ characters), access tokens recognisable by their prefix
    (``hf_...``, ``sk-...``, ``ghp_...``), the ``user:password@`` part of URIs,
    ``token=...``-style assignments, and the explicit ``secrets`` given (for a
    token the caller holds but did not export, such as one passed as an argument).
    """
    return _Redactor(secrets).text(value)


def redact_value(value: Any, *, secrets: Iterable[str | None] = ()) -> Any:
    """Redact a JSON-like value recursively; values under secret-looking keys are masked whole.

    Mappings come back as dicts and sequences (other than strings) as lists,
    which is what a JSON artifact or an MLflow param needs anyway. The
    environment is scanned once for the whole value.
    """
    return _Redactor(secrets).value(value)


def contains_secret(value: str) -> bool:
    """Whether :func:`redact` would change ``value``: it carries a credential.

    Used where scrubbing is too late, e.g. a value MLflow has already stored,
    which must then be deleted rather than shown.
    """
    return redact(value) != value
