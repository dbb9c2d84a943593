"""Serialisable metric requests and results.

``MetricSpec`` is how a metric is asked for from outside Python (an MLflow
evaluator config, a JSON file, a CLI flag): a catalog name plus its runtime
parameters. ``EvaluationResult`` is the JSON-checked outcome of scoring one
text with several metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sommelier_mlflow._redact import is_secret_key, redact_value
from sommelier_mlflow.errors import MetricConfigError, MetricTypeError, UnknownMetricError
from sommelier_mlflow.metrics._base import BaseMetric
from sommelier_mlflow.metrics._catalog import get_metric
from sommelier_mlflow.metrics._config import MASK, secret_fields
from sommelier_mlflow.metrics._types import is_json_value

__all__ = ["MetricSpec", "EvaluationResult", "evaluate_metrics"]


class MetricSpec(BaseModel):
    """A request for one catalog metric: its name, parameters and optional result key.

    Example: ``MetricSpec(name="CountsMetric", config={"segments": "tokens"},
    result_key="words").build()``. ``repr`` and :meth:`redacted` mask secret
    parameters (such as ``hf_token``); ``model_dump`` keeps them, because it
    is the data needed to rebuild the metric.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    result_key: str | None = None

    def build(self) -> BaseMetric[Any]:
        """Look the metric up in the catalog and instantiate it with ``config``.

        Raises:
            UnknownMetricError: If ``name`` is not registered.
            MetricConfigError: If ``config`` or ``result_key`` is invalid.
            DependencyError: If the metric needs something that is missing.
        """
        metric = get_metric(self.name).from_config(**self.config)
        if self.result_key is not None:
            metric.result_key = self.result_key
        return metric

    def _secret_keys(self) -> set[str]:
        keys = {key for key in self.config if is_secret_key(key)}
        with contextlib.suppress(UnknownMetricError):
            keys |= secret_fields(get_metric(self.name).config_schema)
        return keys

    def redacted(self) -> dict[str, Any]:
        """The spec as plain data with secrets masked, for logs and MLflow params."""
        secrets = self._secret_keys()
        # The same rules as every MLflow param: a URL's user-info or a token
        # under an innocent key is scrubbed too, not only secret-named fields.
        config = {
            key: MASK if key in secrets and value is not None else redact_value(value)
            for key, value in self.config.items()
        }
        return {"name": self.name, "config": config, "result_key": self.result_key}

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        shown = self.redacted()
        yield "name", shown["name"]
        yield "config", shown["config"]
        yield "result_key", shown["result_key"]


class EvaluationResult(BaseModel):
    """The merged outputs of several metrics on one text, keyed by result key."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    results: dict[str, Any]

    @field_validator("results")
    @classmethod
    def _check_json(cls, results: dict[str, Any]) -> dict[str, Any]:
        for key, value in results.items():
            if not is_json_value(value):
                raise ValueError(f"result {key!r} is not a JSON value: {value!r}")
        return results


def evaluate_metrics(
    text: str,
    metrics: Iterable[BaseMetric[Any] | MetricSpec],
    *,
    reference: Any = None,
) -> EvaluationResult:
    """Score one text with several metrics and merge their outputs.

    Specs are built on the fly; ``reference`` reaches only metrics that accept
    it. The metrics are not re-parented.

    Raises:
        MetricConfigError: If two metrics report the same key.
        MetricTypeError: If an item is neither a metric nor a spec.
    """
    merged: dict[str, Any] = {}
    for item in metrics:
        if isinstance(item, MetricSpec):
            metric = item.build()
        elif isinstance(item, BaseMetric):
            metric = item
        else:
            raise MetricTypeError(
                f"evaluate_metrics takes metrics or MetricSpecs, got {type(item).__name__}."
            )
        for key, value in metric.score(text, reference=reference).items():
            if key in merged:
                raise MetricConfigError(
                    f"Two metrics reported {key!r}; give one of them a distinct result_key."
                )
            merged[key] = value
    return EvaluationResult(results=merged)
