"""The built-in modes' strict tool-call metrics as catalog metrics.

They are reference-based: each row's gold call(s) arrive through the
framework's keyword-only ``reference`` hook, so the per-text ``evaluate(text)``
contract of the other metrics stays intact. A row's result is that row's
additive ``{"value", "numerator", "denominator"}``; :meth:`ToolCallMetric.aggregate`
sums rows into the exact corpus :class:`~sommelier_mlflow.toolcalls.MetricValue`
(micro F1 from summed counts, never a mean of row ratios).

How a text is read is configuration, as for every other catalog metric
(:class:`ToolCallConfig`): the scoring mode (default: the mode that defines the
metric, ``single`` for the spec's five) and the output format (default
``json``), so ``get_metric("call_f1").from_config(output_format="hermes")``
scores Hermes outputs the ``calls`` way. A catalog metric sees one text and its
reference, never the example's tools: a format that types values by the tools
reads such a row without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, ClassVar, cast

from pydantic import model_validator

from sommelier_mlflow.errors import MetricConfigError
from sommelier_mlflow.metrics._base import BaseMetric
from sommelier_mlflow.metrics._catalog import register_metric
from sommelier_mlflow.metrics._config import MetricConfig
from sommelier_mlflow.toolcalls import (
    BFCL_MODE,
    CALLS_MODE,
    DEFAULT_MODE,
    JSON_FORMAT,
    MetricValue,
    ScoringMetric,
    builtin_scoring_metrics,
    one_example_score,
    output_format,
    output_format_names,
    scoring_metric_names,
    scoring_mode,
    scoring_mode_names,
)

__all__ = ["ToolCallConfig", "ToolCallMetric"]

RowValue = dict[str, int | float]


class ToolCallConfig(MetricConfig):
    """Runtime parameters of a tool-call catalog metric: how each text is read.

    Attributes:
        scoring: The registered scoring mode that parses, compares and scores
            (``--scoring``); the metric must be one of its metrics. Default:
            the mode that defines the metric (``single`` for the spec's five).
        output_format: The registered output format the texts are written in
            (``--output-format``); default ``json``, the mode's own parser.
    """

    scoring: str = DEFAULT_MODE
    output_format: str = JSON_FORMAT

    @model_validator(mode="after")
    def _registered(self) -> ToolCallConfig:
        if self.scoring not in scoring_mode_names():
            raise ValueError(
                f"unknown scoring mode {self.scoring!r}; registered: {list(scoring_mode_names())}"
            )
        if self.output_format not in output_format_names():
            raise ValueError(
                f"unknown output format {self.output_format!r}; registered: "
                f"{list(output_format_names())}"
            )
        return self


@cache
def _config_of(mode: str) -> type[ToolCallConfig]:
    """The config schema of a mode's metrics: :class:`ToolCallConfig`, defaulting to ``mode``."""
    if mode == DEFAULT_MODE:
        return ToolCallConfig
    namespace = {
        "__module__": __name__,
        "__doc__": ToolCallConfig.__doc__,
        "__annotations__": {"scoring": "str"},
        "scoring": mode,
    }
    return cast(type[ToolCallConfig], type("ToolCallConfig", (ToolCallConfig,), namespace))


class ToolCallMetric(BaseMetric[RowValue], abstract=True):
    """Shared machinery: score the text as configured, pick this metric by name."""

    scoring_metric: ClassVar[str]
    config_schema = ToolCallConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = cast(ToolCallConfig, self.settings)
        if self.scoring_metric not in scoring_metric_names(config.scoring):
            raise MetricConfigError(
                f"Invalid configuration for metric {self.name!r}: scoring mode "
                f"{config.scoring!r} has no metric {self.scoring_metric!r} (its metrics: "
                f"{list(scoring_metric_names(config.scoring))}); choose the mode that defines it."
            )
        self._mode = scoring_mode(config.scoring)
        self._format = output_format(config.output_format)

    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, RowValue]:
        """Score one completion against its gold call(s) (``reference``)."""
        mode = self._mode
        gold = mode.make_gold(mode.gold_calls(reference, "gold call"))
        parsed = mode.parse(text, self._format, ())  # one text and its gold: no tools here
        score = one_example_score(mode.compare(parsed, gold), mode.name)
        return self.result(MetricValue(*score.component(self.scoring_metric)).to_dict())

    @staticmethod
    def aggregate(rows: Iterable[Mapping[str, Any]]) -> MetricValue:
        """Sum per-row ``numerator``/``denominator`` into the exact corpus value."""
        numerator = denominator = 0
        for row in rows:
            numerator += int(row["numerator"])
            denominator += int(row["denominator"])
        return MetricValue(numerator, denominator)


def _catalog_class(metric: ScoringMetric[Any], mode: str) -> type[ToolCallMetric]:
    """A concrete catalog class for one scoring metric, documented by its registry entry."""
    class_name = "".join(part.capitalize() for part in metric.name.split("_"))
    namespace = {
        "__doc__": metric.description,
        "__module__": __name__,
        "scoring_metric": metric.name,
        "config_schema": _config_of(mode),
    }
    cls = cast(type[ToolCallMetric], type(class_name, (ToolCallMetric,), namespace))
    return register_metric(cls, name=metric.name)


# One catalog class per metric the package's own modes define, named after it
# (``argument_f1`` is ``ArgumentF1``): the scoring registry is the one
# definition, so nothing is listed twice. Built while the package imports, so
# from the built-in registrations only (a plugin loaded here would import a
# half-imported package).
for _mode_name in (DEFAULT_MODE, CALLS_MODE, BFCL_MODE):
    for _metric in builtin_scoring_metrics(_mode_name):
        _catalog_class(_metric, _mode_name)
