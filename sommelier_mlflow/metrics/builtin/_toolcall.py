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

from sommelier_mlflow.metrics._base import BaseMetric
from sommelier_mlflow.metrics._catalog import register_metric
from sommelier_mlflow.toolcalls import MetricValue, gold_call_of, parse_tool_call, score_example

__all__ = [
    "ArgumentExactMatch",
    "ArgumentF1",
    "FullCallExactMatch",
    "FunctionNameAccuracy",
    "ToolCallMetric",
    "ValidJsonRate",
]

RowValue = dict[str, int | float]


class ToolCallMetric(BaseMetric[RowValue], abstract=True):
    """Shared machinery: parse the text, score it on the registry, pick this metric by name."""

    scoring_metric: ClassVar[str]

    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, RowValue]:
        """Score one completion against its gold call (``reference``)."""
        parsed = parse_tool_call(text)
        score = score_example(parsed.status, parsed.call, gold_call_of(reference))
        return self.result(MetricValue(*score.component(self.scoring_metric)).to_dict())

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

    scoring_metric = "valid_json_rate"


@register_metric(name="function_name_accuracy")
class FunctionNameAccuracy(ToolCallMetric):
    """Share of outputs naming the gold function exactly."""

    scoring_metric = "function_name_accuracy"


@register_metric(name="argument_exact_match")
class ArgumentExactMatch(ToolCallMetric):
    """Share of outputs whose arguments equal the gold arguments canonically."""

    scoring_metric = "argument_exact_match"


@register_metric(name="argument_f1")
class ArgumentF1(ToolCallMetric):
    """Micro F1 over flattened argument pairs; rows carry ``2*matched`` over pair counts."""

    scoring_metric = "argument_f1"


@register_metric(name="full_call_exact_match")
class FullCallExactMatch(ToolCallMetric):
    """Share of outputs that are exactly the gold call."""

    scoring_metric = "full_call_exact_match"
