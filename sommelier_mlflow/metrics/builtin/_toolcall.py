"""The five strict tool-call metrics as catalog metrics.

They are reference-based: each row's gold call arrives through the
framework's keyword-only ``reference`` hook, so the per-text ``evaluate(text)``
contract of the other metrics stays intact. A row's result is that row's
additive ``{"value", "numerator", "denominator"}``; :meth:`ToolCallMetric.aggregate`
sums rows into the exact corpus :class:`~sommelier_mlflow.toolcalls.MetricValue`
(micro F1 from summed counts, never a mean of row ratios).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.metrics._base import BaseMetric
from sommelier_mlflow.metrics._catalog import register_metric
from sommelier_mlflow.toolcalls import METRIC_NAMES, MetricValue, parse_tool_call, score_example

__all__ = [
    "ArgumentExactMatch",
    "ArgumentF1",
    "FullCallExactMatch",
    "FunctionNameAccuracy",
    "ToolCallMetric",
    "ValidJsonRate",
    "gold_call_from",
]

RowValue = dict[str, int | float]


def gold_call_from(reference: Any) -> Mapping[str, Any]:
    """Accept a gold call as a mapping or as its JSON text.

    Raises:
        InputError: If there is no reference or it is not JSON.
    """
    if reference is None:
        raise InputError(
            "tool-call metrics need the row's gold call: pass it as reference=... "
            "(a {'name', 'arguments'} dict or its JSON string)"
        )
    if isinstance(reference, str | bytes):
        try:
            reference = loads(reference)
        except JSONDecodeError as exc:
            raise InputError(f"gold call is not valid JSON: {reference!r:.200}") from exc
    if not isinstance(reference, Mapping):
        raise InputError(f"gold call must be an object, got {type(reference).__name__}")
    return reference


class ToolCallMetric(BaseMetric[RowValue], abstract=True):
    """Shared machinery: parse the text, score it against the gold call, pick one metric."""

    metric_index: ClassVar[int]

    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, RowValue]:
        """Score one completion against its gold call (``reference``)."""
        parsed = parse_tool_call(text)
        score = score_example(parsed.status, parsed.call, gold_call_from(reference))
        index = self.metric_index
        return self.result(
            MetricValue(score.numerators[index], score.denominators[index]).to_dict()
        )

    @staticmethod
    def aggregate(rows: Iterable[Mapping[str, Any]]) -> MetricValue:
        """Sum per-row ``numerator``/``denominator`` into the exact corpus value."""
        numerator = denominator = 0
        for row in rows:
            numerator += int(row["numerator"])
            denominator += int(row["denominator"])
        return MetricValue(numerator, denominator)


@register_metric(name="valid_json_rate")
class ValidJsonRate(ToolCallMetric):
    """Share of outputs that parse into exactly one schema-valid tool call."""

    metric_index = METRIC_NAMES.index("valid_json_rate")


@register_metric(name="function_name_accuracy")
class FunctionNameAccuracy(ToolCallMetric):
    """Share of outputs naming the gold function exactly."""

    metric_index = METRIC_NAMES.index("function_name_accuracy")


@register_metric(name="argument_exact_match")
class ArgumentExactMatch(ToolCallMetric):
    """Share of outputs whose arguments equal the gold arguments canonically."""

    metric_index = METRIC_NAMES.index("argument_exact_match")


@register_metric(name="argument_f1")
class ArgumentF1(ToolCallMetric):
    """Micro F1 over flattened argument pairs; rows carry ``2*matched`` over pair counts."""

    metric_index = METRIC_NAMES.index("argument_f1")


@register_metric(name="full_call_exact_match")
class FullCallExactMatch(ToolCallMetric):
    """Share of outputs that are exactly the gold call."""

    metric_index = METRIC_NAMES.index("full_call_exact_match")
