"""Prompts past the model's context, found before anything is generated.

A prompt whose tokens plus ``max_new_tokens`` exceed the positions the model
attends over cannot be answered as asked: transformers warns ("indexing
errors") and decodes anyway, a server refuses the request mid-run. Either way
the run used to go on and score whatever came out. The backend says its limit
(:class:`~sommelier_mlflow.generation._protocol.SupportsContextLength`) and
measures prompts in its own tokens (``prompt_lengths``); this module compares
the two, so the runner can refuse and the command line can skip, both before
the first prompt is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sommelier_mlflow.data import TestExample
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.generation._protocol import SupportsContextLength, SupportsPromptLengths

__all__ = ["ContextCheck", "context_length_of", "check_context"]


def context_length_of(generator: object) -> int | None:
    """The backend's context in tokens, or ``None`` when it cannot tell.

    Raises:
        InvariantViolationError: The backend reported something other than a
            positive integer.
    """
    if not isinstance(generator, SupportsContextLength):
        return None
    limit = generator.context_length()
    if limit is not None and (type(limit) is not int or limit <= 0):
        raise InvariantViolationError(
            f"{generator!r}.context_length() returned {limit!r}; expected a positive int or None"
        )
    return limit


@dataclass(frozen=True)
class ContextCheck:
    """Which prompts fit the model's context with room for ``max_new_tokens``.

    Attributes:
        context_length: The backend's limit, ``None`` when it does not say (then
            nothing can be found too long).
        max_new_tokens: The room each completion needs.
        overlong: ``(example_id, prompt tokens)`` of every prompt that does not
            fit, in split order.
    """

    context_length: int | None
    max_new_tokens: int
    overlong: tuple[tuple[str, int], ...] = ()

    def error(self, total: int) -> ConfigError:
        """The refusal of a run that has overlong prompts: how many, and the first."""
        first, tokens = self.overlong[0]
        count = len(self.overlong)
        return ConfigError(
            f"{count} of {total} prompts do not fit the model's context of "
            f"{self.context_length} tokens with max_new_tokens {self.max_new_tokens} (first: "
            f"{first!r}, {tokens} prompt tokens + {self.max_new_tokens} > "
            f"{self.context_length}); nothing was generated. Pass --skip-overlong "
            "(MLproject skip_overlong=true) to leave them out, counted and listed in the "
            "report, or lower --max-new-tokens, or use a model with a longer context"
        )

    def raise_if_overlong(self, total: int) -> None:
        """Refuse (exit 2) when any prompt does not fit."""
        if self.overlong:
            raise self.error(total)


def check_context(
    examples: Sequence[TestExample], generator: Any, max_new_tokens: int
) -> ContextCheck:
    """Measure every formatted prompt against the backend's context.

    Prompts are measured with the backend's ``prompt_lengths`` (the tokens it
    will send); a backend that knows no limit, or cannot measure, is checked
    for nothing.

    Raises:
        InvariantViolationError: ``prompt_lengths`` returned the wrong number
            of values.
    """
    limit = context_length_of(generator)
    if limit is None or not isinstance(generator, SupportsPromptLengths):
        return ContextCheck(limit, max_new_tokens)
    prompts = [example.prompt_text or "" for example in examples]
    lengths = generator.prompt_lengths(prompts)
    if len(lengths) != len(prompts) or not all(type(n) is int for n in lengths):
        raise InvariantViolationError(
            f"{generator!r}.prompt_lengths returned {len(lengths)} values for "
            f"{len(prompts)} prompts (expected one int each)"
        )
    overlong = tuple(
        (example.example_id, tokens)
        for example, tokens in zip(examples, lengths, strict=True)
        if tokens + max_new_tokens > limit
    )
    return ContextCheck(limit, max_new_tokens, overlong)
