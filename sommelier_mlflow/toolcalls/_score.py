"""The spec's five strict tool-call metrics, and the machinery that scores any registered set.

Every example contributes additive integer components to each metric, so a
corpus value, a slice value and every bootstrap resample are all ratios of
sums of the same integers. Parse failures are never dropped: they add to the
denominators and nothing to the numerators.

The five metrics are defined once, below, as registry entries (see
:mod:`~sommelier_mlflow.toolcalls._registry`); scoring iterates whatever the
registry holds, so a plug-in metric is scored, summed and reported the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow._gc import paused_gc
from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import InputError, InvariantViolationError, UnknownMetricError
from sommelier_mlflow.toolcalls._flatten import (
    count_matched_pairs,
    count_pairs,
    flatten_arguments,
)
from sommelier_mlflow.toolcalls._modes import (
    Parsed,
    ScoringMode,
    register_builtin_mode,
    single_call,
)
from sommelier_mlflow.toolcalls._normalise import gold_call_of
from sommelier_mlflow.toolcalls._parse import (
    PARSE_STATUSES,
    PARSER_VERSION,
    ParseResult,
    is_tool_call,
    parse_tool_call,
)
from sommelier_mlflow.toolcalls._registry import (
    DEFAULT_MODE,
    ScoringMetric,
    builtin_scoring_metrics,
    is_builtin_metric,
    scoring_metric_names,
    scoring_metrics,
)

__all__ = [
    "MetricValue",
    "GoldCall",
    "CallMatch",
    "METRIC_NAMES",
    "ExampleScore",
    "score_components",
    "score_example",
    "one_example_score",
    "score_records",
    "sum_components",
    "metrics_from_scores",
    "compute_metrics",
]


def _arguments_key(arguments: Any) -> bytes:
    """A byte string equal for two argument objects exactly when their canonical JSON is.

    Sorted-key orjson output differs from :func:`canonical_json` only in not
    escaping non-ASCII, which is a one-to-one respelling, so comparing it is
    comparing canonical forms without paying for the escaping on every row.
    """
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # Deeper than orjson serialises: take the slow canonical spelling (still one-to-one).
        return b"\x00" + canonical_json(arguments).encode("ascii")


@dataclass(frozen=True, slots=True)
class MetricValue:
    """An exact rate: ``value == numerator / denominator`` (0.0 on an empty denominator).

    Reports keep the integers so any rate can be recomputed without trusting
    the float.
    """

    numerator: int
    denominator: int

    def __post_init__(self) -> None:
        if self.denominator < 0 or self.numerator < 0 or self.numerator > self.denominator:
            raise InputError(
                f"invalid metric counts {self.numerator}/{self.denominator}: "
                "need 0 <= numerator <= denominator"
            )

    @property
    def value(self) -> float:
        """The rate as a float, computed only for reporting."""
        return self.numerator / self.denominator if self.denominator else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Serialise as ``{"value", "numerator", "denominator"}``."""
        return {"value": self.value, "numerator": self.numerator, "denominator": self.denominator}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricValue:
        """Rebuild from a report entry, checking that the stored float agrees with the counts."""
        try:
            numerator, denominator = data["numerator"], data["denominator"]
        except (KeyError, TypeError) as exc:
            raise InputError(f"metric entry {data!r} lacks numerator/denominator") from exc
        if type(numerator) is not int or type(denominator) is not int:
            raise InputError(f"metric counts must be integers, got {numerator!r}/{denominator!r}")
        metric = cls(numerator, denominator)
        if "value" in data and data["value"] != metric.value:
            raise InputError(
                f"metric value {data['value']!r} disagrees with {numerator}/{denominator}"
            )
        return metric


def _as_dict(value: object) -> object:
    """Let read-only mappings (e.g. from pandas or MLflow) pass the exact-dict check."""
    if type(value) is dict:  # the common case, without the slower ABC check
        return value
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


class GoldCall:
    """A validated gold call with its canonical forms computed once.

    Scoring compares the same gold call against every prediction (and the
    bootstrap re-uses the components), so the canonical arguments and the
    flattened pairs are derived once here rather than per metric.
    """

    __slots__ = ("_pairs", "arguments", "arguments_key", "name", "pair_count")

    def __init__(self, call: Mapping[str, Any]) -> None:
        checked = _as_dict(call)
        if not is_tool_call(checked):
            raise InputError(
                f"gold call must be exactly {{'name': non-empty str, 'arguments': object}}, "
                f"got {call!r}"
            )
        self.name: str = checked["name"]
        self.arguments: dict[str, Any] = checked["arguments"]
        self.arguments_key: bytes = _arguments_key(self.arguments)
        self.pair_count: int = count_pairs(self.arguments)
        self._pairs: dict[str, str] | None = None

    @property
    def pairs(self) -> dict[str, str]:
        """The flattened gold pairs, built on first use (only inexact predictions need them)."""
        if self._pairs is None:
            self._pairs = flatten_arguments(self.arguments)
        return self._pairs


class CallMatch:
    """One parsed completion set against its gold call: what every metric reads.

    The facts several metrics share (is the name right, are the arguments
    canonically equal, how many argument pairs match) are computed once per
    example here, the pair-level ones only when a metric asks for them and
    the arguments are not an exact match.

    Attributes:
        status: The parser's status for the completion.
        call: The parsed call (``None`` unless ``status == "ok"``).
        gold: The gold call.
        parsed: ``status == "ok"``.
        name_correct: The parsed call names the gold function.
        arguments_correct: The parsed arguments equal the gold's canonically.
    """

    __slots__ = ("_pairs", "arguments_correct", "call", "gold", "name_correct", "parsed", "status")

    def __init__(
        self, status: str, call: Mapping[str, Any] | None, gold: GoldCall | Mapping[str, Any]
    ) -> None:
        self.gold: GoldCall = gold if isinstance(gold, GoldCall) else GoldCall(gold)
        self.status = status
        self._pairs: tuple[int, int] | None = None
        if status != "ok":
            if status not in PARSE_STATUSES:
                raise InputError(
                    f"unknown parse_status {status!r}; expected one of {PARSE_STATUSES}"
                )
            self.call: dict[str, Any] | None = None
            self.parsed = self.name_correct = self.arguments_correct = False
            return
        checked = _as_dict(call)
        if not is_tool_call(checked):
            raise InputError(f"parse_status is 'ok' but parsed_call is not a tool call: {call!r}")
        self.call = checked
        self.parsed = True
        self.name_correct = checked["name"] == self.gold.name
        arguments = checked["arguments"]
        # Canonically equal values are equal in Python too, so Python's C-level
        # inequality settles most wrong answers without serialising anything;
        # Python-equal ones (1 == 1.0 == True) are confirmed canonically.
        try:
            maybe_equal = bool(arguments == self.gold.arguments)
        except RecursionError:  # too deep for Python's comparison: let the keys decide
            maybe_equal = True
        self.arguments_correct = (
            maybe_equal and _arguments_key(arguments) == self.gold.arguments_key
        )

    @property
    def gold_pairs(self) -> int:
        """Flattened argument pairs of the gold call."""
        return self.gold.pair_count

    def _pair_counts(self) -> tuple[int, int]:
        if self._pairs is None:
            if self.call is None:
                self._pairs = (0, 0)
            elif self.arguments_correct:
                self._pairs = (self.gold.pair_count, self.gold.pair_count)
            else:
                arguments = self.call["arguments"]
                self._pairs = (
                    count_pairs(arguments),
                    count_matched_pairs(arguments, self.gold.arguments),
                )
        return self._pairs

    @property
    def predicted_pairs(self) -> int:
        """Flattened argument pairs of the prediction (0 when nothing parsed)."""
        return self._pair_counts()[0]

    @property
    def matched_pairs(self) -> int:
        """Predicted pairs whose path and canonical value both appear in the gold call."""
        return self._pair_counts()[1]


def _valid_json(match: CallMatch) -> tuple[int, int]:
    return int(match.parsed), 1


def _function_name(match: CallMatch) -> tuple[int, int]:
    return int(match.name_correct), 1


def _argument_exact(match: CallMatch) -> tuple[int, int]:
    return int(match.arguments_correct), 1


def _argument_f1(match: CallMatch) -> tuple[int, int]:
    # Micro F1 = 2*matched / (predicted + gold): additive, so sums of rows stay exact.
    return 2 * match.matched_pairs, match.predicted_pairs + match.gold_pairs


def _full_call(match: CallMatch) -> tuple[int, int]:
    return int(match.name_correct and match.arguments_correct), 1


def _read_gold_call(value: object, where: str) -> tuple[dict[str, Any], ...]:
    return (gold_call_of(value, where=where),)


def _one_gold_call(count: int) -> str | None:
    if count == 1:
        return None
    what = "no gold call (an abstention example)" if count == 0 else f"{count} gold calls"
    return (
        f"has {what}; the five single-call metrics need exactly one per example: "
        "score this split with --scoring calls"
    )


def _make_gold_call(calls: Sequence[Mapping[str, Any]]) -> GoldCall:
    return GoldCall(calls[0])


def _first_call(calls: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    return calls[0]  # catalog measures of the single mode receive the one gold call


def _match_call(parsed: Parsed, gold: GoldCall) -> CallMatch:
    call = parsed.call if isinstance(parsed, ParseResult) else None
    return CallMatch(parsed.status, call, gold)


register_builtin_mode(
    ScoringMode(
        name=DEFAULT_MODE,
        description="Exactly one gold call per example, compared call to call.",
        parser_version=PARSER_VERSION,
        parse_json=parse_tool_call,
        accept_calls=single_call,
        read_gold=_read_gold_call,
        gold_problem=_one_gold_call,
        make_gold=_make_gold_call,
        match=_match_call,
        catalog_reference=_first_call,
    ),
    # The spec's five, in the spec's order: registration order is report column order.
    (
        ScoringMetric(
            "valid_json_rate",
            "Share of outputs that parse into exactly one well-formed tool call.",
            _valid_json,
            binary=True,
            in_table=False,  # the table's parse_status column already says it
        ),
        ScoringMetric(
            "function_name_accuracy",
            "Share of outputs whose parsed call names the gold function.",
            _function_name,
            binary=True,
            table_column="name_correct",
        ),
        ScoringMetric(
            "argument_exact_match",
            "Share of outputs whose arguments equal the gold arguments exactly.",
            _argument_exact,
            binary=True,
            table_column="arguments_correct",
        ),
        ScoringMetric(
            "argument_f1",
            "Micro F1 over flattened argument path/value pairs.",
            _argument_f1,
        ),
        ScoringMetric(
            "full_call_exact_match",
            "Share of outputs with the exact gold function name and arguments.",
            _full_call,
            binary=True,
            mcnemar=True,
            table_column="full_call_correct",
        ),
    ),
)

METRIC_NAMES: Final[tuple[str, ...]] = tuple(metric.name for metric in builtin_scoring_metrics())
"""The spec's five metric names in the spec's order (the registry may hold more)."""


@dataclass(frozen=True, slots=True)
class ExampleScore:
    """One example's additive components, one per metric of ``metric_names``."""

    metric_names: tuple[str, ...]
    numerators: tuple[int, ...]
    denominators: tuple[int, ...]

    def component(self, name: str) -> tuple[int, int]:
        """``(numerator, denominator)`` of metric ``name``."""
        try:
            index = self.metric_names.index(name)
        except ValueError:
            raise UnknownMetricError(
                f"no component for metric {name!r}; scored {list(self.metric_names)}"
            ) from None
        return self.numerators[index], self.denominators[index]

    def correct(self, name: str) -> bool:
        """Whether the example fully scores on ``name`` (``numerator == denominator > 0``)."""
        numerator, denominator = self.component(name)
        return denominator > 0 and numerator == denominator

    @property
    def full_call_correct(self) -> bool:
        """Whether the example is a full-call exact match (the McNemar outcome)."""
        return self.correct("full_call_exact_match")


def _checked_component(metric: ScoringMetric[Any], match: object) -> tuple[int, int]:
    numerator, denominator = metric.component(match)
    if (
        type(numerator) is not int
        or type(denominator) is not int
        or not 0 <= numerator <= denominator
    ):
        raise InvariantViolationError(
            f"metric {metric.name!r} returned components {numerator!r}/{denominator!r}; a "
            "component must be integers with 0 <= numerator <= denominator"
        )
    return numerator, denominator


def score_components(
    matches: Iterable[Any], metrics: Sequence[ScoringMetric[Any]] | None = None
) -> tuple[list[int], list[int]]:
    """Every metric's components for every match, flat and row-major.

    Row ``i``'s components for metric ``j`` are at ``i * len(metrics) + j``;
    the caller reshapes (the evaluation layer into ``(n, m)`` integer arrays).
    Built-in components are trusted; a plug-in's are checked to be exact
    counts, because one float would silently corrupt every sum downstream.
    The cycle collector is paused for the batch (see :mod:`sommelier_mlflow._gc`).

    Args:
        matches: The examples, compared with their gold calls: the match
            type of the metrics' mode (:class:`CallMatch` for ``single``).
        metrics: The metrics, in column order (default: the ``single`` mode's).

    Raises:
        InvariantViolationError: A plug-in component that is not an exact count.
    """
    chosen = scoring_metrics() if metrics is None else tuple(metrics)
    plain = [metric.component for metric in chosen if is_builtin_metric(metric)]
    numerators: list[int] = []
    denominators: list[int] = []
    add_numerator, add_denominator = numerators.append, denominators.append
    with paused_gc():  # ``matches`` may parse lazily: the whole batch runs paused
        if len(plain) == len(chosen):
            for match in matches:
                for component in plain:
                    numerator, denominator = component(match)
                    add_numerator(numerator)
                    add_denominator(denominator)
        else:
            for match in matches:
                for metric in chosen:
                    numerator, denominator = _checked_component(metric, match)
                    add_numerator(numerator)
                    add_denominator(denominator)
    return numerators, denominators


def score_example(
    parse_status: str, parsed_call: Mapping[str, Any] | None, gold: GoldCall | Mapping[str, Any]
) -> ExampleScore:
    """Score one parsed completion against its gold call on every registered metric.

    Args:
        parse_status: The parser's status for the completion.
        parsed_call: The parsed call (required when the status is ``ok``).
        gold: The gold call, raw or already wrapped in :class:`GoldCall`.

    Raises:
        InputError: If the status is unknown, or ``ok`` without a valid call, or
            the gold call is malformed.
    """
    return one_example_score(CallMatch(parse_status, parsed_call, gold), DEFAULT_MODE)


def one_example_score(match: object, mode: str) -> ExampleScore:
    """Every metric of ``mode`` on one match (of that mode's match type)."""
    metrics = scoring_metrics(mode)
    numerators, denominators = score_components([match], metrics)
    return ExampleScore(
        tuple(metric.name for metric in metrics), tuple(numerators), tuple(denominators)
    )


_Match = TypeVar("_Match")


def record_matches(
    records: Iterable[Mapping[str, Any]],
    match: Callable[[Any, Any, Any], _Match],
    parsed_field: str,
    gold_field: str,
) -> Iterator[_Match]:
    """Matches built from record mappings, naming the record that lacks a field."""
    for index, record in enumerate(records):
        try:
            yield match(record["parse_status"], record.get(parsed_field), record[gold_field])
        except KeyError as exc:
            raise InputError(f"record {index} lacks field {exc.args[0]!r}") from exc


def _matches(records: Iterable[Mapping[str, Any]]) -> Iterator[CallMatch]:
    return record_matches(records, CallMatch, "parsed_call", "gold_call")


def score_records(records: Iterable[Mapping[str, Any]]) -> list[ExampleScore]:
    """Score mappings holding ``parse_status``, ``parsed_call`` and ``gold_call``."""
    metrics = scoring_metrics()
    names = tuple(metric.name for metric in metrics)
    width = len(names)
    numerators, denominators = score_components(_matches(records), metrics)
    return [
        ExampleScore(
            names,
            tuple(numerators[start : start + width]),
            tuple(denominators[start : start + width]),
        )
        for start in range(0, len(numerators), width)
    ]


def sum_components(
    names: Sequence[str], numerators: Sequence[int], denominators: Sequence[int]
) -> dict[str, MetricValue]:
    """Corpus metrics from the flat row-major components :func:`score_components` returns."""
    width = len(names)
    return {
        name: MetricValue(sum(numerators[column::width]), sum(denominators[column::width]))
        for column, name in enumerate(names)
    }


def metrics_from_scores(scores: Iterable[ExampleScore]) -> dict[str, MetricValue]:
    """Sum per-example components into corpus metrics, in registry order."""
    names = scoring_metric_names()
    numerators: list[int] = []
    denominators: list[int] = []
    for score in scores:
        if score.metric_names != names:
            raise InputError(
                f"score covers metrics {list(score.metric_names)} but the registry has "
                f"{list(names)}; score every example with the same metric set"
            )
        numerators.extend(score.numerators)
        denominators.extend(score.denominators)
    return sum_components(names, numerators, denominators)


def compute_metrics(records: Iterable[Mapping[str, Any]]) -> dict[str, MetricValue]:
    """Every registered metric over records of ``parse_status``, ``parsed_call``, ``gold_call``.

    The denominator is every record: a failed parse scores zero, never drops out.
    """
    metrics = scoring_metrics()
    numerators, denominators = score_components(_matches(records), metrics)
    return sum_components([metric.name for metric in metrics], numerators, denominators)


#: Names before issue 31's one vocabulary; each works, warning, until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
