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
from typing import Any, ClassVar, cast

from sommelier_mlflow.metrics._base import BaseMetric
from sommelier_mlflow.metrics._catalog import register_metric
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    METRIC_NAMES,
    MetricValue,
    ScoringMetric,
    one_example_score,
    output_format,
    scoring_metrics,
    scoring_mode,
)

__all__ = ["ToolCallMetric"]

RowValue = dict[str, int | float]


class ToolCallMetric(BaseMetric[RowValue], abstract=True):
    """Shared machinery: score the text the ``single`` mode's way, pick this metric by name."""

    scoring_metric: ClassVar[str]

    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, RowValue]:
        """Score one completion against its gold call (``reference``)."""
        mode = scoring_mode(DEFAULT_MODE)
        gold = mode.make_gold(mode.gold_calls(reference, "gold call"))
        parsed = mode.parse(text, output_format(JSON_FORMAT), ())
        score = one_example_score(mode.compare(parsed, gold), DEFAULT_MODE)
        return self.result(MetricValue(*score.component(self.scoring_metric)).to_dict())

    @staticmethod
    def aggregate(rows: Iterable[Mapping[str, Any]]) -> MetricValue:
        """Sum per-row ``numerator``/``denominator`` into the exact corpus value."""
        numerator = denominator = 0
        for row in rows:
            numerator += int(row["numerator"])
            denominator += int(row["denominator"])
        return MetricValue(numerator, denominator)


def _catalog_class(metric: ScoringMetric[Any]) -> type[ToolCallMetric]:
    """A concrete catalog class for one scoring metric, documented by its registry entry."""
    class_name = "".join(part.capitalize() for part in metric.name.split("_"))
    namespace = {
        "__doc__": metric.description,
        "__module__": __name__,
        "scoring_metric": metric.name,
    }
    cls = cast(type[ToolCallMetric], type(class_name, (ToolCallMetric,), namespace))
    return register_metric(cls, name=metric.name)


# One catalog class per metric of the spec's set, named after it (``argument_f1`` is
# ``ArgumentF1``): the scoring registry is the one definition, so nothing is listed twice.
for _metric in scoring_metrics():
    if _metric.name in METRIC_NAMES:
        _catalog_class(_metric)
