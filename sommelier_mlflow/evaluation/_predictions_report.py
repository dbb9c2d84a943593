"""The predictions report: what scoring bare predictions found, without provenance.

An arm's :class:`~sommelier_mlflow.evaluation.EvaluationReport` certifies how
its outputs were produced (model identity, decoding, prompt digests) and
carries every row. The evaluator plugin and ``score_predictions`` are handed
bare columns (MLflow's predictions), so their report (still
``evaluator_report.json``, ``sommelier_mlflow.evaluator_report.v1``) holds
only what scoring computed: metrics, language and field slices, matched-pair
gaps, bootstrap settings and the catalog measures' aggregates. Like the other reports it is a typed
record with one writer (:meth:`PredictionsReport.to_json`,
:func:`write_predictions_report`) and one reader (:meth:`PredictionsReport.from_json`,
:func:`read_predictions_report`); without rows the reader can only check the
aggregates against each other (slices sum to the overall metrics, gaps are
target minus root), which it does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from sommelier_mlflow._json import atomic_write_json
from sommelier_mlflow.data import schema_version
from sommelier_mlflow.evaluation._checks import ReportChecker, ReportKeys, read_report_document
from sommelier_mlflow.evaluation._results import (
    BootstrapSettings,
    PairedSlice,
    ScoredExamples,
    SliceResult,
)
from sommelier_mlflow.evaluation._serialise import (
    metrics_to_dict,
    paired_to_dict,
    read_gap,
    settings_to_dict,
)
from sommelier_mlflow.toolcalls import DEFAULT_MODE, JSON_FORMAT, MetricValue

__all__ = [
    "EVALUATOR_REPORT_SCHEMA",
    "PredictionsReport",
    "read_predictions_report",
    "write_predictions_report",
]

EVALUATOR_REPORT_SCHEMA: Final = schema_version("evaluator_report")

#: Catalog-metric aggregates: column -> slice -> aggregate (mean, min, max) -> value.
ExtraMetrics = Mapping[str, Mapping[str, Mapping[str, float]]]

_KEYS: Final = ReportKeys.SCORED | {"parser_version", "extra_metrics"}
# Written only when not the defaults, like in arm reports, so older documents keep their bytes.
_OPTIONAL_KEYS: Final = frozenset({"scoring", "output_format", "slice_by", "field_slices"})
_SLICE_KEYS: Final = frozenset({"examples", "metrics"})
_GAP_KEYS: Final = (ReportKeys.GAP - {"pair_set_sha256"}) | {"pair_ids"}
_REGENERATE: Final = "mlflow.models.evaluate(..., evaluators='sommelier')"


@dataclass(frozen=True, eq=False)
class PredictionsReport:
    """What the evaluator plugin scored: aggregates and gaps, no rows and no provenance.

    Attributes:
        parser_version: The scoring mode's parser joined by the output format's decoder.
        metric_names: The scored metrics, in column order.
        examples: Rows scored.
        metrics: Overall metrics.
        slices: Per-language results (no prompt digests: the evaluator has no prompts).
        paired_slices: Matched-pair gaps per target language (no pair-set digests).
        bootstrap: The settings of the gap intervals.
        extra_metrics: Catalog-metric aggregates, column -> slice -> ``mean``/``min``/``max``.
        scoring: The scoring mode.
        output_format: The output format the outputs were decoded from.
        slice_by: Declared slice fields beyond language.
        field_slices: Results per ``F:V`` field slice.
    """

    parser_version: str
    metric_names: tuple[str, ...]
    examples: int
    metrics: Mapping[str, MetricValue]
    slices: Mapping[str, SliceResult]
    paired_slices: Mapping[str, PairedSlice]
    bootstrap: BootstrapSettings
    extra_metrics: ExtraMetrics
    scoring: str = DEFAULT_MODE
    output_format: str = JSON_FORMAT
    slice_by: tuple[str, ...] = ()
    field_slices: Mapping[str, SliceResult] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_scored(
        cls, scored: ScoredExamples, bootstrap: BootstrapSettings, extra_metrics: ExtraMetrics
    ) -> PredictionsReport:
        """The report of columns the evaluator scored (built, not re-checked)."""
        return cls(
            parser_version=scored.parser_version,
            metric_names=scored.metric_names,
            examples=len(scored.examples),
            metrics=MappingProxyType(dict(scored.metrics)),
            slices=MappingProxyType(dict(scored.slices)),
            paired_slices=MappingProxyType(dict(scored.paired_slices)),
            bootstrap=bootstrap,
            extra_metrics=extra_metrics,
            scoring=scored.scoring,
            output_format=scored.output_format,
            slice_by=scored.slice_by,
            field_slices=MappingProxyType(dict(scored.field_slices)),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``evaluator_report.json`` document (the writer's one layout)."""
        optional: dict[str, Any] = {}
        if self.scoring != DEFAULT_MODE:
            optional["scoring"] = self.scoring
        if self.output_format != JSON_FORMAT:
            optional["output_format"] = self.output_format
        if self.slice_by:
            optional["slice_by"] = list(self.slice_by)
            optional["field_slices"] = _slices_to_dict(self.field_slices)
        return {
            "schema_version": EVALUATOR_REPORT_SCHEMA,
            "parser_version": self.parser_version,
            **optional,
            "metric_names": list(self.metric_names),
            "examples": self.examples,
            "metrics": metrics_to_dict(self.metrics),
            "slices": _slices_to_dict(self.slices),
            "paired_slices": {
                language: paired_to_dict(paired, digest=False)
                for language, paired in self.paired_slices.items()
            },
            "bootstrap": settings_to_dict(self.bootstrap),
            "extra_metrics": {
                column: {name: dict(values) for name, values in slices.items()}
                for column, slices in self.extra_metrics.items()
            },
        }

    @classmethod
    def from_json(cls, document: object, *, source: str = "evaluator report") -> PredictionsReport:
        """Read and check an evaluator report document (the one reader).

        Raises:
            DataError: A malformed document (exit 2).
            InvariantViolationError: Aggregates that disagree with each other (exit 5).
        """
        check = ReportChecker(source, _REGENERATE)
        top = check.mapping(document, "evaluator report")
        present = set(top) - _OPTIONAL_KEYS
        if present != _KEYS:
            check.fail(
                "evaluator report",
                f"fields wrong: missing {sorted(_KEYS - present)}, "
                f"unexpected {sorted(present - _KEYS)}",
            )
        if top["schema_version"] != EVALUATOR_REPORT_SCHEMA:
            check.fail(
                "schema_version", f"is {top['schema_version']!r}, not {EVALUATOR_REPORT_SCHEMA!r}"
            )
        names = check.metric_names(top["metric_names"])
        metrics = check.metrics(top["metrics"], "metrics", names)
        slices = _read_slices(check, top["slices"], "slices", names)
        examples = check.count(top["examples"], "examples")
        if sum(entry.examples for entry in slices.values()) != examples:
            check.broken("slices", f"do not add up to the {examples} examples")
        for name, metric in metrics.items():
            parts = [entry.metrics[name] for entry in slices.values()]
            summed = (sum(p.numerator for p in parts), sum(p.denominator for p in parts))
            if summed != (metric.numerator, metric.denominator):
                check.broken(f"metrics.{name}", "is not the sum of the language slices")
        slice_by = tuple(
            check.text(name, "slice_by")
            for name in check.array(top.get("slice_by", []), "slice_by")
        )
        if bool(slice_by) != ("field_slices" in top):
            check.fail("field_slices", "are written exactly when slice_by is")
        return cls(
            parser_version=check.text(top["parser_version"], "parser_version"),
            metric_names=names,
            examples=examples,
            metrics=MappingProxyType(metrics),
            slices=MappingProxyType(slices),
            paired_slices=MappingProxyType(
                {
                    language: read_gap(check, language, entry, _GAP_KEYS, slices, names)
                    for language, entry in check.mapping(
                        top["paired_slices"], "paired_slices"
                    ).items()
                }
            ),
            bootstrap=check.settings(top["bootstrap"]),
            extra_metrics=_read_extra(check, top["extra_metrics"]),
            scoring=check.text(top.get("scoring", DEFAULT_MODE), "scoring"),
            output_format=check.text(top.get("output_format", JSON_FORMAT), "output_format"),
            slice_by=slice_by,
            field_slices=MappingProxyType(
                _read_slices(check, top.get("field_slices", {}), "field_slices", names)
            ),
        )


def _slices_to_dict(slices: Mapping[str, SliceResult]) -> dict[str, Any]:
    return {
        name: {"examples": entry.examples, "metrics": metrics_to_dict(entry.metrics)}
        for name, entry in slices.items()
    }


def _read_slices(
    check: ReportChecker, value: object, where: str, names: tuple[str, ...]
) -> dict[str, SliceResult]:
    slices: dict[str, SliceResult] = {}
    for name, raw in check.mapping(value, where).items():
        at = f"{where}.{name}"
        entry = check.mapping(raw, at, _SLICE_KEYS)
        slices[name] = SliceResult(
            slice=name,
            examples=check.count(entry["examples"], f"{at}.examples"),
            metrics=MappingProxyType(check.metrics(entry["metrics"], f"{at}.metrics", names)),
            prompt_set_sha256=None,
        )
    return slices


def _read_extra(check: ReportChecker, value: object) -> ExtraMetrics:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for column, slices in check.mapping(value, "extra_metrics").items():
        out[column] = {}
        for name, aggregates in check.mapping(slices, f"extra_metrics.{column}").items():
            at = f"extra_metrics.{column}.{name}"
            entries = check.mapping(aggregates, at)
            for key, number in entries.items():
                check.number(number, f"{at}.{key}")  # kept as written, so it rewrites unchanged
            out[column][name] = dict(entries)
    return out


def read_predictions_report(path: str | os.PathLike[str]) -> PredictionsReport:
    """Read and check an ``evaluator_report.json`` file.

    Raises:
        DataError: Unreadable, not strict JSON, or malformed (exit 2).
        InvariantViolationError: Aggregates that disagree with each other (exit 5).
    """
    source, data = read_report_document(path, "evaluator report")
    return PredictionsReport.from_json(data, source=source)


def write_predictions_report(path: str | os.PathLike[str], report: PredictionsReport) -> Path:
    """Atomically write an evaluator report (the one writer); returns the path."""
    return atomic_write_json(path, report.to_json())
