"""Scoring modes and output formats: the two registries every scoring path goes through.

A *scoring mode* is everything that makes one kind of scoring what it is:
how gold calls are read and checked, how an output becomes the parse the
mode compares (its own strict JSON parser, or the strict check it applies to
calls decoded by an output format), the per-example match (what the
metrics read: the parse set against the gold), the metric
set (registered in :mod:`~sommelier_mlflow.toolcalls._registry` under the
mode's name), the slices it adds by default and its parser version. ``single``
(:mod:`~sommelier_mlflow.toolcalls._score`) and ``calls``
(:mod:`~sommelier_mlflow.toolcalls._calls_score`) are two registrations; a
third mode is one module that builds its match and registers a
:class:`ScoringMode` and its metrics. Nothing else branches on a mode's name.

An *output format* is a decoder in front of the mode's strict checks: it
turns a model's native tool-call syntax (``<tool_call>`` blocks, pythonic
lists, ...) into zero or more ``{"name", "arguments"}`` calls, repairing
nothing. A decoder receives the output and the example's tools
(``decode(text, tools)``): a format whose values are untyped text types them
by the tool's schema (:func:`~sommelier_mlflow.toolcalls.parameter_type`);
the built-in formats write typed JSON and ignore them. The default, ``json``,
has no decoder: the mode's own JSON parser reads the text, exactly as before
formats existed. A decoder's version joins
the report's ``parser_version`` (``sommelier.calls_parser.v1+hermes.v1``), so
the comparison gate refuses to compare arms decoded differently.

Both registries also load installed plugins from their entry-point groups
(see :mod:`sommelier_mlflow._plugins`).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Generic, Protocol, TypeVar

from sommelier_mlflow._deprecation import warn_renamed
from sommelier_mlflow._plugins import OUTPUT_FORMATS_GROUP, SCORING_MODES_GROUP, Registry
from sommelier_mlflow.errors import ConfigError, DataError
from sommelier_mlflow.toolcalls._calls_parse import (
    CALLS_PARSER_VERSION,
    CallsParseResult,
    parse_tool_calls,
)
from sommelier_mlflow.toolcalls._normalise import gold_calls_of
from sommelier_mlflow.toolcalls._parse import ParseResult
from sommelier_mlflow.toolcalls._registry import (
    ScoringMetric,
    add_metric_set,
    register_scoring_metric,
    scoring_metrics,
)
from sommelier_mlflow.toolcalls._summary import (
    ArmResults,
    ComparisonResults,
    Counts,
    SliceMetrics,
)

__all__ = [
    "Parsed",
    "JSON_FORMAT",
    "Tools",
    "Decoder",
    "OutputFormat",
    "TrajectoryRow",
    "TrajectoryJudge",
    "TrajectoryScoring",
    "WeightedFigure",
    "WeightedOverall",
    "ScoringMode",
    "register_scoring_mode",
    "register_builtin_mode",
    "scoring_mode",
    "find_scoring_mode",
    "scoring_mode_names",
    "register_output_format",
    "output_format",
    "output_format_names",
    "output_format_hint_order",
    "single_call",
    "calls_mode",
]

#: What a mode's parse of one output is: one call (``single``) or a list of calls.
Parsed = ParseResult | CallsParseResult

JSON_FORMAT: Final = "json"

#: The example's tools as a decoder receives them: the row's own tool schemas.
Tools = Sequence[Mapping[str, Any]]

#: An output format's decoder: the raw output and the example's tools to calls.
Decoder = Callable[[str, Tools], CallsParseResult]

GoldT = TypeVar("GoldT")

_POSITIONAL: Final = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _reads_text_only(decode: Callable[..., Any]) -> bool:
    """Whether ``decode`` is the deprecated one-argument form ``decode(text)``.

    A callable whose signature cannot be read (a builtin) is taken at its word
    as the current form; one that takes a second positional argument, or any
    number of them, is the current form.
    """
    try:
        parameters = inspect.signature(decode).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(parameter.kind is inspect.Parameter.VAR_POSITIONAL for parameter in parameters):
        return False
    return sum(1 for parameter in parameters if parameter.kind in _POSITIONAL) == 1


def _with_tools(decode: Callable[[str], CallsParseResult]) -> Decoder:
    """A one-argument decoder as a current one: it is handed the text and never the tools."""

    def decode_text(text: str, tools: Tools) -> CallsParseResult:
        del tools  # the old form cannot read them
        return decode(text)

    decode_text.__wrapped__ = decode  # type: ignore[attr-defined]
    decode_text.__doc__ = decode.__doc__
    return decode_text


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """A registered output format: a decoder from a model's native syntax to calls.

    Attributes:
        name: The ``--output-format`` name.
        description: What the format accepts, in one sentence.
        decode: Pure function ``decode(text, tools)`` from the raw output and
            the example's tools (the row's tool schemas, ``()`` when the caller
            has none) to a :class:`~sommelier_mlflow.toolcalls.CallsParseResult`:
            ``no_json`` when the text makes no call in this format, ``ok`` with
            ``()`` for an explicit empty list, ``invalid_json``/``invalid_shape``
            for a malformed one. It must never raise for any ``str`` and any
            tools. ``None`` only for ``json``: the scoring mode's own parser
            reads the text. Deprecated: a one-argument ``decode(text)`` is
            still accepted for one release (wrapped, with a
            ``DeprecationWarning``); it never sees the tools.
        version: The decoder's version string, joined to the mode's parser
            version in reports (``None`` only for ``json``, which adds nothing).
        special_tokens: The format's tags may be special tokens of the
            model's tokenizer (Hermes' ``<tool_call>``), so generation must
            decode without dropping them.
        variant_of: The format this one reads every output of, and more
            (``llama4_pythonic``: ``pythonic`` with optional code tokens).
            When both read calls in as many outputs, the format hint names
            the base format, the one the user more likely meant.
    """

    name: str
    description: str
    decode: Decoder | None
    version: str | None = None
    special_tokens: bool = False
    variant_of: str | None = None

    def __post_init__(self) -> None:
        if (self.decode is None) != (self.version is None):
            raise ConfigError(
                f"output format {self.name!r}: a decoder needs a version string (recorded in "
                "reports) and a version needs a decoder"
            )
        if self.decode is not None and not callable(self.decode):
            raise ConfigError(f"output format {self.name!r}: decode must be callable")
        if self.variant_of is not None and (
            type(self.variant_of) is not str or self.variant_of in ("", self.name)
        ):
            raise ConfigError(
                f"output format {self.name!r}: variant_of must name another format, "
                f"not {self.variant_of!r}"
            )
        if self.decode is not None and _reads_text_only(self.decode):
            warnings.warn(
                f"output format {self.name!r}: decode(text) is deprecated and will be refused "
                "in the next release; define decode(text, tools), which also receives the "
                "example's tool schemas",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "decode", _with_tools(self.decode))  # type: ignore[arg-type]
        if self.version is not None and (not self.version or "+" in self.version):
            raise ConfigError(
                f"output format {self.name!r}: version {self.version!r} must be a non-empty "
                "string without '+' (it is joined to the parser version with '+')"
            )


class TrajectoryRow(Protocol):
    """What a mode's trajectory judge reads of one multi-turn row and its outputs.

    ``evaluation``'s ``AnsweredExample`` is one; the protocol keeps this layer
    free of it.
    """

    @property
    def example_id(self) -> str:
        """The row's id."""
        ...

    @property
    def tools(self) -> Sequence[Mapping[str, Any]]:
        """The tools offered from the first turn on."""
        ...

    @property
    def multi_turn(self) -> Mapping[str, Any] | None:
        """The row's ``multi_turn`` field (user turns, added tools, gold turns, environment)."""
        ...

    @property
    def turns(self) -> tuple[tuple[str, ...], ...] | None:
        """Per user turn, the model's raw output at each step, in order."""
        ...


#: Judges one multi-turn row: the row, and how to read one step's raw text with
#: the tools offered at its turn; returns ``(parse of the row, comparison)``.
TrajectoryJudge = Callable[[TrajectoryRow, Callable[[str, Tools], Parsed]], tuple[Parsed, Any]]


@dataclass(frozen=True)
class TrajectoryScoring:
    """How a mode scores multi-turn rows, whose outputs are trajectories run against tools.

    Attributes:
        metrics: Metrics scored after the mode's own, only when a split has
            multi-turn rows (a split without any keeps its report unchanged);
            every comparison of the mode, single-turn ones included, must
            answer them (``(0, 0)`` where a metric does not apply).
        open: Opens what judging needs for one scoring call (BFCL: a sandbox
            worker process), as a context manager yielding the judge; it is
            called only when a split has multi-turn rows.
    """

    metrics: tuple[ScoringMetric[Any], ...]
    open: Callable[[], AbstractContextManager[TrajectoryJudge]]


@dataclass(frozen=True, slots=True)
class WeightedFigure:
    """One arm's weighted overall figure, exactly.

    Attributes:
        value: ``sum(weight * passed / total)`` over the weighted slice values.
        weights: The weight of each slice value counted (they sum to 1).
        counts: ``(passed, total)`` of every slice value present.
        left_out: The slice values present but not weighted, with why.
    """

    value: Fraction
    weights: Mapping[str, Fraction]
    counts: Mapping[str, tuple[int, int]]
    left_out: Mapping[str, str]


@dataclass(frozen=True)
class WeightedOverall:
    """A mode's overall figure: a weighted mean of one metric over the values of one slice field.

    The weights are a function of which values are present and their sizes,
    so the figure is not a count; it is reported as a value, and its paired
    difference gets an interval that resamples within each slice.

    Attributes:
        name: The figure's name (an MLflow key segment).
        metric: The binary metric averaged per slice (also McNemar's outcome).
        field: The slice field whose values are weighted (``category``).
        weights: ``{value: size}`` of the values present to
            ``({value: weight}, {value: why it is left out})``; the weights
            sum to 1 over the values kept.
        note: One sentence on what the weights are and what is left out.
    """

    name: str
    metric: str
    field: str
    weights: Callable[[Mapping[str, int]], tuple[Mapping[str, Fraction], Mapping[str, str]]]
    note: str

    def counts(
        self, field_slices: Mapping[str, SliceMetrics], metric: str | None = None
    ) -> dict[str, tuple[int, int]]:
        """``{value: (numerator, denominator)}`` of ``metric`` (default: the figure's) per slice."""
        prefix = f"{self.field}:"
        out: dict[str, tuple[int, int]] = {}
        for name, entry in field_slices.items():
            value = entry.metrics.get(metric or self.metric)
            if name.startswith(prefix) and value is not None and value.denominator > 0:
                out[name[len(prefix) :]] = (value.numerator, value.denominator)
        return out

    def figure(
        self, field_slices: Mapping[str, SliceMetrics], metric: str | None = None
    ) -> WeightedFigure | None:
        """The figure of one arm from its ``field`` slices (``None`` when no value is weighted).

        Args:
            field_slices: The arm's ``F:V`` slices.
            metric: Average another binary metric with the same weights
                (BFCL's leaderboard verdicts); default :attr:`metric`.
        """
        counts = self.counts(field_slices, metric)
        weights, left_out = self.weights({value: total for value, (_, total) in counts.items()})
        if not weights:
            return None
        value = sum(
            (weight * Fraction(*counts[name]) for name, weight in weights.items()), Fraction(0)
        )
        return WeightedFigure(value, weights, counts, left_out)

    def compared(
        self, comparison: ComparisonResults, kind: str, metric: str | None = None
    ) -> WeightedFigure | None:
        """The figure of one arm (``base`` or ``adapter``) of a comparison."""
        view = {
            name: _ArmSlice(entry.base if kind == "base" else entry.adapter)
            for name, entry in comparison.slices.items()
        }
        return self.figure(view, metric)


@dataclass(frozen=True, slots=True)
class _ArmSlice:
    """One arm's metrics on one slice of a comparison, as an arm's own slice holds them."""

    metrics: Mapping[str, Counts]


@dataclass(frozen=True)
class ScoringMode(Generic[GoldT]):
    """One registered scoring mode (see the module docstring).

    Attributes:
        name: The ``--scoring`` name; also the name of its metric set.
        description: What the mode scores, in one sentence.
        parser_version: The version of its own strict parser, recorded in reports.
        parse_json: The mode's own parser of raw text (the ``json`` output format).
        accept_calls: The mode's strict check of calls another format decoded
            (e.g. ``single`` accepts exactly one call).
        read_gold: Reads a user-supplied gold value (a call, a list, their
            JSON) into the gold calls; ``where`` names it in errors (DataError).
        gold_problem: Why an example with this many gold calls cannot be
            scored in this mode, or ``None``: a phrase that follows
            "example 'x' " (``"has 2 gold calls; ..."``) and says what to do.
        make_gold: Builds the match's gold object from an example's
            calls (called once per distinct gold; the result is reused).
        match: The per-example match every metric of the mode reads (the
            parse set against the gold; ``compare`` before issue 31).
        default_slices: Slice fields the mode adds in front of the declared ones.
        derived_slices: For each slice field computed from the gold calls
            rather than read from the row, the function giving its value.
        catalog_reference: What catalog measures receive as ``reference`` for
            a row with these gold calls (default: the list of calls).
        summary_lines: The mode's own summing-up of one arm, printed (indented)
            after the arm's metrics by ``evaluate``, ``score`` and ``main``
            (BFCL's leaderboard aggregation); ``None``: nothing more.
        markdown_lines: The mode's own section of ``comparison_report.md``
            (Markdown lines, after the per-slice tables; escape users' data);
            ``None``: no section.
        no_call_slice: Whether only an output making no call passes slice
            ``name`` (BFCL's ``irrelevance`` categories): an arm whose format
            found almost no call syntax passes it without judging anything,
            so summaries mark it not meaningful. ``None``: no such slice.
        trajectories: How the mode scores multi-turn rows (BFCL's executed
            questions); ``None``: a split with such rows is refused.
        weighted_overall: The mode's weighted overall figure, logged and
            compared beside the metrics (BFCL's overall); ``None``: none.
    """

    name: str
    description: str
    parser_version: str
    parse_json: Callable[[str], Parsed]
    accept_calls: Callable[[CallsParseResult], Parsed]
    read_gold: Callable[[object, str], tuple[dict[str, Any], ...]]
    gold_problem: Callable[[int], str | None]
    make_gold: Callable[[Sequence[Mapping[str, Any]]], GoldT]
    match: Callable[[Parsed, GoldT], Any]
    default_slices: tuple[str, ...] = ()
    derived_slices: Mapping[str, Callable[[Sequence[Mapping[str, Any]]], str]] = field(
        default_factory=dict
    )
    catalog_reference: Callable[[Sequence[Mapping[str, Any]]], object] = list
    summary_lines: Callable[[ArmResults], list[str]] | None = None
    markdown_lines: Callable[[ComparisonResults], list[str]] | None = None
    no_call_slice: Callable[[str], bool] | None = None
    trajectories: TrajectoryScoring | None = None
    weighted_overall: WeightedOverall | None = None

    @property
    def compare(self) -> Callable[[Parsed, GoldT], Any]:
        """Deprecated name of :attr:`match` (issue 31: a comparison is base vs adapter)."""
        warn_renamed("ScoringMode.compare", "ScoringMode.match")
        return self.match

    def parse(self, text: str, output_format: OutputFormat, tools: Tools) -> Parsed:
        """The mode's parse of one raw output read in ``output_format``.

        Args:
            text: The raw output.
            output_format: The format it is written in.
            tools: The example's tools, handed to the format's decoder (the
                mode's own JSON parser reads typed JSON and needs none).
        """
        if output_format.decode is None:
            return self.parse_json(text)
        return self.accept_calls(output_format.decode(text, tools))

    def full_parser_version(self, output_format: OutputFormat) -> str:
        """The report's ``parser_version``: the mode's, plus the decoder's when not ``json``."""
        if output_format.version is None:
            return self.parser_version
        return f"{self.parser_version}+{output_format.version}"

    def gold_calls(self, value: object, where: str) -> tuple[dict[str, Any], ...]:
        """Read and check one user-supplied gold value (DataError, exit 2, when unusable)."""
        calls = self.read_gold(value, where)
        problem = self.gold_problem(len(calls))
        if problem is not None:
            raise DataError(f"{where} {problem}")
        return calls

    def metrics(self) -> tuple[ScoringMetric[Any], ...]:
        """The mode's registered metrics, in column order."""
        return scoring_metrics(self.name)

    def mcnemar_metric(self) -> str | None:
        """The metric McNemar's test uses in this mode, if one is flagged."""
        return next((metric.name for metric in self.metrics() if metric.mcnemar), None)


_dataclass_init = ScoringMode.__init__


def _init_taking_compare(self: ScoringMode[Any], *args: Any, **kwargs: Any) -> None:
    # ``compare=`` is the keyword's name before issue 31; kept one release.
    if "compare" in kwargs:
        warn_renamed("ScoringMode(compare=...)", "ScoringMode(match=...)")
        kwargs["match"] = kwargs.pop("compare")
    _dataclass_init(self, *args, **kwargs)


ScoringMode.__init__ = _init_taking_compare  # type: ignore[method-assign]

_MODES: Final[Registry[ScoringMode[Any]]] = Registry(
    "scoring mode", SCORING_MODES_GROUP, ScoringMode
)
_FORMATS: Final[Registry[OutputFormat]] = Registry(
    "output format", OUTPUT_FORMATS_GROUP, OutputFormat
)


def register_scoring_mode(mode: ScoringMode[Any]) -> ScoringMode[Any]:
    """Register a scoring mode and open its (empty) metric set.

    Register the mode before its metrics (:func:`register_scoring_metric`
    with ``mode=mode.name``).

    Raises:
        ConfigError: A malformed name, or a different mode under the same name.
    """
    _MODES.register(getattr(mode, "name", ""), mode)
    add_metric_set(mode.name)
    return mode


def register_builtin_mode(
    mode: ScoringMode[Any], metrics: Iterable[ScoringMetric[Any]]
) -> ScoringMode[Any]:
    """Register one of the package's own modes, then its metrics in report column order.

    The metrics follow the mode because registering it opens its metric set;
    they are marked built in, so no plugin can unregister them.
    """
    register_scoring_mode(mode)
    for metric in metrics:
        register_scoring_metric(metric, mode=mode.name, builtin=True)
    return mode


def scoring_mode(name: str) -> ScoringMode[Any]:
    """The registered mode ``name`` (ConfigError, exit 2, listing the names, if unknown)."""
    return _MODES.get(name)


def find_scoring_mode(name: str) -> ScoringMode[Any] | None:
    """The registered mode ``name``, or ``None`` (plugins loaded first).

    For views of a report already scored (summaries, Markdown), which show
    what they can for a mode whose plugin is not installed here.
    """
    return _MODES.get(name) if name in _MODES else None


def scoring_mode_names() -> tuple[str, ...]:
    """Every registered scoring mode, plugins included, sorted."""
    return _MODES.names()


def register_output_format(output_format: OutputFormat) -> OutputFormat:
    """Register an output format under its name (usable by every command at once).

    Raises:
        ConfigError: A malformed name, or a different format under the same name.
    """
    return _FORMATS.register(getattr(output_format, "name", ""), output_format)


def unregister_output_format(name: str) -> None:
    """Remove a format a test or plugin registered (``json`` cannot be removed)."""
    if name == JSON_FORMAT:
        raise ConfigError("the json output format is built in and cannot be removed")
    _FORMATS.unregister(name)


def output_format(name: str) -> OutputFormat:
    """The registered format ``name`` (ConfigError, exit 2, listing the names, if unknown)."""
    return _FORMATS.get(name)


def output_format_names() -> tuple[str, ...]:
    """Every registered output format, plugins included, sorted."""
    return _FORMATS.names()


def output_format_hint_order() -> tuple[str, ...]:
    """Every registered output format, sorted, each variant after every base format.

    The format hint breaks ties in this order, so outputs that a format and
    its variant read alike are said to decode as the base format.
    """
    names = _FORMATS.names()
    return tuple(sorted(names, key=lambda name: _FORMATS.get(name).variant_of is not None))


def single_call(decoded: CallsParseResult) -> ParseResult:
    """The ``single`` mode's check of decoded calls: exactly one call, whatever the format.

    Zero calls is ``no_json`` (the output made no call in the format); an
    explicit empty list or several calls are ``invalid_shape``, the status
    the JSON parser gives to a list.
    """
    if decoded.status != "ok":
        return ParseResult(decoded.status)
    calls = decoded.calls or ()
    if len(calls) != 1:
        return ParseResult("invalid_shape")
    return ParseResult("ok", calls[0])


def _any_count(count: int) -> None:
    del count  # every number of gold calls, zero included, is an example


def _accept_calls(decoded: CallsParseResult) -> CallsParseResult:
    return decoded  # every decoded list is judged as it is


def _read_gold_calls(value: object, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(gold_calls_of(value, where=where))


def calls_mode(
    name: str,
    description: str,
    *,
    make_gold: Callable[[Sequence[Mapping[str, Any]]], GoldT],
    match: Callable[[Parsed, GoldT], Any],
    default_slices: tuple[str, ...],
    read_gold: Callable[[object, str], tuple[dict[str, Any], ...]] = _read_gold_calls,
    derived_slices: Mapping[str, Callable[[Sequence[Mapping[str, Any]]], str]] | None = None,
    summary_lines: Callable[[ArmResults], list[str]] | None = None,
    markdown_lines: Callable[[ComparisonResults], list[str]] | None = None,
    no_call_slice: Callable[[str], bool] | None = None,
    trajectories: TrajectoryScoring | None = None,
    weighted_overall: WeightedOverall | None = None,
) -> ScoringMode[GoldT]:
    """A scoring mode that reads outputs with the calls parser, as ``calls`` and ``bfcl`` do.

    Such a mode judges every decoded list as it is, and takes an example with
    any number of gold calls, zero included (abstention, irrelevance and
    parallel questions); what differs is how it reads and matches the gold.
    """
    return ScoringMode(
        name=name,
        description=description,
        parser_version=CALLS_PARSER_VERSION,
        parse_json=parse_tool_calls,
        accept_calls=_accept_calls,
        read_gold=read_gold,
        gold_problem=_any_count,
        make_gold=make_gold,
        match=match,
        default_slices=default_slices,
        derived_slices={} if derived_slices is None else derived_slices,
        summary_lines=summary_lines,
        markdown_lines=markdown_lines,
        no_call_slice=no_call_slice,
        trajectories=trajectories,
        weighted_overall=weighted_overall,
    )


register_output_format(
    OutputFormat(
        JSON_FORMAT,
        "The product's own format: a JSON call object, or a JSON array of them in calls "
        "mode; the first balanced {...} or [...] span is read, nothing is repaired.",
        decode=None,
    )
)
