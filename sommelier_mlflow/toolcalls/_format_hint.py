"""What the outputs say about the chosen output format: a hint, and a plain warning.

A user who scores pythonic or Llama outputs with the default ``json`` format
sees them all refused, and one who picks ``hermes`` for a model that answers
in bare JSON sees it abstain everywhere; either may conclude the model is bad.
Two checks run after scoring, on the outputs and the statuses scoring already
gave them:

- the *hint* (:class:`FormatHint`): more than a fifth of the outputs get no
  call from the chosen format (refused, or read as making no call) but decode
  to at least one call under another registered format;
- the *mismatch* (:class:`FormatMismatch`), the stronger one: the chosen format
  found its call syntax (any status but ``no_json``) in under a fifth of the
  outputs, while another format reads calls in more of the others than that.
  The scores then measure the format, not the model: on BFCL, every
  ``irrelevance`` question passes because nothing reads as a call.

Both are diagnostics only: they never change a status or a score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._parse import ParseResult

__all__ = [
    "FormatHint",
    "FORMAT_MISMATCH_FIELDS",
    "FormatMismatch",
    "syntax_found",
    "format_diagnosis",
    "format_hint",
    "calls_in_reasoning",
    "calls_in_reasoning_message",
]

#: One format's parse of an output, given the output and its example's tools.
Decoder = Callable[[str, Sequence[Mapping[str, Any]]], CallsParseResult | ParseResult]

#: The status of an output in which a format found none of its call syntax.
_NO_SYNTAX: Final = "no_json"


def _over_a_fifth(count: int, outputs: int) -> bool:
    return 5 * count > outputs


def _under_a_fifth(count: int, outputs: int) -> bool:
    return 5 * count < outputs


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


#: The fields of a :class:`FormatMismatch` as reports store it, in writing order.
FORMAT_MISMATCH_FIELDS: Final = (
    "output_format",
    "outputs",
    "syntax_found",
    "other_format",
    "other_reads_calls",
)


@dataclass(frozen=True, slots=True)
class FormatMismatch:
    """The chosen format found its call syntax in under a fifth of the outputs; another reads calls.

    Built only when the rule holds, and refusing counts that break it, so a
    report that carries one (and a reader that rebuilds it) states a fact the
    rule implies, not just numbers.

    Attributes:
        output_format: The format the outputs were scored with.
        outputs: How many outputs were scored.
        syntax_found: How many of them the chosen format found its call syntax
            in (any status but ``no_json``: a malformed call shows the syntax).
        other_format: The registered format reading calls in the most of the rest.
        other_reads_calls: How many outputs without the chosen syntax
            ``other_format`` reads at least one call in.

    Raises:
        ValueError: Counts the rule cannot produce (negative, more than the
            outputs, the chosen syntax in a fifth or more of the outputs, the
            other format reading no more outputs than the chosen found syntax
            in, or the other format being the chosen one).
    """

    output_format: str
    outputs: int
    syntax_found: int
    other_format: str
    other_reads_calls: int

    def __post_init__(self) -> None:
        if self.other_format == self.output_format:
            raise ValueError(f"other_format is the chosen format {self.output_format!r}")
        if not 0 <= self.syntax_found < self.other_reads_calls <= self.outputs - self.syntax_found:
            raise ValueError(
                f"needs 0 <= syntax_found ({self.syntax_found}) < other_reads_calls "
                f"({self.other_reads_calls}) <= outputs ({self.outputs}) - syntax_found"
            )
        if not _under_a_fifth(self.syntax_found, self.outputs):
            raise ValueError(
                f"syntax_found ({self.syntax_found}) is not under a fifth of {self.outputs} outputs"
            )

    @property
    def message(self) -> str:
        """The plain warning every summary prints before its table."""
        return (
            f"--output-format {self.output_format} found its call syntax in "
            f"{self.syntax_found} of {self.outputs} outputs, while {self.other_format} reads "
            f"tool calls in {self.other_reads_calls} of them: those count here as making no "
            f"call, so these scores measure the output format, not the model; score with "
            f"--output-format {self.other_format} (or the format the model writes)"
        )

    @property
    def not_meaningful(self) -> str:
        """The mark on a result that only no call can pass (BFCL's ``irrelevance``)."""
        return (
            f"not meaningful: {self.output_format} found its call syntax in just "
            f"{self.syntax_found} of {self.outputs} outputs, so the rest read as no call"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report's ``format_mismatch`` object (fields in :data:`FORMAT_MISMATCH_FIELDS`)."""
        return {name: getattr(self, name) for name in FORMAT_MISMATCH_FIELDS}


def syntax_found(statuses: Iterable[str]) -> int:
    """How many outputs the chosen format found its call syntax in, from their statuses.

    Every status but ``no_json`` (a call, an explicit empty list, or a call the
    format refused as malformed) shows the syntax; a report's reader recounts
    :attr:`FormatMismatch.syntax_found` with it from the rows it holds.
    """
    return sum(1 for status in statuses if status != _NO_SYNTAX)


def _makes_a_call(result: CallsParseResult | ParseResult) -> bool:
    if isinstance(result, ParseResult):
        return result.status == "ok"
    return result.status == "ok" and bool(result.calls)


def format_diagnosis(
    texts: Sequence[str],
    statuses: Sequence[str],
    chosen: str,
    decoders: Mapping[str, Decoder],
    tools: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> tuple[FormatHint | None, FormatMismatch | None]:
    """The hint and the mismatch for ``texts`` scored in ``chosen`` (each ``None`` when quiet).

    Each output the chosen format got no call from is decoded once per other
    format, and both checks count from those decodes.

    Args:
        texts: Every raw output that was scored.
        statuses: The parse status ``chosen`` gave each of ``texts`` (scoring
            has them already, so no output is parsed twice the same way).
        chosen: The name of the format they were scored with.
        decoders: The other registered formats' parses by name, each called
            as ``decoder(text, tools)`` (``chosen`` is skipped if present).
            Ties go to the first name in this order.
        tools: Each output's example tools, aligned with ``texts`` (default:
            none for every output), handed to the decoders as scoring hands
            them to the chosen format.

    Returns:
        ``(hint, mismatch)``: a :class:`FormatHint` when more than a fifth of
        ``texts`` get no call from ``chosen`` (a status other than ``ok``; an
        explicit empty list is an answer) and at least one call from one other
        format; a :class:`FormatMismatch` when ``chosen`` found its syntax in
        under a fifth of ``texts`` and another format reads calls in more of
        the rest than that.
    """
    outputs = len(texts)
    missed = [row for row, status in enumerate(statuses) if status != "ok"]
    if not _over_a_fifth(len(missed), outputs):
        # Then at least four fifths are calls in the chosen syntax: no mismatch either.
        return None, None
    offered = tools if tools is not None else [()] * outputs
    reads = {
        name: [_makes_a_call(decoder(texts[row], offered[row])) for row in missed]
        for name, decoder in decoders.items()
        if name != chosen
    }
    hint: FormatHint | None = None
    for name, read in reads.items():
        decoded = sum(read)
        if _over_a_fifth(decoded, outputs) and (hint is None or decoded > hint.decoded):
            hint = FormatHint(chosen, name, decoded, outputs)
    return hint, _mismatch(statuses, missed, chosen, reads)


def _mismatch(
    statuses: Sequence[str], missed: Sequence[int], chosen: str, reads: Mapping[str, list[bool]]
) -> FormatMismatch | None:
    outputs = len(statuses)
    found = syntax_found(statuses)
    if not _under_a_fifth(found, outputs):
        return None
    bare = [index for index, row in enumerate(missed) if statuses[row] == _NO_SYNTAX]
    best: FormatMismatch | None = None
    for name, read in reads.items():
        count = sum(1 for index in bare if read[index])
        if count > found and (best is None or count > best.other_reads_calls):
            best = FormatMismatch(chosen, outputs, found, name, count)
    return best


def format_hint(
    texts: Sequence[str],
    statuses: Sequence[str],
    chosen: str,
    decoders: Mapping[str, Decoder],
    tools: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> FormatHint | None:
    """The hint alone (see :func:`format_diagnosis`), or ``None`` when the format looks right."""
    return format_diagnosis(texts, statuses, chosen, decoders, tools)[0]


def calls_in_reasoning(
    texts: Sequence[str],
    statuses: Sequence[str],
    decode: Callable[[str, Sequence[Mapping[str, Any]]], CallsParseResult],
    tools: Sequence[Sequence[Mapping[str, Any]]],
) -> int:
    """How many outputs made no call in their answer but wrote one while reasoning.

    A call written inside ``<think>`` (or harmony's ``analysis`` channel) is
    not the answer, so such an output scores as making no call; counting them
    tells a model that would have called from one that never thought to.
    Only the outputs scored ``no_json`` are decoded again, for the flag
    :attr:`~sommelier_mlflow.toolcalls.CallsParseResult.calls_in_reasoning`.

    Args:
        texts: Every raw output that was scored.
        statuses: The parse status each of ``texts`` was scored with.
        decode: The chosen output format's decoder.
        tools: Each output's example tools, which the decoder receives.
    """
    return sum(
        1
        for text, status, offered in zip(texts, statuses, tools, strict=True)
        if status == _NO_SYNTAX and decode(text, offered).calls_in_reasoning
    )


def calls_in_reasoning_message(count: int, outputs: int) -> str:
    """The line every summary and the comparison report show for an arm's reasoning-only calls.

    Such outputs score as making no call, which is right (the answer made
    none) but hides that the model wanted to call; the line says so next to
    the output-format warning and hint, so the count is not read as abstention.

    Args:
        count: Outputs whose only calls were written while reasoning.
        outputs: How many outputs were scored.
    """
    return (
        f"{count} of {outputs} outputs made calls only inside their reasoning "
        "(<think>…</think>, or the format's reasoning channel), which do not count as answers"
    )
