"""Serialisable measure requests and results.

``MeasureSpec`` is how a measure is asked for from outside Python (an MLflow
evaluator config, a JSON file, a CLI flag): a catalog name plus its runtime
parameters. ``MeasureResults`` is the JSON-checked outcome of scoring one
text with several metrics.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sommelier_mlflow._redact import is_secret_key, redact_value
from sommelier_mlflow.errors import MetricConfigError, MetricTypeError, UnknownMetricError
from sommelier_mlflow.metrics._base import BaseMeasure
from sommelier_mlflow.metrics._catalog import get_measure
from sommelier_mlflow.metrics._config import MASK, secret_fields
from sommelier_mlflow.metrics._types import is_json_value

__all__ = ["MeasureSpec", "MeasureResults", "evaluate_measures"]


class MeasureSpec(BaseModel):
    """A request for one catalog measure: its name, parameters and optional result key.

    Example: ``MeasureSpec(name="CountsMetric", config={"segments": "tokens"},
    result_key="words").build()``. ``repr`` and :meth:`redacted` mask secret
    parameters (such as ``hf_token``); ``model_dump`` keeps them, because it
    is the data needed to rebuild the metric.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    result_key: str | None = None

    def build(self) -> BaseMeasure[Any]:
        """Look the measure up in the catalog and instantiate it with ``config``.

        Raises:
            UnknownMetricError: If ``name`` is not registered.
            MetricConfigError: If ``config`` or ``result_key`` is invalid.
            DependencyError: If the measure needs something that is missing.
        """
        metric = get_measure(self.name).from_config(**self.config)
        if self.result_key is not None:
            metric.result_key = self.result_key
        return metric

    def _secret_keys(self) -> set[str]:
        keys = {key for key in self.config if is_secret_key(key)}
        with contextlib.suppress(UnknownMetricError):
            keys |= secret_fields(get_measure(self.name).config_schema)
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


class MeasureResults(BaseModel):
    """The merged outputs of several measures on one text, keyed by result key."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    results: dict[str, Any]

    @field_validator("results")
    @classmethod
    def _check_json(cls, results: dict[str, Any]) -> dict[str, Any]:
        for key, value in results.items():
            if not is_json_value(value):
                raise ValueError(f"result {key!r} is not a JSON value: {value!r}")
        return results


def evaluate_measures(
    text: str,
    metrics: Iterable[BaseMeasure[Any] | MeasureSpec],
    *,
    reference: Any = None,
) -> MeasureResults:
    """Score one text with several measures and merge their outputs.

    Specs are built on the fly; ``reference`` reaches only measures that accept
    it. The measures are not re-parented.

    Raises:
        MetricConfigError: If two measures report the same key.
        MetricTypeError: If an item is neither a measure nor a spec.
    """
    merged: dict[str, Any] = {}
    for item in metrics:
        if isinstance(item, MeasureSpec):
            metric = item.build()
        elif isinstance(item, BaseMeasure):
            metric = item
        else:
            raise MetricTypeError(
                f"evaluate_measures takes measures or MeasureSpecs, got {type(item).__name__}."
            )
        for key, value in metric.score(text, reference=reference).items():
            if key in merged:
                raise MetricConfigError(
                    f"Two measures reported {key!r}; give one of them a distinct result_key."
                )
            merged[key] = value
    return MeasureResults(results=merged)
