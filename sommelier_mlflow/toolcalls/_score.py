"""The five strict tool-call metrics as exact numerator/denominator pairs.

Every example contributes additive integer components to each metric, so a
corpus value, a slice value and every bootstrap resample are all ratios of
sums of the same integers. Parse failures are never dropped: they add to the
denominators and nothing to the numerators.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls._flatten import count_pairs, flatten_arguments
from sommelier_mlflow.toolcalls._parse import PARSE_STATUSES, is_tool_call

__all__ = [
    "ExampleScore",
    "GoldCall",
    "METRIC_NAMES",
    "MetricValue",
    "compute_metrics",
    "metrics_from_scores",
    "score_example",
    "score_records",
]

METRIC_NAMES: Final[tuple[str, ...]] = (
    "valid_json_rate",
    "function_name_accuracy",
    "argument_exact_match",
    "argument_f1",
    "full_call_exact_match",
)


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
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


class GoldCall:
    """A validated gold call with its comparison forms computed once.

    Scoring compares the same gold call against every prediction (and the
    bootstrap re-uses the components), so the canonical arguments and the
    flattened pairs are derived once here rather than per metric.
    """

    __slots__ = ("_pairs", "arguments", "canonical_arguments", "name", "pair_count")

    def __init__(self, call: Mapping[str, Any]) -> None:
        checked = _as_dict(call)
        if not is_tool_call(checked):
            raise InputError(
                f"gold call must be exactly {{'name': non-empty str, 'arguments': object}}, "
                f"got {call!r}"
            )
        self.name: str = checked["name"]
        self.arguments: dict[str, Any] = checked["arguments"]
        self.canonical_arguments: str = canonical_json(self.arguments)
        self.pair_count: int = count_pairs(self.arguments)
        self._pairs: dict[str, str] | None = None

    @property
    def pairs(self) -> dict[str, str]:
        """The flattened gold pairs, built on first use (only inexact predictions need them)."""
        if self._pairs is None:
            self._pairs = flatten_arguments(self.arguments)
        return self._pairs


@dataclass(frozen=True, slots=True)
class ExampleScore:
    """One example's additive components, aligned with :data:`METRIC_NAMES`."""

    numerators: tuple[int, int, int, int, int]
    denominators: tuple[int, int, int, int, int]

    @property
    def full_call_correct(self) -> bool:
        """Whether the example is a full-call exact match (the McNemar outcome)."""
        return self.numerators[-1] == 1


def score_example(
    parse_status: str, parsed_call: Mapping[str, Any] | None, gold: GoldCall | Mapping[str, Any]
) -> ExampleScore:
    """Score one parsed completion against its gold call.

    Args:
        parse_status: The parser's status for the completion.
        parsed_call: The parsed call (required when the status is ``ok``).
        gold: The gold call, raw or already wrapped in :class:`GoldCall`.

    Raises:
        InputError: If the status is unknown, or ``ok`` without a valid call, or
            the gold call is malformed.
    """
    gold_call = gold if isinstance(gold, GoldCall) else GoldCall(gold)
    gold_pairs = gold_call.pair_count
    if parse_status != "ok":
        if parse_status not in PARSE_STATUSES:
            raise InputError(
                f"unknown parse_status {parse_status!r}; expected one of {PARSE_STATUSES}"
            )
        return ExampleScore((0, 0, 0, 0, 0), (1, 1, 1, gold_pairs, 1))
    call = _as_dict(parsed_call)
    if not is_tool_call(call):
        raise InputError(
            f"parse_status is 'ok' but parsed_call is not a tool call: {parsed_call!r}"
        )
    name_ok = call["name"] == gold_call.name
    arguments = call["arguments"]
    args_ok = canonical_json(arguments) == gold_call.canonical_arguments
    if args_ok:
        predicted = matched = gold_pairs
    else:
        pairs = flatten_arguments(arguments)
        predicted = len(pairs)
        gold_pairs_map = gold_call.pairs
        matched = sum(1 for path, value in pairs.items() if gold_pairs_map.get(path) == value)
    return ExampleScore(
        (1, int(name_ok), int(args_ok), 2 * matched, int(name_ok and args_ok)),
        (1, 1, 1, predicted + gold_pairs, 1),
    )


def score_records(records: Iterable[Mapping[str, Any]]) -> list[ExampleScore]:
    """Score mappings holding ``parse_status``, ``parsed_call`` and ``gold_call``."""
    scores = []
    for index, record in enumerate(records):
        try:
            scores.append(
                score_example(
                    record["parse_status"], record.get("parsed_call"), record["gold_call"]
                )
            )
        except KeyError as exc:
            raise InputError(f"record {index} lacks field {exc.args[0]!r}") from exc
    return scores


def metrics_from_scores(scores: Iterable[ExampleScore]) -> dict[str, MetricValue]:
    """Sum per-example components into corpus metrics, in :data:`METRIC_NAMES` order."""
    numerators = [0] * len(METRIC_NAMES)
    denominators = [0] * len(METRIC_NAMES)
    for score in scores:
        numerators = [a + b for a, b in zip(numerators, score.numerators, strict=True)]
        denominators = [a + b for a, b in zip(denominators, score.denominators, strict=True)]
    return {
        name: MetricValue(numerators[index], denominators[index])
        for index, name in enumerate(METRIC_NAMES)
    }


def compute_metrics(records: Iterable[Mapping[str, Any]]) -> dict[str, MetricValue]:
    """Compute the five metrics over records of ``parse_status``, ``parsed_call``, ``gold_call``.

    The denominator is every record: a failed parse scores zero, never drops out.
    """
    return metrics_from_scores(score_records(records))
