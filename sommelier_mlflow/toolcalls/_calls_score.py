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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls._calls_parse import (
    CallsParseResult,
)
from sommelier_mlflow.toolcalls._flatten import count_pairs, flatten_arguments
from sommelier_mlflow.toolcalls._modes import Parsed, calls_mode, register_builtin_mode
from sommelier_mlflow.toolcalls._parse import PARSE_STATUSES, is_tool_call
from sommelier_mlflow.toolcalls._registry import (
    ScoringMetric,
    builtin_scoring_metrics,
    scoring_metrics,
)
from sommelier_mlflow.toolcalls._score import (
    ExampleScore,
    MetricValue,
    _arguments_key,
    one_example_score,
    record_matches,
    score_components,
    sum_components,
)

__all__ = [
    "CALLS_MODE",
    "CALLS_SLICE_FIELD",
    "GoldCalls",
    "matched_argument_pairs",
    "CallsMatch",
    "call_count_value",
    "CALLS_METRIC_NAMES",
    "score_calls_example",
    "compute_calls_metrics",
]

#: The scoring mode of splits whose examples expect zero, one or several calls.
CALLS_MODE: Final = "calls"
#: The slice the calls mode adds by default: how many gold calls an example expects.
CALLS_SLICE_FIELD: Final = "calls"

#: A call's identity for set matching: its name and canonical arguments.
CallKey = tuple[str, bytes]


def _as_call(call: object) -> dict[str, Any] | None:
    """The call as a plain dict if it is exactly ``{name, arguments}``, else ``None``."""
    value = dict(call) if isinstance(call, Mapping) and not isinstance(call, dict) else call
    return value if is_tool_call(value) else None


def _not_a_call(call: object, what: str) -> InputError:
    return InputError(
        f"{what} must be exactly {{'name': non-empty str, 'arguments': object}}, got {call!r}"
    )


def _is_call_list(calls: object) -> bool:
    if type(calls) is list or type(calls) is tuple:
        return True
    return isinstance(calls, Sequence) and not isinstance(calls, (str, bytes))


def _key(call: Mapping[str, Any]) -> CallKey:
    # The arguments' sorted-key JSON bytes: equal exactly when the canonical JSON is.
    return (call["name"], _arguments_key(call["arguments"]))


class GoldCalls:
    """A validated gold multiset with its canonical forms computed once.

    Every prediction of an example (and each arm) is compared against the same
    gold, so the keys and argument-pair counts are derived once here; the
    multiset and the flattened pairs only when an inexact prediction needs them.
    """

    __slots__ = ("_counts", "_pairs", "calls", "key_pairs", "keys", "pair_total")

    def __init__(self, calls: Sequence[Mapping[str, Any]]) -> None:
        if not _is_call_list(calls):
            raise InputError(f"gold calls must be a list of calls (possibly empty), got {calls!r}")
        checked: list[dict[str, Any]] = []
        keys: list[CallKey] = []
        #: Pair count per distinct call (identical calls flatten identically).
        key_pairs: dict[CallKey, int] = {}
        total = 0
        for index, call in enumerate(calls):
            value = _as_call(call)
            if value is None:
                raise _not_a_call(call, f"gold call {index}")
            key = (value["name"], _arguments_key(value["arguments"]))
            pairs = key_pairs.get(key)
            if pairs is None:
                pairs = key_pairs[key] = count_pairs(value["arguments"])
            total += pairs
            checked.append(value)
            keys.append(key)
        self.calls: tuple[dict[str, Any], ...] = tuple(checked)
        self.keys: tuple[CallKey, ...] = tuple(keys)
        self.key_pairs: dict[CallKey, int] = key_pairs
        self.pair_total: int = total
        self._counts: Counter[CallKey] | None = None
        self._pairs: tuple[dict[str, str], ...] | None = None

    @property
    def is_abstention(self) -> bool:
        """Whether this is an abstention example: no call is the right answer."""
        return not self.calls

    @property
    def counts(self) -> Counter[CallKey]:
        """The gold multiset of call keys."""
        if self._counts is None:
            self._counts = Counter(self.keys)
        return self._counts

    @property
    def pairs(self) -> tuple[dict[str, str], ...]:
        """Each gold call's flattened arguments, built on first use."""
        if self._pairs is None:
            self._pairs = tuple(flatten_arguments(call["arguments"]) for call in self.calls)
        return self._pairs


def _overlap(predicted: Mapping[str, str], gold: Mapping[str, str]) -> int:
    return sum(1 for path, value in predicted.items() if gold.get(path) == value)


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
    are sorted by (name, sorted-key JSON of the arguments) before solving, and among
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
    calls = _predicted(predicted)
    return _matched_pairs(calls, [_key(call) for call in calls], GoldCalls(gold))


def _predicted(parsed_calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    calls = []
    for call in parsed_calls:
        value = _as_call(call)
        if value is None:
            raise _not_a_call(call, "a parsed call")
        calls.append(value)
    return calls


def _matched_pairs(
    calls: Sequence[dict[str, Any]], keys: Sequence[CallKey], gold: GoldCalls
) -> int:
    unmatched = gold.counts.copy()
    matched = 0
    rest_predicted: list[tuple[CallKey, dict[str, Any]]] = []
    for key, call in zip(keys, calls, strict=True):
        if unmatched[key] > 0:
            unmatched[key] -= 1
            matched += gold.key_pairs[key]
        else:
            rest_predicted.append((key, call))
    if not rest_predicted:
        return matched
    rest_gold: list[tuple[CallKey, int]] = []
    for index, key in enumerate(gold.keys):
        if unmatched[key] > 0:
            unmatched[key] -= 1
            rest_gold.append((key, index))
    if not rest_gold:
        return matched
    rest_predicted.sort(key=lambda item: item[0])
    rest_gold.sort()
    gold_pairs = [gold.pairs[index] for _, index in rest_gold]
    overlap: list[list[int]] = []
    for _, call in rest_predicted:
        mine = flatten_arguments(call["arguments"])
        overlap.append([_overlap(mine, theirs) for theirs in gold_pairs])
    if len(overlap) == 1 and len(gold_pairs) == 1:
        return matched + overlap[0][0]
    same_name = [
        [int(key[0] == gold_key[0]) for gold_key, _ in rest_gold] for key, _ in rest_predicted
    ]
    return matched + _solve(overlap, same_name)


def _solve(overlap: list[list[int]], same_name: list[list[int]]) -> int:
    # scipy is imported here, not at module level: single-call scoring and
    # most calls-mode examples never need it, and it is slow to import.
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    pairs = np.array(overlap, dtype=np.int64)
    scale = min(pairs.shape) + 1
    weights = pairs * scale + np.array(same_name, dtype=np.int64)
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return int(pairs[rows, cols].sum())


class CallsMatch:
    """One completion, parsed by ``sommelier.calls_parser.v1``, set against its gold calls.

    Computes once per example the counts the seven metrics read, so each
    metric's component is a one-line read (see the module docstring for how
    failures and abstentions are counted).

    Attributes:
        status: The calls parser's status.
        calls: The predicted calls (empty unless ``status == "ok"``).
        gold: The gold calls.
        failed: ``invalid_json`` or ``invalid_shape``.
        abstained: ``[]`` or no bracket at all.
        set_correct: The predicted multiset equals the gold multiset (on an
            abstention example: the model abstained).
        matched: Predicted calls matched one to one to equal gold calls.
        predicted: Predicted calls, a failure counting as one.
        matched_pairs: Argument pairs matched under an optimal assignment.
        predicted_pairs: Predicted argument pairs, a failure counting as one.
    """

    __slots__ = (
        "abstained",
        "calls",
        "failed",
        "gold",
        "matched",
        "matched_pairs",
        "predicted",
        "predicted_pairs",
        "set_correct",
        "status",
    )

    def __init__(
        self,
        status: str,
        calls: Sequence[Mapping[str, Any]] | None,
        gold: GoldCalls | Sequence[Mapping[str, Any]],
    ) -> None:
        self.gold: GoldCalls = gold if isinstance(gold, GoldCalls) else GoldCalls(gold)
        self.status = status
        if status == "ok":
            if not _is_call_list(calls):
                raise InputError(
                    f"parse_status is 'ok' but parsed_calls is not a list of calls: {calls!r}"
                )
            predicted = _predicted(calls)  # type: ignore[arg-type]
            failed = False
        elif status in PARSE_STATUSES:
            predicted = []
            failed = status != "no_json"
        else:
            raise InputError(f"unknown parse_status {status!r}; expected one of {PARSE_STATUSES}")
        self.calls: list[dict[str, Any]] = predicted
        self.failed = failed
        self.abstained = not failed and not predicted
        gold_calls = self.gold
        keys = [_key(call) for call in predicted]
        if len(gold_calls.keys) == 1 and len(keys) == 1:
            # The common case, without multisets: one call against one gold call.
            key, gold_key = keys[0], gold_calls.keys[0]
            matched = int(key == gold_key)
            set_correct = matched == 1
            if key[1] == gold_key[1]:
                predicted_pairs = matched_pairs = gold_calls.pair_total
            else:
                mine = flatten_arguments(predicted[0]["arguments"])
                predicted_pairs = len(mine)
                matched_pairs = _overlap(mine, gold_calls.pairs[0])
        else:
            counts = Counter(keys)
            matched = sum((counts & gold_calls.counts).values())
            # On an abstention example the multiset test alone would also pass a failure.
            set_correct = counts == gold_calls.counts if gold_calls.keys else self.abstained
            if set_correct:
                predicted_pairs = matched_pairs = gold_calls.pair_total
            else:
                predicted_pairs = sum(count_pairs(call["arguments"]) for call in predicted)
                matched_pairs = _matched_pairs(predicted, keys, gold_calls) if predicted else 0
        self.set_correct: bool = set_correct
        self.matched: int = matched
        self.predicted: int = len(predicted) + failed
        self.matched_pairs: int = matched_pairs
        self.predicted_pairs: int = predicted_pairs + failed

    @property
    def gold_count(self) -> int:
        """Gold calls of the example (0 on an abstention example)."""
        return len(self.gold.keys)


def _call_set(c: CallsMatch) -> tuple[int, int]:
    return int(c.set_correct), 1


def _call_precision(c: CallsMatch) -> tuple[int, int]:
    return c.matched, c.predicted


def _call_recall(c: CallsMatch) -> tuple[int, int]:
    return c.matched, c.gold_count


def _call_f1(c: CallsMatch) -> tuple[int, int]:
    # Micro F1 = 2*matched / (predicted + gold), additive like argument_f1.
    return 2 * c.matched, c.predicted + c.gold_count


def _call_argument_f1(c: CallsMatch) -> tuple[int, int]:
    return 2 * c.matched_pairs, c.predicted_pairs + c.gold.pair_total


def _abstention(c: CallsMatch) -> tuple[int, int]:
    return (int(c.abstained), 1) if not c.gold.keys else (0, 0)


def _false_call(c: CallsMatch) -> tuple[int, int]:
    return (int(bool(c.calls)), 1) if not c.gold.keys else (0, 0)


def _match_calls(parsed: Parsed, gold: GoldCalls) -> CallsMatch:
    calls = parsed.calls if isinstance(parsed, CallsParseResult) else None
    return CallsMatch(parsed.status, calls, gold)


def call_count_value(count: int) -> str:
    """The ``calls`` slice value of an example with ``count`` gold calls: ``0``, ``1`` or ``2+``."""
    return str(count) if count < 2 else "2+"


def _call_count(calls: Sequence[Mapping[str, Any]]) -> str:
    return call_count_value(len(calls))


register_builtin_mode(
    calls_mode(
        CALLS_MODE,
        "Zero, one or several gold calls per example, matched as a multiset.",
        make_gold=GoldCalls,
        match=_match_calls,
        default_slices=(CALLS_SLICE_FIELD,),
        derived_slices={CALLS_SLICE_FIELD: _call_count},
    ),
    (
        ScoringMetric(
            "call_set_exact_match",
            "Share of examples whose predicted calls equal the gold calls as a multiset "
            "(order-free, duplicates counted); on an abstention example, that the model abstained.",
            _call_set,
            binary=True,
            mcnemar=True,
            table_column="call_set_correct",
        ),
        ScoringMetric(
            "call_precision",
            "Predicted calls matching a gold call one to one by name and canonical arguments, "
            "over all predicted calls (an unparseable output counts as one wrong call).",
            _call_precision,
        ),
        ScoringMetric(
            "call_recall",
            "Gold calls matched one to one by a predicted call, over all gold calls.",
            _call_recall,
        ),
        ScoringMetric("call_f1", "Micro F1 of call precision and call recall.", _call_f1),
        ScoringMetric(
            "call_argument_f1",
            "Micro F1 over flattened argument pairs after an optimal one-to-one call assignment.",
            _call_argument_f1,
        ),
        ScoringMetric(
            "abstention_accuracy",
            "Abstention examples where the model abstained ([] or no JSON), "
            "over abstention examples.",
            _abstention,
        ),
        ScoringMetric(
            "false_call_rate",
            "Abstention examples where the model called a tool anyway, over abstention examples.",
            _false_call,
        ),
    ),
)

CALLS_METRIC_NAMES: Final[tuple[str, ...]] = tuple(
    metric.name for metric in builtin_scoring_metrics(CALLS_MODE)
)
"""The seven ``calls``-mode metric names, in report order."""


def score_calls_example(
    parse_status: str,
    parsed_calls: Sequence[Mapping[str, Any]] | None,
    gold: GoldCalls | Sequence[Mapping[str, Any]],
) -> ExampleScore:
    """Score one completion on every metric of the ``calls`` mode.

    Args:
        parse_status: The calls parser's status.
        parsed_calls: The parsed calls (required, possibly empty, when ``ok``).
        gold: The gold calls, raw or wrapped in :class:`GoldCalls`.

    Raises:
        InputError: If the status is unknown, ``ok`` comes without valid calls,
            or the gold is malformed.
    """
    return one_example_score(CallsMatch(parse_status, parsed_calls, gold), CALLS_MODE)


def _matches(records: Iterable[Mapping[str, Any]]) -> Iterator[CallsMatch]:
    return record_matches(records, CallsMatch, "parsed_calls", "gold_calls")


def compute_calls_metrics(records: Iterable[Mapping[str, Any]]) -> dict[str, MetricValue]:
    """Every ``calls``-mode metric over parsed records and their gold calls.

    Each record holds ``parse_status``, ``parsed_calls`` and ``gold_calls``.
    The denominators count every record their metric covers; a failure is
    never dropped (see the module docstring for how it is counted).
    """
    metrics = scoring_metrics(CALLS_MODE)
    numerators, denominators = score_components(_matches(records), metrics)
    return sum_components([metric.name for metric in metrics], numerators, denominators)


#: Names before issue 31's one vocabulary; each works, warning, until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
