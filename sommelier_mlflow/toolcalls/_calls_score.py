"""The seven ``calls``-mode metrics: zero, one or several calls per example.

Examples in ``calls`` mode expect a multiset of gold calls, possibly empty
(an abstention example: no offered tool applies). Every metric is a sum of
per-example integer components, like the five single-call metrics, so
slices, bootstrap resamples and McNemar work on the same integers.

Rules that hold across the seven metrics:

- A call is identified by its name and its canonical arguments; order between
  calls never matters, duplicates count (``[A, A]`` is not ``[A]``).
- Abstaining means ``[]`` or a text without any bracket. Broken JSON and wrong
  shapes (``invalid_json``, ``invalid_shape``) are *failures*, never abstentions.
- A failure is scored as one predicted call that matches nothing and whose
  arguments flatten to one pair (as an empty-argument call's do). So a failure
  enters every denominator it could belong to (``call_precision``, ``call_f1``,
  ``call_argument_f1``) and costs precision even on an abstention example,
  where a "zero calls" reading would have scored it as harmless.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls._flatten import count_pairs, flatten_arguments
from sommelier_mlflow.toolcalls._parse import PARSE_STATUSES, is_tool_call
from sommelier_mlflow.toolcalls._score import MetricValue

__all__ = [
    "CALLS_METRIC_NAMES",
    "CallsExampleScore",
    "GoldCalls",
    "calls_metrics_from_scores",
    "compute_calls_metrics",
    "matched_argument_pairs",
    "score_calls_example",
    "score_calls_records",
]

CALLS_METRIC_NAMES: Final[tuple[str, ...]] = (
    "call_set_exact_match",
    "call_precision",
    "call_recall",
    "call_f1",
    "call_argument_f1",
    "abstention_accuracy",
    "false_call_rate",
)

_FAILURES: Final = frozenset({"invalid_json", "invalid_shape"})

#: A call's identity for set matching: its name and canonical arguments.
CallKey = tuple[str, str]


def _checked_call(call: object, what: str) -> dict[str, Any]:
    value = dict(call) if isinstance(call, Mapping) and not isinstance(call, dict) else call
    if not is_tool_call(value):
        raise InputError(
            f"{what} must be exactly {{'name': non-empty str, 'arguments': object}}, got {call!r}"
        )
    return value


def _key(call: Mapping[str, Any]) -> CallKey:
    return (call["name"], canonical_json(call["arguments"]))


class GoldCalls:
    """A validated gold multiset with its comparison forms computed once.

    Every prediction of an example (and each arm) is compared against the same
    gold, so the keys, the multiset and the argument-pair total are derived
    once here.
    """

    __slots__ = ("calls", "counts", "keys", "pair_total")

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
            raise InputError(f"gold calls must be a list of calls (possibly empty), got {calls!r}")
        self.calls: tuple[dict[str, Any], ...] = tuple(
            _checked_call(call, f"gold call {index}") for index, call in enumerate(calls)
        )
        self.keys: tuple[CallKey, ...] = tuple(_key(call) for call in self.calls)
        self.counts: Counter[CallKey] = Counter(self.keys)
        self.pair_total: int = sum(count_pairs(call["arguments"]) for call in self.calls)

    @property
    def is_abstention(self) -> bool:
        """Whether this is an abstention example: no call is the right answer."""
        return not self.calls


@dataclass(frozen=True, slots=True)
class CallsExampleScore:
    """One example's additive components, aligned with :data:`CALLS_METRIC_NAMES`."""

    numerators: tuple[int, int, int, int, int, int, int]
    denominators: tuple[int, int, int, int, int, int, int]

    @property
    def call_set_correct(self) -> bool:
        """Whether the example is a call-set exact match (the McNemar outcome)."""
        return self.numerators[0] == 1


def matched_argument_pairs(
    predicted: Sequence[Mapping[str, Any]], gold: Sequence[Mapping[str, Any]]
) -> int:
    """The most flattened argument pairs any one-to-one call assignment can match.

    Predicted and gold calls are paired one to one (some stay unpaired when the
    counts differ) so that the number of equal ``path -> value`` pairs summed
    over the pairing is maximal; names do not enter the count, exactly as in
    the single-call ``argument_f1``.

    The returned total is the optimum, which is unique even when several
    pairings reach it, so the metric does not depend on how ties are broken.
    The pairing itself is still made deterministic and order-free: both sides
    are sorted by (name, canonical arguments) before solving, and among
    pairings with the most matched pairs the one pairing the most equal names
    wins (weight ``pairs * (k + 1) + same_name`` with ``k`` the smaller side,
    so no amount of name agreement outweighs one argument pair).
    Identical calls are paired first and the rest solved with
    :func:`scipy.optimize.linear_sum_assignment`; pairing identical calls
    never loses (an exchange argument: an identical partner matches every
    pair the call has).

    Args:
        predicted: Valid predicted calls.
        gold: Valid gold calls.

    Returns:
        The number of matched argument pairs under an optimal assignment.
    """
    rest_predicted: list[dict[str, Any]] = []
    unmatched_gold = Counter(_key(call) for call in gold)
    matched = 0
    for call in predicted:
        key = _key(call)
        if unmatched_gold[key] > 0:
            unmatched_gold[key] -= 1
            matched += count_pairs(call["arguments"])
        else:
            rest_predicted.append(dict(call))
    rest_gold: list[dict[str, Any]] = []
    remaining = +unmatched_gold
    for call in gold:
        key = _key(call)
        if remaining[key] > 0:
            remaining[key] -= 1
            rest_gold.append(dict(call))
    if not rest_predicted or not rest_gold:
        return matched
    rest_predicted.sort(key=_key)
    rest_gold.sort(key=_key)
    pred_pairs = [flatten_arguments(call["arguments"]) for call in rest_predicted]
    gold_pairs = [flatten_arguments(call["arguments"]) for call in rest_gold]
    overlap = [
        [
            sum(1 for path, value in mine.items() if theirs.get(path) == value)
            for theirs in gold_pairs
        ]
        for mine in pred_pairs
    ]
    if len(overlap) == 1 and len(gold_pairs) == 1:
        return matched + overlap[0][0]
    return matched + _solve(overlap, rest_predicted, rest_gold)


def _solve(
    overlap: list[list[int]], predicted: list[dict[str, Any]], gold: list[dict[str, Any]]
) -> int:
    # scipy is imported here, not at module level: single-call scoring and
    # most calls-mode examples never need it, and it is slow to import.
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    scale = min(len(predicted), len(gold)) + 1
    weights = np.array(
        [
            [
                overlap[i][j] * scale + int(predicted[i]["name"] == gold[j]["name"])
                for j in range(len(gold))
            ]
            for i in range(len(predicted))
        ],
        dtype=np.int64,
    )
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return sum(overlap[int(i)][int(j)] for i, j in zip(rows, cols, strict=True))


def score_calls_example(
    parse_status: str,
    parsed_calls: Sequence[Mapping[str, Any]] | None,
    gold: GoldCalls | Sequence[Mapping[str, Any]],
) -> CallsExampleScore:
    """Score one completion, parsed by ``sommelier.calls_parser.v1``, against its gold calls.

    Args:
        parse_status: The calls parser's status.
        parsed_calls: The parsed calls (required, possibly empty, when ``ok``).
        gold: The gold calls, raw or wrapped in :class:`GoldCalls`.

    Raises:
        InputError: If the status is unknown, ``ok`` comes without valid calls,
            or the gold is malformed.
    """
    gold_calls = gold if isinstance(gold, GoldCalls) else GoldCalls(gold)
    if parse_status not in PARSE_STATUSES:
        raise InputError(f"unknown parse_status {parse_status!r}; expected one of {PARSE_STATUSES}")
    if parse_status == "ok":
        if parsed_calls is None or isinstance(parsed_calls, (str, bytes, Mapping)):
            raise InputError(
                f"parse_status is 'ok' but parsed_calls is not a list of calls: {parsed_calls!r}"
            )
        calls = [_checked_call(call, "a parsed call") for call in parsed_calls]
    else:
        calls = []
    failed = parse_status in _FAILURES
    abstained = not failed and not calls
    gold_count = len(gold_calls.keys)

    predicted_counts = Counter(_key(call) for call in calls)
    matched = sum((predicted_counts & gold_calls.counts).values())
    predicted = len(calls) + failed
    if gold_count == 0:
        set_match = abstained
    else:
        set_match = not failed and predicted_counts == gold_calls.counts
    predicted_pairs = sum(count_pairs(call["arguments"]) for call in calls) + failed
    if set_match:
        matched_pairs = gold_calls.pair_total
    else:
        matched_pairs = matched_argument_pairs(calls, gold_calls.calls)
    abstention = (int(abstained), 1) if gold_count == 0 else (0, 0)
    false_call = (int(bool(calls)), 1) if gold_count == 0 else (0, 0)
    return CallsExampleScore(
        (
            int(set_match),
            matched,
            matched,
            2 * matched,
            2 * matched_pairs,
            abstention[0],
            false_call[0],
        ),
        (
            1,
            predicted,
            gold_count,
            predicted + gold_count,
            predicted_pairs + gold_calls.pair_total,
            abstention[1],
            false_call[1],
        ),
    )


def score_calls_records(records: Iterable[Mapping[str, Any]]) -> list[CallsExampleScore]:
    """Score mappings holding ``parse_status``, ``parsed_calls`` and ``gold_calls``."""
    scores = []
    for index, record in enumerate(records):
        try:
            scores.append(
                score_calls_example(
                    record["parse_status"], record.get("parsed_calls"), record["gold_calls"]
                )
            )
        except KeyError as exc:
            raise InputError(f"record {index} lacks field {exc.args[0]!r}") from exc
    return scores


def calls_metrics_from_scores(scores: Iterable[CallsExampleScore]) -> dict[str, MetricValue]:
    """Sum per-example components into corpus metrics, in :data:`CALLS_METRIC_NAMES` order."""
    numerators = [0] * len(CALLS_METRIC_NAMES)
    denominators = [0] * len(CALLS_METRIC_NAMES)
    for score in scores:
        for index in range(len(CALLS_METRIC_NAMES)):
            numerators[index] += score.numerators[index]
            denominators[index] += score.denominators[index]
    return {
        name: MetricValue(numerators[index], denominators[index])
        for index, name in enumerate(CALLS_METRIC_NAMES)
    }


def compute_calls_metrics(records: Iterable[Mapping[str, Any]]) -> dict[str, MetricValue]:
    """Compute the seven ``calls``-mode metrics over parsed records and their gold calls.

    Each record holds ``parse_status``, ``parsed_calls`` and ``gold_calls``.

    The denominators count every record their metric covers; a failure is
    never dropped (see the module docstring for how it is counted).
    """
    return calls_metrics_from_scores(score_calls_records(records))
