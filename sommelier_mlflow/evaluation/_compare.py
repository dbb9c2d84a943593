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
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypedDict

import numpy as np

from sommelier_mlflow._json import atomic_write_bytes, canonical_json, dumps_pretty
from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.errors import ComparisonRefusedError, InputError
from sommelier_mlflow.evaluation import _comparison_report as report_types
from sommelier_mlflow.evaluation._claims import (
    ClaimsSpec,
    RegistrationRecord,
    check_claims,
    decide_claims,
)
from sommelier_mlflow.evaluation._markdown import render_comparison_markdown
from sommelier_mlflow.evaluation._report import EvaluationReport, read_evaluation_report
from sommelier_mlflow.evaluation._results import BootstrapSettings, metrics_from_components
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import (
    BootstrapDraws,
    cluster_test_from_outcomes,
    mcnemar_from_outcomes,
    paired_bootstrap_draws,
)
from sommelier_mlflow.toolcalls import mcnemar_metric

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "COMPARISON_REPORT_FILENAME",
    "COMPARISON_MARKDOWN_FILENAME",
    "MCNEMAR_METRIC",
    "GATE_FIELDS",
    "ComparisonArtifacts",
    "check_comparable",
    "compare_reports",
    "compare_reports_with_draws",
    "write_comparison_report",
    "run_comparison",
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
    "prompt_format",
    "chat_template_kwargs",
    "template_date",
    "dataset.name",
    "dataset.id",
    "dataset.digest",
    "test_split_sha256",
    "scoring",
    "parser_version",
    "decoding.temperature",
    "decoding.do_sample",
    "decoding.max_new_tokens",
    "decoding.batch_size",
    "decoding.backend",
    "sample",
    "skip_overlong",
    "skip_overlong.example_ids",
    "slices",
    "slice_by",
    "field_slices",
    "metric_names",
    "prompt_set_sha256.<language>",
    "paired_slices",
    "pair_set_sha256.<language>",
    "example_ids",
    "conversation_ids",
)
"""The gate's checks in order; ``ComparisonRefusedError.field`` names the first failing one
(``<language>`` is replaced by the slice, languages in sorted order). ``model_kind`` is
checked on the base report first, then on the adapter report; ``adapter`` likewise
(null for base, set for adapter). A pair's root language is covered by its pair-set
digest, which includes the root ids."""

_HINTS: Final = {
    "model_kind": "pass the base arm's report first and the adapter arm's report second",
    "adapter": "the base arm must have no adapter and the adapter arm must name one",
    "model_identity": "evaluate both arms with the same base model, tokenizer and revisions",
    "dataset": "evaluate both arms on the same MLflow evaluation dataset, unchanged in between "
    "(its digest changes with every edit), or both on the same split file",
    "test_split_sha256": "evaluate both arms on the same test-split file",
    "parser_version": "re-score both arms with the same parser version and --output-format",
    "scoring": "score both arms with the same --scoring mode",
    "prompt_format": "render both arms' prompts with the same --prompt-format",
    "chat_template_kwargs": "render both arms' prompts with the same --chat-template-kwargs",
    "template_date": "render both arms' prompts with the same --template-date",
    "slice_by": "score both arms with the same --slice-by fields",
    "field_slices": "score both arms on the same split so the same field slices exist",
    "decoding": "generate both arms with identical decoding settings, batch size included",
    "sample": "evaluate both arms with the same --max-examples and --seed (the same sample)",
    "skip_overlong": "generate both arms with --skip-overlong, or neither",
    "slices": "evaluate both arms on the same language slices",
    "metric_names": "score both arms with the same sommelier_mlflow version",
    "prompt_set_sha256": "generate both arms from the same formatted prompts",
    "paired_slices": "evaluate both arms on the same split so the same languages are paired",
    "pair_set_sha256": "evaluate both arms on the same split so the same rows are paired",
    "example_ids": "evaluate both arms on the same examples",
    "conversation_ids": "evaluate both arms on the same split, whose rows name the same "
    "conversations (intervals and tests resample whole conversations)",
}


@dataclass(frozen=True)
class ComparisonArtifacts:
    """A comparison report and the two files it was written to."""

    report: report_types.ComparisonReport
    json_path: Path
    markdown_path: Path


def _shown(value: object) -> str:
    text = canonical_json(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


def _refuse(
    field: str,
    base: EvaluationReport,
    adapter: EvaluationReport,
    base_value: object,
    adapter_value: object,
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


def _adapter_json(report: EvaluationReport) -> dict[str, str] | None:
    adapter = report.identity.adapter
    return adapter.to_dict() if adapter is not None else None


_DATASET: Final = ("name", "id", "digest")


def _dataset_json(report: EvaluationReport) -> dict[str, str | None]:
    """The report's dataset fields, each ``None`` for a split read from a file."""
    dataset = report.identity.dataset
    if dataset is None:
        return dict.fromkeys(_DATASET)
    return dict(dataset.to_dict())


def _gate(base: EvaluationReport, adapter: EvaluationReport) -> None:
    bi, ai = base.identity, adapter.identity
    if bi.model_kind != "base" or ai.model_kind != "adapter":
        _refuse("model_kind", base, adapter, bi.model_kind, ai.model_kind)
    if bi.adapter is not None or ai.adapter is None:
        _refuse("adapter", base, adapter, _adapter_json(base), _adapter_json(adapter))
    left_model, right_model = bi.model_identity.to_dict(), ai.model_identity.to_dict()
    for key in ("base_model", "base_revision", "tokenizer", "tokenizer_revision"):
        if not _same(left_model[key], right_model[key]):
            _refuse(f"model_identity.{key}", base, adapter, left_model[key], right_model[key])
    left_dataset, right_dataset = _dataset_json(base), _dataset_json(adapter)
    for key, left, right in (
        # Before the split's digest: a split rendered in another prompt format is
        # another file, and "another prompt format" says why.
        ("prompt_format", bi.prompt_format, ai.prompt_format),
        # So is one rendered with other template variables (a thinking switch, a date).
        ("chat_template_kwargs", dict(bi.chat_template_kwargs), dict(ai.chat_template_kwargs)),
        # Or on another fixed day.
        ("template_date", bi.template_date, ai.template_date),
        # So is a split read from another dataset, or from an edited one.
        *((f"dataset.{name}", left_dataset[name], right_dataset[name]) for name in _DATASET),
        ("test_split_sha256", bi.test_split_sha256, ai.test_split_sha256),
        # The mode before its parser: "scored in another mode" says more than a version.
        ("scoring", bi.scoring, ai.scoring),
        ("parser_version", bi.parser_version, ai.parser_version),
    ):
        if not _same(left, right):
            _refuse(key, base, adapter, left, right)
    left_decoding, right_decoding = bi.decoding.to_dict(), ai.decoding.to_dict()
    for key in ("temperature", "do_sample", "max_new_tokens", "batch_size"):
        if not _same(left_decoding[key], right_decoding[key]):
            _refuse(f"decoding.{key}", base, adapter, left_decoding[key], right_decoding[key])
    # Two backends can decode the same prompts differently (kernels, batching), so
    # an hf arm is never compared with a server arm; reports from before backends
    # were recorded carry none, and compare only with each other.
    left_backend, right_backend = left_decoding.get("backend"), right_decoding.get("backend")
    if not _same(left_backend, right_backend):
        _refuse("decoding.backend", base, adapter, left_backend, right_backend)
    # Multi-turn outputs depend on the loop that fed results back (step limit, decoder).
    left_loop, right_loop = left_decoding.get("execution"), right_decoding.get("execution")
    if not _same(left_loop, right_loop):
        _refuse("decoding.execution", base, adapter, left_loop, right_loop)
    _gate_selection(base, adapter)
    if sorted(base.slices) != sorted(adapter.slices):
        _refuse("slices", base, adapter, sorted(base.slices), sorted(adapter.slices))
    if bi.slice_by != ai.slice_by:
        _refuse("slice_by", base, adapter, list(bi.slice_by), list(ai.slice_by))
    if list(base.field_slices) != list(adapter.field_slices):
        _refuse("field_slices", base, adapter, list(base.field_slices), list(adapter.field_slices))
    if list(base.metric_names) != list(adapter.metric_names):
        _refuse("metric_names", base, adapter, base.metric_names, adapter.metric_names)
    for language in sorted(base.slices):
        left_set = base.slices[language].prompt_set_sha256
        right_set = adapter.slices[language].prompt_set_sha256
        if left_set != right_set:
            _refuse(f"prompt_set_sha256.{language}", base, adapter, left_set, right_set)
    if sorted(base.paired_slices) != sorted(adapter.paired_slices):
        _refuse(
            "paired_slices",
            base,
            adapter,
            sorted(base.paired_slices),
            sorted(adapter.paired_slices),
        )
    for language in sorted(base.paired_slices):
        left_pairs = base.paired_slices[language].pair_set_sha256
        right_pairs = adapter.paired_slices[language].pair_set_sha256
        if left_pairs != right_pairs:
            _refuse(f"pair_set_sha256.{language}", base, adapter, left_pairs, right_pairs)
    if base.example_ids != adapter.example_ids:
        differing = sorted(set(base.example_ids) ^ set(adapter.example_ids))
        _refuse(
            "example_ids",
            base,
            adapter,
            [i for i in differing if i in set(base.example_ids)][:5],
            [i for i in differing if i in set(adapter.example_ids)][:5],
        )
    if base.conversation_ids != adapter.conversation_ids:
        _refuse(
            "conversation_ids",
            base,
            adapter,
            sorted({c for c in base.conversation_ids if c is not None})[:5],
            sorted({c for c in adapter.conversation_ids if c is not None})[:5],
        )


def _gate_selection(base: EvaluationReport, adapter: EvaluationReport) -> None:
    """Both arms evaluated the same rows: the same sample, the same prompts skipped.

    Checked before the slices, which a different selection changes too, so
    the refusal names the cause rather than its effect.
    """
    bi, ai = base.identity, adapter.identity
    left_sample = None if bi.sample is None else dict(bi.sample)
    right_sample = None if ai.sample is None else dict(ai.sample)
    if not _same(left_sample, right_sample):
        _refuse("sample", base, adapter, left_sample, right_sample)
    left, right = bi.skip_overlong, ai.skip_overlong
    if (left is None) != (right is None):
        _refuse(
            "skip_overlong",
            base,
            adapter,
            None if left is None else left.to_dict(),
            None if right is None else right.to_dict(),
        )
    if left is not None and right is not None and left.example_ids != right.example_ids:
        _refuse(
            "skip_overlong.example_ids",
            base,
            adapter,
            list(left.example_ids),
            list(right.example_ids),
        )


def check_comparable(base_report: EvaluationReport, adapter_report: EvaluationReport) -> None:
    """Run the comparison gate alone.

    Args:
        base_report: The base arm's evaluation report.
        adapter_report: The adapter arm's evaluation report.

    Raises:
        ComparisonRefusedError: Naming the first differing field of
            :data:`GATE_FIELDS` in ``.field`` (exit 4).
    """
    _gate(base_report, adapter_report)


def _compare_slice(
    name: str,
    rows: np.ndarray[Any, np.dtype[np.intp]] | slice,
    base: EvaluationReport,
    adapter: EvaluationReport,
    settings: BootstrapSettings,
    outcome: str,
) -> tuple[report_types.SliceComparison, BootstrapDraws]:
    names = base.metric_names
    column = names.index(outcome)
    base_num, base_den = base.numerators[rows], base.denominators[rows]
    adapter_num, adapter_den = adapter.numerators[rows], adapter.denominators[rows]
    # The gate proved both arms name the same conversations: one clustering serves both.
    clusters = None if base.clusters is None else np.array(base.clusters)[rows]
    base_right, adapter_right = base_num[:, column] == 1, adapter_num[:, column] == 1
    draws = paired_bootstrap_draws(
        base_num,
        base_den,
        adapter_num,
        adapter_den,
        resamples=settings.resamples,
        seed=derive_seed(settings.seed, f"delta/{name}"),
        confidence=settings.confidence,
        metric_names=names,
        clusters=clusters,
    )
    entry = report_types.SliceComparison(
        examples=len(base_num),
        base=MappingProxyType(metrics_from_components(base_num, base_den, names)),
        adapter=MappingProxyType(metrics_from_components(adapter_num, adapter_den, names)),
        delta=draws.result,
        mcnemar_metric=outcome,
        mcnemar=(
            mcnemar_from_outcomes(base_right, adapter_right)
            if clusters is None
            else cluster_test_from_outcomes(base_right, adapter_right, clusters)
        ),
    )
    return entry, draws


def _primary_gaps(arm: EvaluationReport) -> Mapping[str, report_types.LanguageGap]:
    return MappingProxyType(
        {
            language: report_types.LanguageGap(
                root_language=paired.root_language,
                pairs=len(paired.pairs),
                coverage=paired.coverage,
                pair_set_sha256=paired.pair_set_sha256 or "",
                root_metrics=paired.root_metrics,
                target_metrics=paired.target_metrics,
                bootstrap=paired.bootstrap,
            )
            for language, paired in arm.paired_slices.items()
        }
    )


def _marginal_gaps(arm: EvaluationReport) -> Mapping[str, report_types.MarginalGap]:
    return MappingProxyType(
        {
            language: report_types.MarginalGap(
                root_language=paired.root_language,
                target=arm.slices[language].metrics,
                root=arm.slices[paired.root_language].metrics,
            )
            for language, paired in arm.paired_slices.items()
        }
    )


def _run_summary(arm: EvaluationReport) -> report_types.RunSummary:
    return report_types.RunSummary(
        model_kind=arm.identity.model_kind,
        adapter=arm.identity.adapter,
        examples=arm.examples,
        report_sha256=arm.sha256,
        format_hint=arm.format_hint,
        format_mismatch=arm.format_mismatch,
        calls_in_reasoning=arm.calls_in_reasoning,
    )


class _CompareOptions(TypedDict, total=False):
    """The options of :func:`compare_reports`, which :func:`run_comparison` passes on as given."""

    seed: int
    resamples: int
    confidence: float
    claims: ClaimsSpec | None
    registration: RegistrationRecord | None


def compare_reports(
    base_report: EvaluationReport,
    adapter_report: EvaluationReport,
    *,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
    claims: ClaimsSpec | None = None,
    registration: RegistrationRecord | None = None,
) -> report_types.ComparisonReport:
    """Compare a base and an adapter evaluation report behind the gate.

    Args:
        base_report: The base arm's report.
        adapter_report: The adapter arm's report.
        seed: Base seed; the delta of slice ``s`` uses ``derive_seed(seed, f"delta/{s}")``.
        resamples: Bootstrap resamples per delta interval.
        confidence: Nominal coverage of every delta interval.
        claims: Preregistered claims to decide from the very draws behind the
            delta intervals (no second resampling); adds the verdict.
        registration: The claims' preregistration record (the integration
            layer knows MLflow's timestamps); recorded with the verdict.

    Returns:
        The comparison report (deterministic for given inputs).

    Raises:
        ComparisonRefusedError: The gate refused; ``.field`` names the first
            difference (exit 4).
        InputError: No compared metric is registered as a McNemar outcome (exit 2).
        ConfigError: Bad seed, resamples or confidence (exit 2).
        DataError: A claim names a slice or metric the comparison lacks (exit 2).
    """
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=confidence)
    report, _ = compare_reports_with_draws(
        base_report, adapter_report, settings, claims, registration
    )
    return report


def compare_reports_with_draws(
    base_report: EvaluationReport,
    adapter_report: EvaluationReport,
    settings: BootstrapSettings,
    claims: ClaimsSpec | None = None,
    registration: RegistrationRecord | None = None,
) -> tuple[report_types.ComparisonReport, Mapping[str, BootstrapDraws]]:
    """:func:`compare_reports`, and the bootstrap draws behind each slice's intervals.

    A leaderboard tests each adapter of a family from the very draws that
    produced its published interval, as a claim does; this hands them out.
    """
    base, adapter = base_report, adapter_report
    _gate(base, adapter)
    outcome = mcnemar_metric(base.metric_names)
    if outcome is None:
        raise InputError(
            f"none of the reports' metrics {list(base.metric_names)} is registered as a McNemar "
            f"outcome (such as {MCNEMAR_METRIC!r}); score both arms with this version of "
            "sommelier_mlflow"
        )
    identity = base.identity
    languages = tuple(sorted(base.slices))
    if claims is not None:
        # Checked before any resampling, so a bad claims file costs nothing.
        check_claims(
            claims,
            slices=(OVERALL, *languages, *base.field_slice_rows),
            metric_names=base.metric_names,
            seed=settings.seed,
            resamples=settings.resamples,
        )
    language_of = np.array(base.languages)
    slices: dict[str, report_types.SliceComparison] = {}
    draws: dict[str, BootstrapDraws] = {}
    for name in (OVERALL, *languages):
        rows = slice(None) if name == OVERALL else np.flatnonzero(language_of == name)
        slices[name], draws[name] = _compare_slice(name, rows, base, adapter, settings, outcome)
    # The gate proved both arms hold the same example ids in the same order, so one
    # membership serves both arms.
    for name, field_rows in base.field_slice_rows.items():
        slices[name], draws[name] = _compare_slice(
            name, field_rows, base, adapter, settings, outcome
        )
    verdict = None
    if claims is not None:
        verdict = decide_claims(claims, draws, registration or RegistrationRecord())
    report = report_types.ComparisonReport(
        identity=report_types.ComparisonIdentity(
            model_identity=identity.model_identity,
            test_split_sha256=identity.test_split_sha256,
            parser_version=identity.parser_version,
            decoding=identity.decoding,
            prompt_set_sha256=MappingProxyType(base.prompt_set_sha256),
            pair_set_sha256=MappingProxyType(
                {
                    language: paired.pair_set_sha256 or ""
                    for language, paired in base.paired_slices.items()
                }
            ),
            metric_names=base.metric_names,
            languages=languages,
            field_slices=tuple(base.field_slices),
            scoring=identity.scoring,
            slice_by=identity.slice_by,
        ),
        runs=MappingProxyType({"base": _run_summary(base), "adapter": _run_summary(adapter)}),
        bootstrap=settings,
        slices=MappingProxyType(slices),
        gaps=MappingProxyType({"base": _primary_gaps(base), "adapter": _primary_gaps(adapter)}),
        marginal=MappingProxyType(
            {"base": _marginal_gaps(base), "adapter": _marginal_gaps(adapter)}
        ),
        claims=verdict,
    )
    return report, MappingProxyType(draws)


def write_comparison_report(
    out_dir: str | os.PathLike[str], report: report_types.ComparisonReport
) -> ComparisonArtifacts:
    """Write ``comparison_report.json`` and its Markdown rendering atomically (the one writer).

    The Markdown is rendered before anything is written, so a rendering error
    leaves no half-written pair of files behind.
    """
    markdown = render_comparison_markdown(report).encode("utf-8")
    directory = Path(out_dir)
    json_path = atomic_write_bytes(
        directory / COMPARISON_REPORT_FILENAME, dumps_pretty(report.to_json())
    )
    markdown_path = atomic_write_bytes(directory / COMPARISON_MARKDOWN_FILENAME, markdown)
    return ComparisonArtifacts(report=report, json_path=json_path, markdown_path=markdown_path)


def run_comparison(
    base_path: str | os.PathLike[str],
    adapter_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    **options: Unpack[_CompareOptions],
) -> ComparisonArtifacts:
    """Read two evaluation reports, gate, compare, and write the comparison files.

    Nothing is written unless both reports are valid and the gate passes.

    Args:
        base_path: The base arm's ``evaluation_report.json``.
        adapter_path: The adapter arm's ``evaluation_report.json``.
        out_dir: Directory for ``comparison_report.json`` and ``comparison_report.md``.
        **options: ``seed``, ``resamples``, ``confidence``, ``claims`` and
            ``registration``, exactly as :func:`compare_reports` takes them
            (and with its defaults, which are spelled only there).

    Raises:
        ComparisonRefusedError: The gate refused, or the claims preregistered
            another seed or resample count (exit 4).
        DataError: A report is unreadable or malformed (exit 2).
        InvariantViolationError: A report is inconsistent with its own rows (exit 5).
    """
    report = compare_reports(
        read_evaluation_report(base_path),
        read_evaluation_report(adapter_path),
        **options,
    )
    return write_comparison_report(out_dir, report)
