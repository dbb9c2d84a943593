"""A hint when the chosen output format looks wrong for the outputs.

A user who scores pythonic or Llama outputs with the default ``json`` format
sees them all refused, and one who picks ``hermes`` for a model that answers
in bare JSON sees it abstain everywhere; either may conclude the model is bad.
When more than a fifth of the outputs get no call from the chosen format
(refused, or read as making no call) but decode to at least one call under
another registered format, the summary and the report say so with the counts.
The hint is a diagnostic only: it never changes a status or a score.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._parse import ParseResult

__all__ = ["FormatHint", "format_hint"]

Decoder = Callable[[str], CallsParseResult | ParseResult]


@dataclass(frozen=True, slots=True)
class FormatHint:
    """Outputs the chosen format gets no call from that another registered format reads.

    Attributes:
        chosen: The output format the outputs were scored with.
        suggested: The format that decodes calls from the most of those outputs.
        decoded: How many outputs get no call from ``chosen`` (a status other
            than ``ok``) and at least one call from ``suggested``.
        outputs: How many outputs were scored.
    """

    chosen: str
    suggested: str
    decoded: int
    outputs: int

    @property
    def message(self) -> str:
        """The one line the summary and the report show."""
        return (
            f"{self.decoded} of {self.outputs} outputs decode as {self.suggested}; "
            f"did you mean --output-format {self.suggested}?"
        )


def _makes_a_call(result: CallsParseResult | ParseResult) -> bool:
    if isinstance(result, ParseResult):
        return result.status == "ok"
    return result.status == "ok" and bool(result.calls)


def format_hint(
    texts: Sequence[str], statuses: Sequence[str], chosen: str, decoders: Mapping[str, Decoder]
) -> FormatHint | None:
    """The hint for ``texts`` scored in ``chosen``, or ``None`` when the format looks right.

    Args:
        texts: Every raw output that was scored.
        statuses: The parse status ``chosen`` gave each of ``texts`` (scoring
            has them already, so no output is parsed twice the same way).
        chosen: The name of the format they were scored with.
        decoders: The other registered formats' parses by name (``chosen`` is
            skipped if present). Ties go to the first name in this order.

    Returns:
        A :class:`FormatHint` when more than a fifth of ``texts`` get no call from
        ``chosen`` (a status other than ``ok``; an explicit empty list is an
        answer) and at least one call from one other format, else ``None``.
    """
    outputs = len(texts)
    missed = [text for text, status in zip(texts, statuses, strict=True) if status != "ok"]
    if 5 * len(missed) <= outputs:
        return None
    best: FormatHint | None = None
    for name, other in decoders.items():
        if name == chosen:
            continue
        decoded = sum(1 for text in missed if _makes_a_call(other(text)))
        if 5 * decoded > outputs and (best is None or decoded > best.decoded):
            best = FormatHint(chosen, name, decoded, outputs)
    return best
