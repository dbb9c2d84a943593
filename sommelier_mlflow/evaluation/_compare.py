"""The comparison gate and the base-versus-adapter comparison report.

A delta between two runs means something only if nothing but the adapter
differed. The gate therefore refuses, before any number is computed, unless
the two reports agree on every identity field, checked in the fixed order of
:data:`GATE_FIELDS` so that the refusal always names the *first* difference
(the most fundamental one: comparing the wrong arms is reported before a
batch-size difference, which is reported before a different prompt).

Everything after the gate is a pure function of the two reports and the seed:
each interval draws from its own stream ``derive_seed(seed, "delta/<slice>")``,
and the JSON is written with sorted keys, so the same inputs give the same
bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import numpy as np

from sommelier_mlflow._json import atomic_write_bytes, canonical_json, dumps_pretty, sha256_text
from sommelier_mlflow.data import COMPARISON_REPORT_SCHEMA, OVERALL
from sommelier_mlflow.errors import ComparisonRefusedError, InputError
from sommelier_mlflow.evaluation._markdown import render_comparison_markdown
from sommelier_mlflow.evaluation._report import (
    ArmReport,
    load_evaluation_report,
    parse_evaluation_report,
)
from sommelier_mlflow.evaluation._scoring import (
    BootstrapSettings,
    bootstrap_provenance,
    clean_float,
    intervals_to_dict,
    metrics_from_components,
    metrics_to_dict,
)
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import mcnemar_from_outcomes, paired_bootstrap
from sommelier_mlflow.toolcalls import MetricValue, mcnemar_metric

__all__ = [
    "COMPARISON_MARKDOWN_FILENAME",
    "COMPARISON_REPORT_FILENAME",
    "GATE_FIELDS",
    "MARGINAL_GAP_NOTE",
    "MCNEMAR_METRIC",
    "ComparisonArtifacts",
    "check_comparable",
    "compare_reports",
    "run_comparison",
    "write_comparison_report",
]

COMPARISON_REPORT_FILENAME: Final = "comparison_report.json"
COMPARISON_MARKDOWN_FILENAME: Final = "comparison_report.md"
MCNEMAR_METRIC: Final = "full_call_exact_match"
"""The spec's McNemar outcome; a comparison tests the first metric of the reports'
``metric_names`` that the registry flags ``mcnemar=True`` (this one, for the spec's set)."""

GATE_FIELDS: Final[tuple[str, ...]] = (
    "model_kind",
    "adapter",
    "model_identity.base_model",
    "model_identity.base_revision",
    "model_identity.tokenizer",
    "model_identity.tokenizer_revision",
    "test_split_sha256",
    "parser_version",
    "decoding.temperature",
    "decoding.do_sample",
    "decoding.max_new_tokens",
    "decoding.batch_size",
    "slices",
    "metric_names",
    "prompt_set_sha256.<language>",
    "paired_slices",
    "pair_set_sha256.<language>",
    "example_ids",
)
"""The gate's checks in order; ``ComparisonRefusedError.field`` names the first failing one
(``<language>`` is replaced by the slice, languages in sorted order). ``model_kind`` is
checked on the base report first, then on the adapter report; ``adapter`` likewise
(null for base, set for adapter). A pair's root language is covered by its pair-set
digest, which includes the root ids."""

MARGINAL_GAP_NOTE: Final = (
    "Descriptive only: target-language slice minus root-language slice over the complete "
    "slices, without an interval. The two slices can hold different examples (untranslated "
    "or unmatched rows), so this difference mixes the language effect with cohort "
    "differences; the matched-pair gaps are the primary estimate."
)

_HINTS: Final = {
    "model_kind": "pass the base arm's report first and the adapter arm's report second",
    "adapter": "the base arm must have no adapter and the adapter arm must name one",
    "model_identity": "evaluate both arms with the same base model, tokenizer and revisions",
    "test_split_sha256": "evaluate both arms on the same test-split file",
    "parser_version": "re-score both arms with the same parser version",
    "decoding": "generate both arms with identical decoding settings, batch size included",
    "slices": "evaluate both arms on the same language slices",
    "metric_names": "score both arms with the same sommelier_mlflow version",
    "prompt_set_sha256": "generate both arms from the same formatted prompts",
    "paired_slices": "evaluate both arms on the same split so the same languages are paired",
    "pair_set_sha256": "evaluate both arms on the same split so the same rows are paired",
    "example_ids": "evaluate both arms on the same examples",
}


@dataclass(frozen=True)
class ComparisonArtifacts:
    """A comparison report and the two files it was written to."""

    report: dict[str, Any]
    json_path: Path
    markdown_path: Path


def _shown(value: object) -> str:
    text = canonical_json(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def _refuse(
    field: str, base: ArmReport, adapter: ArmReport, base_value: object, adapter_value: object
) -> NoReturn:
    hint = _HINTS[field.split(".", 1)[0]]
    raise ComparisonRefusedError(
        f"refusing to compare: {field} differs (base report {base.source}: "
        f"{_shown(base_value)}; adapter report {adapter.source}: {_shown(adapter_value)}); "
        f"{hint}",
        field=field,
    )


def _same(left: object, right: object) -> bool:
    # Canonical JSON equality: 1 != 1.0 != true, as everywhere else in the product.
    return canonical_json(left) == canonical_json(right)


def _gate(base: ArmReport, adapter: ArmReport) -> None:
    b, a = base.report, adapter.report
    bi, ai = b["identity"], a["identity"]
    if bi["model_kind"] != "base":
        _refuse("model_kind", base, adapter, bi["model_kind"], ai["model_kind"])
    if ai["model_kind"] != "adapter":
        _refuse("model_kind", base, adapter, bi["model_kind"], ai["model_kind"])
    if bi["adapter"] is not None or ai["adapter"] is None:
        _refuse("adapter", base, adapter, bi["adapter"], ai["adapter"])
    for group, keys in (
        ("model_identity", ("base_model", "base_revision", "tokenizer", "tokenizer_revision")),
        (None, ("test_split_sha256", "parser_version")),
        ("decoding", ("temperature", "do_sample", "max_new_tokens", "batch_size")),
    ):
        for key in keys:
            left = bi[group][key] if group else bi[key]
            right = ai[group][key] if group else ai[key]
            if not _same(left, right):
                _refuse(f"{group}.{key}" if group else key, base, adapter, left, right)
    if sorted(b["slices"]) != sorted(a["slices"]):
        _refuse("slices", base, adapter, sorted(b["slices"]), sorted(a["slices"]))
    if list(base.metric_names) != list(adapter.metric_names):
        _refuse("metric_names", base, adapter, base.metric_names, adapter.metric_names)
    for language in sorted(b["slices"]):
        left, right = bi["prompt_set_sha256"][language], ai["prompt_set_sha256"][language]
        if left != right:
            _refuse(f"prompt_set_sha256.{language}", base, adapter, left, right)
    if sorted(b["paired_slices"]) != sorted(a["paired_slices"]):
        _refuse(
            "paired_slices", base, adapter, sorted(b["paired_slices"]), sorted(a["paired_slices"])
        )
    for language in sorted(b["paired_slices"]):
        left = b["paired_slices"][language]["pair_set_sha256"]
        right = a["paired_slices"][language]["pair_set_sha256"]
        if left != right:
            _refuse(f"pair_set_sha256.{language}", base, adapter, left, right)
    if base.example_ids != adapter.example_ids:
        differing = sorted(set(base.example_ids) ^ set(adapter.example_ids))
        _refuse(
            "example_ids",
            base,
            adapter,
            [i for i in differing if i in set(base.example_ids)][:5],
            [i for i in differing if i in set(adapter.example_ids)][:5],
        )


def check_comparable(base_report: Mapping[str, Any], adapter_report: Mapping[str, Any]) -> None:
    """Run the comparison gate alone (both reports are fully checked first).

    Args:
        base_report: The base arm's evaluation report.
        adapter_report: The adapter arm's evaluation report.

    Raises:
        ComparisonRefusedError: Naming the first differing field of
            :data:`GATE_FIELDS` in ``.field`` (exit 4).
        DataError: A malformed report (exit 2).
        InvariantViolationError: A report inconsistent with its own rows (exit 5).
    """
    _gate(
        parse_evaluation_report(base_report, source="base report"),
        parse_evaluation_report(adapter_report, source="adapter report"),
    )


def _compare_slice(
    name: str,
    rows: np.ndarray[Any, np.dtype[np.intp]] | slice,
    base: ArmReport,
    adapter: ArmReport,
    settings: BootstrapSettings,
    outcome: str,
) -> dict[str, Any]:
    names = base.metric_names
    full = names.index(outcome)
    base_num, base_den = base.numerators[rows], base.denominators[rows]
    adapter_num, adapter_den = adapter.numerators[rows], adapter.denominators[rows]
    result = paired_bootstrap(
        base_num,
        base_den,
        adapter_num,
        adapter_den,
        resamples=settings.resamples,
        seed=derive_seed(settings.seed, f"delta/{name}"),
        confidence=settings.confidence,
        metric_names=names,
    )
    mcnemar = mcnemar_from_outcomes(base_num[:, full] == 1, adapter_num[:, full] == 1)
    return {
        "examples": len(base_num),
        "base": metrics_to_dict(metrics_from_components(base_num, base_den, names)),
        "adapter": metrics_to_dict(metrics_from_components(adapter_num, adapter_den, names)),
        "delta": intervals_to_dict(result),
        "bootstrap": bootstrap_provenance(result),
        "mcnemar": {"metric": outcome, **mcnemar.to_dict()},
    }


def _primary_gaps(arm: ArmReport) -> dict[str, Any]:
    return {
        language: {key: value for key, value in paired.items() if key != "pair_ids"}
        for language, paired in arm.report["paired_slices"].items()
    }


def _marginal_gaps(arm: ArmReport) -> dict[str, Any]:
    slices = arm.report["slices"]
    marginal: dict[str, Any] = {}
    for language, paired in arm.report["paired_slices"].items():
        root_language = paired["root_language"]
        metrics: dict[str, Any] = {}
        for name in arm.metric_names:
            target = MetricValue.from_dict(slices[language]["metrics"][name])
            root = MetricValue.from_dict(slices[root_language]["metrics"][name])
            metrics[name] = {
                "value": clean_float(target.value - root.value),
                "target": target.to_dict(),
                "root": root.to_dict(),
            }
        marginal[language] = {"root_language": root_language, "metrics": metrics}
    return marginal


def _run_summary(arm: ArmReport) -> dict[str, Any]:
    identity = arm.report["identity"]
    return {
        "model_kind": identity["model_kind"],
        "adapter": identity["adapter"],
        "examples": arm.report["examples"],
        "report_sha256": sha256_text(canonical_json(arm.report)),
    }


def _compare(base: ArmReport, adapter: ArmReport, settings: BootstrapSettings) -> dict[str, Any]:
    _gate(base, adapter)
    outcome = mcnemar_metric(base.metric_names)
    if outcome is None:
        raise InputError(
            f"none of the reports' metrics {list(base.metric_names)} is registered as a McNemar "
            f"outcome (such as {MCNEMAR_METRIC!r}); score both arms with this version of "
            "sommelier_mlflow"
        )
    identity = base.report["identity"]
    languages = sorted(base.report["slices"])
    language_of = np.array(base.languages)
    slices = {OVERALL: _compare_slice(OVERALL, slice(None), base, adapter, settings, outcome)}
    for language in languages:
        rows = np.flatnonzero(language_of == language)
        slices[language] = _compare_slice(language, rows, base, adapter, settings, outcome)
    return {
        "schema_version": COMPARISON_REPORT_SCHEMA,
        "identity": {
            "model_identity": identity["model_identity"],
            "test_split_sha256": identity["test_split_sha256"],
            "parser_version": identity["parser_version"],
            "decoding": identity["decoding"],
            "metric_names": list(base.metric_names),
            "slices": languages,
            "prompt_set_sha256": identity["prompt_set_sha256"],
            "pair_set_sha256": {
                language: paired["pair_set_sha256"]
                for language, paired in base.report["paired_slices"].items()
            },
        },
        "runs": {"base": _run_summary(base), "adapter": _run_summary(adapter)},
        "bootstrap": settings.to_dict(),
        "slices": slices,
        "gaps": {"base": _primary_gaps(base), "adapter": _primary_gaps(adapter)},
        "marginal_full_slices": {
            "note": MARGINAL_GAP_NOTE,
            "base": _marginal_gaps(base),
            "adapter": _marginal_gaps(adapter),
        },
    }


def compare_reports(
    base_report: Mapping[str, Any],
    adapter_report: Mapping[str, Any],
    *,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Compare a base and an adapter evaluation report behind the gate.

    Args:
        base_report: The base arm's ``evaluation_report.json`` document.
        adapter_report: The adapter arm's document.
        seed: Base seed; the delta of slice ``s`` uses ``derive_seed(seed, f"delta/{s}")``.
        resamples: Bootstrap resamples per delta interval.
        confidence: Nominal coverage of every delta interval.

    Returns:
        The ``comparison_report.json`` document (deterministic for given inputs).

    Raises:
        ComparisonRefusedError: The gate refused; ``.field`` names the first
            difference (exit 4).
        DataError: A malformed report (exit 2).
        InvariantViolationError: A report inconsistent with its own rows (exit 5).
        ConfigError: Bad seed, resamples or confidence (exit 2).
    """
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=confidence)
    return _compare(
        parse_evaluation_report(base_report, source="base report"),
        parse_evaluation_report(adapter_report, source="adapter report"),
        settings,
    )


def write_comparison_report(
    out_dir: str | os.PathLike[str], report: Mapping[str, Any]
) -> ComparisonArtifacts:
    """Write ``comparison_report.json`` and its Markdown rendering atomically.

    The Markdown is rendered before anything is written, so a rendering error
    leaves no half-written pair of files behind.
    """
    document = dict(report)
    markdown = render_comparison_markdown(document).encode("utf-8")
    directory = Path(out_dir)
    json_path = atomic_write_bytes(directory / COMPARISON_REPORT_FILENAME, dumps_pretty(document))
    markdown_path = atomic_write_bytes(directory / COMPARISON_MARKDOWN_FILENAME, markdown)
    return ComparisonArtifacts(report=document, json_path=json_path, markdown_path=markdown_path)


def run_comparison(
    base_path: str | os.PathLike[str],
    adapter_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> ComparisonArtifacts:
    """Read two evaluation reports, gate, compare, and write the comparison files.

    Nothing is written unless both reports are valid and the gate passes.

    Args:
        base_path: The base arm's ``evaluation_report.json``.
        adapter_path: The adapter arm's ``evaluation_report.json``.
        out_dir: Directory for ``comparison_report.json`` and ``comparison_report.md``.
        seed: Base seed of the delta intervals.
        resamples: Bootstrap resamples per interval.
        confidence: Nominal coverage of every interval.

    Raises:
        ComparisonRefusedError: The gate refused (exit 4).
        DataError: A report is unreadable or malformed (exit 2).
        InvariantViolationError: A report is inconsistent with its own rows (exit 5).
    """
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=confidence)
    report = _compare(
        load_evaluation_report(base_path), load_evaluation_report(adapter_path), settings
    )
    return write_comparison_report(out_dir, report)
