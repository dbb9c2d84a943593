"""Batches of prompts through a backend: the pieces every generation loop shares.

The single-completion runner (``_runner.py``) and the multi-turn execution
loop (``_multi_turn.py``) both group prompts into batches of similar length
and send each batch through whichever method the backend offers; one copy of
that logic keeps their batching, and so their greedy outputs, alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sommelier_mlflow.data import Decoding, GenerationRecord, ModelKind, TestExample
from sommelier_mlflow.errors import InvariantViolationError
from sommelier_mlflow.generation._protocol import (
    Completion,
    SupportsCompletionDetails,
    SupportsExampleKeys,
    SupportsPrefill,
    SupportsPromptLengths,
    TextGenerator,
)
from sommelier_mlflow.toolcalls import parse_tool_call

__all__ = ["Prompted", "batch_plan", "valid_text", "generate_batch", "make_record", "skip_batch"]


@dataclass(frozen=True, slots=True)
class Prompted:
    """An example whose prompt presence and digest have been checked."""

    example: TestExample
    prompt: str
    prompt_sha256: str


def batch_plan(
    prompted: Sequence[Prompted], generator: TextGenerator, batch_size: int
) -> list[list[int]]:
    """Group example indices into batches of similar prompt length, longest first.

    Longest first makes an out-of-memory batch fail at the start rather than
    an hour in; ties keep split order so the plan is a pure function of the
    examples and the generator's length measure.
    """
    prompts = [item.prompt for item in prompted]
    if isinstance(generator, SupportsPromptLengths):
        lengths = generator.prompt_lengths(prompts)
        if len(lengths) != len(prompts) or not all(type(n) is int for n in lengths):
            raise InvariantViolationError(
                f"{generator!r}.prompt_lengths returned {len(lengths)} values for "
                f"{len(prompts)} prompts (expected one int each)"
            )
    else:
        lengths = [len(prompt) for prompt in prompts]
    order = sorted(range(len(prompts)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def valid_text(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD.

    A server's JSON may escape one half of a surrogate pair alone; Python
    decodes that into a string no UTF-8 file can hold, so writing the
    generation would fail and lose the run. The completion is kept with the
    replacement character instead, and parsed and scored as stored: the
    ``raw_text`` in ``generations/`` is always exactly what was scored.
    """
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def skip_batch(generator: TextGenerator, items: Sequence[Prompted]) -> None:
    """A batch whose outputs a resumed run already holds: only a stateful generator sees it."""
    if isinstance(generator, SupportsPrefill):
        generator.prefill([item.prompt for item in items])


def generate_batch(
    generator: TextGenerator, items: list[Prompted], max_new_tokens: int
) -> list[Completion]:
    """One batch through the backend, with details when it offers them, checked."""
    outputs: Any
    prompts = [item.prompt for item in items]
    if isinstance(generator, SupportsExampleKeys):
        ids = [item.example.example_id for item in items]
        outputs = generator.generate_for(ids, prompts, max_new_tokens=max_new_tokens)
        expected = "str"
        valid = isinstance(outputs, list) and all(isinstance(text, str) for text in outputs)
    elif isinstance(generator, SupportsCompletionDetails):
        outputs = generator.generate_details(prompts, max_new_tokens=max_new_tokens)
        expected = "Completion"
        valid = isinstance(outputs, list) and all(
            isinstance(item, Completion) and isinstance(item.text, str) for item in outputs
        )
    else:
        outputs = generator.generate(prompts, max_new_tokens=max_new_tokens)
        expected = "str"
        valid = isinstance(outputs, list) and all(isinstance(text, str) for text in outputs)
    if not valid or len(outputs) != len(prompts):
        raise InvariantViolationError(
            f"{generator!r} returned {type(outputs).__name__} of "
            f"{len(outputs) if isinstance(outputs, list) else '?'} items for "
            f"{len(prompts)} prompts; a generator must return one {expected} per prompt"
        )
    if expected == "str":
        return [Completion(text) for text in outputs]
    return list(outputs)


def make_record(
    item: Prompted,
    raw_text: str,
    model_kind: ModelKind,
    decoding: Decoding,
    turns: tuple[tuple[str, ...], ...] | None = None,
) -> GenerationRecord:
    """The generation record of one example's output, with the single parse as its audit copy.

    ``turns`` is a multi-turn question's every step text (``raw_text`` is
    then their transcript); ``None`` for one completion.
    """
    raw_text = valid_text(raw_text)
    parsed = parse_tool_call(raw_text)
    return GenerationRecord(
        example_id=item.example.example_id,
        model_kind=model_kind,
        language=item.example.language,
        prompt_sha256=item.prompt_sha256,
        raw_text=raw_text,
        parse_status=parsed.status,
        parsed_call=parsed.call,
        decoding=decoding.to_dict(),
        turns=turns,
    )
