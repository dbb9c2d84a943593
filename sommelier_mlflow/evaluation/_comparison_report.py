"""The comparison report: a typed, immutable model with exactly one reader and one writer.

``comparison_report.json`` holds no per-example rows, so its reader cannot
recompute the deltas' intervals; what it can recompute, it does: every rate
from its counts, every delta and gap from the two values it separates, every
McNemar p-value from its discordant counts, the slice set from the identity.
A file that disagrees with itself was edited and is refused (exit 5); a
malformed one is a data error naming the field (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from sommelier_mlflow.data import (
    COMPARISON_REPORT_SCHEMA,
    OVERALL,
    Decoding,
    ModelIdentity,
    ModelKind,
)
from sommelier_mlflow.errors import SommelierError
from sommelier_mlflow.evaluation._checks import ReportChecker, ReportKeys, read_report_document
from sommelier_mlflow.evaluation._claims import (
    CLAIMS_SCHEMA,
    TIE_TOLERANCE,
    VERDICT_METHOD,
    Claim,
    RegistrationRecord,
    Verdict,
    parse_claim,
    verdict_from_counts,
)
from sommelier_mlflow.evaluation._report import AdapterIdentity
from sommelier_mlflow.evaluation._results import BootstrapSettings, PairCoverage
from sommelier_mlflow.evaluation._serialise import (
    bootstrap_provenance,
    clean_float,
    coverage_to_dict,
    intervals_to_dict,
    metrics_to_dict,
    settings_to_dict,
)
from sommelier_mlflow.evaluation._stats import (
    CLUSTER_TEST_METHOD,
    MCNEMAR_METHOD,
    McNemarResult,
    PairedBootstrapResult,
    mcnemar_exact,
    sign_flip_p_values,
)
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    FormatMismatch,
    MetricValue,
    find_scoring_mode,
    scoring_mode_names,
)

__all__ = [
    "ARM_KINDS",
    "MARGINAL_GAP_NOTE",
    "ComparisonIdentity",
    "RunSummary",
    "SliceComparison",
    "LanguageGap",
    "MarginalGap",
    "ComparisonReport",
    "read_comparison_report",
]

ARM_KINDS: Final[tuple[ModelKind, ...]] = ("base", "adapter")

MARGINAL_GAP_NOTE: Final = (
    "Descriptive only: target-language slice minus root-language slice over the complete "
    "slices, without an interval. The two slices can hold different examples (untranslated "
    "or unmatched rows), so this difference mixes the language effect with cohort "
    "differences; the matched-pair gaps are the primary estimate."
)


@dataclass(frozen=True, slots=True)
class ComparisonIdentity:
    """What both arms share (the gate proved it): the conditions of the comparison."""

    model_identity: ModelIdentity
    test_split_sha256: str
    parser_version: str
    decoding: Decoding
    metric_names: tuple[str, ...]
    languages: tuple[str, ...]
    prompt_set_sha256: Mapping[str, str]
    pair_set_sha256: Mapping[str, str]
    scoring: str = DEFAULT_MODE
    slice_by: tuple[str, ...] = ()
    field_slices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One compared arm: its kind, adapter, size and the digest of its report.

    ``format_hint`` and ``format_mismatch`` are the arm's own output-format
    diagnostics, and ``calls_in_reasoning`` its outputs whose only calls were
    written while reasoning, carried so the comparison's summary and Markdown
    say what each arm's summary said (each stored only when the arm's report
    had it, so existing comparison reports keep their bytes).
    """

    model_kind: ModelKind
    adapter: AdapterIdentity | None
    examples: int
    report_sha256: str
    format_hint: str | None = None
    format_mismatch: FormatMismatch | None = None
    calls_in_reasoning: int = 0


@dataclass(frozen=True, slots=True)
class SliceComparison:
    """Adapter minus base on one slice: both arms' metrics, the deltas and McNemar.

    Attributes:
        examples: The slice's size (the same rows in both arms).
        base: The base arm's metrics on the slice.
        adapter: The adapter arm's metrics on the slice.
        delta: Adapter minus base per metric, with its paired-bootstrap interval.
        mcnemar_metric: The 0/1 metric McNemar's test compares.
        mcnemar: The exact test on that metric's discordant examples.
    """

    examples: int
    base: Mapping[str, MetricValue]
    adapter: Mapping[str, MetricValue]
    delta: PairedBootstrapResult
    mcnemar_metric: str
    mcnemar: McNemarResult


@dataclass(frozen=True, slots=True)
class LanguageGap:
    """One arm's matched-pair language gap as a comparison carries it (pair count, no ids)."""

    root_language: str
    pairs: int
    coverage: PairCoverage
    pair_set_sha256: str
    root_metrics: Mapping[str, MetricValue]
    target_metrics: Mapping[str, MetricValue]
    bootstrap: PairedBootstrapResult


@dataclass(frozen=True, slots=True)
class MarginalGap:
    """Target slice minus root slice over the full slices (descriptive, no interval).

    ``target`` and ``root`` are each language's metrics over its whole slice,
    matched or not, which is why the difference carries no interval.
    """

    root_language: str
    target: Mapping[str, MetricValue]
    root: Mapping[str, MetricValue]

    def value(self, metric: str) -> float:
        """Target minus root value of one metric."""
        return clean_float(self.target[metric].value - self.root[metric].value)


@dataclass(frozen=True, eq=False)
class ComparisonReport:
    """A checked ``comparison_report.json``, read-only.

    Attributes:
        identity: The shared conditions of both arms.
        runs: ``base`` and ``adapter`` summaries.
        bootstrap: Settings of the delta intervals.
        slices: ``overall`` then each language, in that order.
        gaps: Matched-pair gaps per arm kind and target language (primary).
        marginal: Full-slice differences per arm kind and target language.
        source: Where it came from, for messages.
        claims: The verdict on preregistered claims, when the comparison
            was given a claims file (the JSON then has a ``claims`` section).
    """

    identity: ComparisonIdentity
    runs: Mapping[str, RunSummary]
    bootstrap: BootstrapSettings
    slices: Mapping[str, SliceComparison]
    gaps: Mapping[str, Mapping[str, LanguageGap]]
    marginal: Mapping[str, Mapping[str, MarginalGap]]
    source: str = "comparison report"
    claims: Verdict | None = None

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The compared metrics, in column order."""
        return self.identity.metric_names

    @property
    def mcnemar_metric(self) -> str:
        """The metric whose per-example outcome McNemar tested."""
        return self.slices[OVERALL].mcnemar_metric

    def not_meaningful(self, slice_name: str) -> dict[str, str]:
        """Per arm kind, why that arm's results on ``slice_name`` mean nothing (usually none).

        A slice the scoring mode says only no call passes (its
        ``no_call_slice``: BFCL's ``irrelevance`` categories) passes exactly
        the outputs read as no call; when an arm's output format found its
        call syntax in under a fifth of the outputs (its ``format_mismatch``),
        nearly everything reads as no call there, so the arm passes them
        without having judged anything.
        """
        mode = find_scoring_mode(self.identity.scoring)
        if mode is None or mode.no_call_slice is None or not mode.no_call_slice(slice_name):
            return {}
        return {
            kind: run.format_mismatch.not_meaningful
            for kind, run in self.runs.items()
            if run.format_mismatch is not None
        }

    def to_json(self) -> dict[str, Any]:
        """The ``comparison_report.json`` document (the writer's one layout)."""
        document = self._core_json()
        if self.claims is not None:
            document["claims"] = self.claims.to_dict()
        return document

    def _core_json(self) -> dict[str, Any]:
        """The document without claims and registration: the report's on-disk layout.

        One literal, field by field in file order, so the code reads as the file does.
        """
        identity = self.identity
        return {
            "schema_version": COMPARISON_REPORT_SCHEMA,
            "identity": {
                "model_identity": identity.model_identity.to_dict(),
                "test_split_sha256": identity.test_split_sha256,
                "parser_version": identity.parser_version,
                "decoding": identity.decoding.to_dict(),
                "metric_names": list(identity.metric_names),
                "slices": list(identity.languages),
                "prompt_set_sha256": dict(identity.prompt_set_sha256),
                "pair_set_sha256": dict(identity.pair_set_sha256),
                # Only when not the spec's defaults, so single-call reports keep their bytes.
                **({"scoring": identity.scoring} if identity.scoring != DEFAULT_MODE else {}),
                **(
                    {
                        "slice_by": list(identity.slice_by),
                        "field_slices": list(identity.field_slices),
                    }
                    if identity.slice_by
                    else {}
                ),
            },
            "runs": {
                kind: {
                    "model_kind": run.model_kind,
                    "adapter": run.adapter.to_dict() if run.adapter is not None else None,
                    "examples": run.examples,
                    "report_sha256": run.report_sha256,
                    **({"format_hint": run.format_hint} if run.format_hint is not None else {}),
                    **(
                        {"format_mismatch": run.format_mismatch.to_dict()}
                        if run.format_mismatch is not None
                        else {}
                    ),
                    **(
                        {"calls_in_reasoning": run.calls_in_reasoning}
                        if run.calls_in_reasoning
                        else {}
                    ),
                }
                for kind, run in self.runs.items()
            },
            "bootstrap": settings_to_dict(self.bootstrap),
            "slices": {
                name: {
                    "examples": entry.examples,
                    "base": metrics_to_dict(entry.base),
                    "adapter": metrics_to_dict(entry.adapter),
                    "delta": intervals_to_dict(entry.delta),
                    "bootstrap": bootstrap_provenance(entry.delta),
                    "mcnemar": {"metric": entry.mcnemar_metric, **entry.mcnemar.to_dict()},
                }
                for name, entry in self.slices.items()
            },
            "gaps": {
                kind: {
                    language: {
                        "root_language": gap.root_language,
                        "pairs": gap.pairs,
                        "coverage": coverage_to_dict(gap.coverage),
                        "pair_set_sha256": gap.pair_set_sha256,
                        "root_metrics": metrics_to_dict(gap.root_metrics),
                        "target_metrics": metrics_to_dict(gap.target_metrics),
                        "gaps": intervals_to_dict(gap.bootstrap),
                        "bootstrap": bootstrap_provenance(gap.bootstrap),
                    }
                    for language, gap in by_language.items()
                }
                for kind, by_language in self.gaps.items()
            },
            "marginal_full_slices": {
                "note": MARGINAL_GAP_NOTE,
                **{
                    kind: {
                        language: {
                            "root_language": gap.root_language,
                            "metrics": {
                                name: {
                                    "value": gap.value(name),
                                    "target": gap.target[name].to_dict(),
                                    "root": gap.root[name].to_dict(),
                                }
                                for name in self.metric_names
                            },
                        }
                        for language, gap in by_language.items()
                    }
                    for kind, by_language in self.marginal.items()
                },
            },
        }

    @classmethod
    def from_json(cls, document: object, *, source: str = "comparison report") -> ComparisonReport:
        """The one reader: check a decoded comparison report and build the typed report.

        Raises:
            DataError: Wrong or missing ``schema_version``, missing, unknown or
                mistyped fields (exit 2).
            InvariantViolationError: Values that disagree with the counts or
                values they are derived from (exit 5).
        """
        return _Reader(source).report(document)


def read_comparison_report(path: str | os.PathLike[str]) -> ComparisonReport:
    """Read a ``comparison_report.json`` file and recheck what its counts imply.

    The file holds no per-example rows, so rates, deltas, gaps and McNemar
    p-values are recomputed from its counts, but intervals are taken as stored.

    Raises:
        DataError: The file is unreadable, not strict JSON, or malformed (exit 2).
        InvariantViolationError: The file disagrees with itself (exit 5).
    """
    source, data = read_report_document(path, "comparison report")
    return ComparisonReport.from_json(data, source=source)


_TOP: Final = frozenset(
    {"schema_version", "identity", "runs", "bootstrap", "slices", "gaps", "marginal_full_slices"}
)
_IDENTITY: Final = frozenset(
    {
        "model_identity",
        "test_split_sha256",
        "parser_version",
        "decoding",
        "metric_names",
        "slices",
        "prompt_set_sha256",
        "pair_set_sha256",
    }
)
_RUN: Final = frozenset({"model_kind", "adapter", "examples", "report_sha256"})
_RUN_OPTIONAL: Final = frozenset({"format_hint", "format_mismatch", "calls_in_reasoning"})
_SLICE: Final = frozenset({"examples", "base", "adapter", "delta", "bootstrap", "mcnemar"})
_MCNEMAR: Final = frozenset({"metric", "method", "n", "b", "c", "p_value"})
_CLUSTER_TEST: Final = frozenset({"clusters", "differences"})
_CLAIMS: Final = frozenset(
    {
        "schema_version",
        "sha256",
        "alpha",
        "method",
        "tie_tolerance",
        "verdict",
        "claims",
        "registration",
    }
)
_CLAIM_FIELDS: Final = ("id", "slice", "metric", "kind", "margin")
_CLAIM_ROW: Final = frozenset(
    {
        *_CLAIM_FIELDS,
        "threshold",
        "estimate",
        "lower",
        "upper",
        "confidence",
        "resamples",
        "draws_at_or_below",
        "p_value",
        "adjusted_p_value",
        "decision",
    }
)
_REGISTRATION: Final = frozenset(
    {
        "checked",
        "registered",
        "run_id",
        "registered_at_ms",
        "arm_run_ids",
        "arms_started_at_ms",
        "registered_before_arms",
    }
)


class _Reader:
    """Builds a :class:`ComparisonReport`, checking each field on the way."""

    def __init__(self, source: str) -> None:
        self.check = ReportChecker(source, "compare")
        self.source = source

    def report(self, document: object) -> ComparisonReport:
        check = self.check
        top = check.mapping(document, "report")
        if top.get("schema_version") != COMPARISON_REPORT_SCHEMA:
            check.fail(
                "schema_version",
                f"is {top.get('schema_version')!r}; this version reads "
                f"{COMPARISON_REPORT_SCHEMA!r}",
            )
        check.mapping(top, "report", _TOP | {"claims"} if "claims" in top else _TOP)
        identity = self.identity(top["identity"])
        names = identity.metric_names
        bootstrap = self.check.settings(top["bootstrap"])
        runs_entry = check.mapping(top["runs"], "runs", frozenset(ARM_KINDS))
        runs: dict[str, RunSummary] = {kind: self.run(kind, runs_entry[kind]) for kind in ARM_KINDS}
        order = (OVERALL, *identity.languages, *identity.field_slices)
        slices_entry = check.mapping(top["slices"], "slices", frozenset(order))
        slices = {name: self.slice(name, slices_entry[name], names) for name in order}
        for name, entry in slices.items():
            if entry.delta.resamples != bootstrap.resamples:
                check.broken(f"slices.{name}.bootstrap.resamples", "differs from the report's")
        gaps_entry = check.mapping(top["gaps"], "gaps", frozenset(ARM_KINDS))
        gaps: dict[str, Mapping[str, LanguageGap]] = {
            kind: MappingProxyType(
                {
                    language: self.gap(f"gaps.{kind}.{language}", raw, names)
                    for language, raw in check.mapping(gaps_entry[kind], f"gaps.{kind}").items()
                }
            )
            for kind in ARM_KINDS
        }
        for kind, by_language in gaps.items():
            if set(by_language) != set(identity.pair_set_sha256):
                check.broken(f"gaps.{kind}", "does not cover exactly the paired languages")
            for language, gap in by_language.items():
                if gap.pair_set_sha256 != identity.pair_set_sha256[language]:
                    check.broken(f"gaps.{kind}.{language}.pair_set_sha256", "differs")
        marginal_entry = check.mapping(
            top["marginal_full_slices"], "marginal_full_slices", frozenset({"note", *ARM_KINDS})
        )
        if marginal_entry["note"] != MARGINAL_GAP_NOTE:
            check.fail("marginal_full_slices.note", "is not this version's note")
        marginal: dict[str, Mapping[str, MarginalGap]] = {
            kind: MappingProxyType(
                {
                    language: self.marginal(f"marginal_full_slices.{kind}.{language}", raw, names)
                    for language, raw in check.mapping(
                        marginal_entry[kind], f"marginal_full_slices.{kind}"
                    ).items()
                }
            )
            for kind in ARM_KINDS
        }
        return ComparisonReport(
            identity=identity,
            runs=MappingProxyType(runs),
            bootstrap=bootstrap,
            slices=MappingProxyType(slices),
            gaps=MappingProxyType(gaps),
            marginal=MappingProxyType(marginal),
            source=self.source,
            claims=self.claims(top["claims"], slices) if "claims" in top else None,
        )

    def claims(self, value: object, slices: Mapping[str, SliceComparison]) -> Verdict:
        """Read the verdict and recompute every p-value and decision from its counts."""
        check = self.check
        entry = check.mapping(value, "claims", _CLAIMS)
        if entry["schema_version"] != CLAIMS_SCHEMA:
            check.fail("claims.schema_version", f"is not {CLAIMS_SCHEMA!r}")
        if entry["method"] != VERDICT_METHOD or entry["tie_tolerance"] != TIE_TOLERANCE:
            check.fail("claims.method", f"is not {VERDICT_METHOD!r} with this version's ties")
        alpha = check.number(entry["alpha"], "claims.alpha")
        if not 0 < alpha < 1:
            check.fail("claims.alpha", f"must lie strictly between 0 and 1, got {alpha!r}")
        rows = check.array(entry["claims"], "claims.claims")
        if not rows:
            check.fail("claims.claims", "is empty")
        claims: list[Claim] = []
        counts: list[int] = []
        for index, raw in enumerate(rows):
            where = f"claims.claims.{index}"
            row = check.mapping(raw, where, _CLAIM_ROW)
            try:
                claim = parse_claim(index, {key: row[key] for key in _CLAIM_FIELDS}, self.source)
            except SommelierError as exc:
                check.fail(where, str(exc))
            if claim.slice not in slices or claim.metric not in self.metric_names(slices):
                check.broken(where, f"names no compared slice/metric {claim.slice}/{claim.metric}")
            count = check.count(row["draws_at_or_below"], f"{where}.draws_at_or_below")
            if count > slices[claim.slice].delta.resamples:
                check.broken(f"{where}.draws_at_or_below", "exceeds the resamples")
            claims.append(claim)
            counts.append(count)
        if len({claim.id for claim in claims}) != len(claims):
            check.fail("claims.claims", "repeats a claim id")
        verdict = verdict_from_counts(
            claims,
            counts,
            [slices[claim.slice].delta for claim in claims],
            alpha=alpha,
            claims_sha256=check.text(entry["sha256"], "claims.sha256"),
            registration=self.registration(entry["registration"]),
        )
        # The writer's layout of the recomputed verdict must be what the file says.
        document = verdict.to_dict()
        for index, row in enumerate(rows):
            for key, expected in document["claims"][index].items():
                if row[key] != expected:
                    check.broken(f"claims.claims.{index}.{key}", "disagrees with the counts")
        if entry["verdict"] != document["verdict"]:
            check.broken("claims.verdict", "disagrees with the decisions")
        return verdict

    @staticmethod
    def metric_names(slices: Mapping[str, SliceComparison]) -> tuple[str, ...]:
        return slices[OVERALL].delta.metric_names

    def registration(self, value: object) -> RegistrationRecord:
        check = self.check
        entry = check.mapping(value, "claims.registration")
        if entry == {"checked": False}:
            return RegistrationRecord()
        entry = check.mapping(value, "claims.registration", _REGISTRATION)
        record = RegistrationRecord(
            checked=True,
            registered=entry["registered"],
            run_id=entry["run_id"],
            registered_at_ms=entry["registered_at_ms"],
            arm_run_ids=tuple(
                check.text(run, "claims.registration.arm_run_ids")
                for run in check.array(entry["arm_run_ids"], "claims.registration.arm_run_ids")
            ),
            arms_started_at_ms=entry["arms_started_at_ms"],
            registered_before_arms=entry["registered_before_arms"],
        )
        if entry["checked"] is not True or record.to_dict() != entry:
            check.fail("claims.registration", f"is not a registration record: {entry!r}")
        return record

    def identity(self, value: object) -> ComparisonIdentity:
        check = self.check
        raw = check.mapping(value, "identity")
        optional = {"scoring"} & set(raw)
        if "slice_by" in raw or "field_slices" in raw:
            optional |= {"slice_by", "field_slices"}
        entry = check.mapping(raw, "identity", _IDENTITY | optional)
        scoring = entry.get("scoring", DEFAULT_MODE)
        if "scoring" in entry and (scoring == DEFAULT_MODE or scoring not in scoring_mode_names()):
            check.fail("identity.scoring", f"is not a registered non-default mode: {scoring!r}")
        slice_by = tuple(
            check.text(name, "identity.slice_by")
            for name in check.array(entry.get("slice_by", []), "identity.slice_by")
        )
        field_slices = tuple(
            check.text(name, "identity.field_slices")
            for name in check.array(entry.get("field_slices", []), "identity.field_slices")
        )
        if "slice_by" in entry and not slice_by:
            check.fail("identity.slice_by", "is empty; leave it out when only language is sliced")
        model_identity = check.model_identity(entry["model_identity"], "identity.model_identity")
        decoding = check.decoding(entry["decoding"], "identity.decoding")
        names = tuple(
            check.text(name, "identity.metric_names")
            for name in check.array(entry["metric_names"], "identity.metric_names")
        )
        if not names or len(set(names)) != len(names):
            check.fail("identity.metric_names", f"must be unique names, got {list(names)}")
        languages = tuple(
            check.language(language, "identity.slices")
            for language in check.array(entry["slices"], "identity.slices")
        )
        if list(languages) != sorted(set(languages)):
            check.fail("identity.slices", "must be sorted and unique")
        prompt_sets = check.mapping(entry["prompt_set_sha256"], "identity.prompt_set_sha256")
        if set(prompt_sets) != set(languages):
            check.broken("identity.prompt_set_sha256", "does not name exactly the slices")
        pair_sets = check.mapping(entry["pair_set_sha256"], "identity.pair_set_sha256")
        if not set(pair_sets) <= set(languages):
            check.broken("identity.pair_set_sha256", "names a language that is not a slice")
        return ComparisonIdentity(
            model_identity=model_identity,
            test_split_sha256=check.text(entry["test_split_sha256"], "identity.test_split_sha256"),
            parser_version=check.text(entry["parser_version"], "identity.parser_version"),
            decoding=decoding,
            metric_names=names,
            languages=languages,
            prompt_set_sha256=MappingProxyType(
                {
                    language: check.text(digest, f"identity.prompt_set_sha256.{language}")
                    for language, digest in prompt_sets.items()
                }
            ),
            pair_set_sha256=MappingProxyType(
                {
                    language: check.text(digest, f"identity.pair_set_sha256.{language}")
                    for language, digest in pair_sets.items()
                }
            ),
            scoring=scoring,
            slice_by=slice_by,
            field_slices=field_slices,
        )

    def run(self, kind: str, value: object) -> RunSummary:
        check = self.check
        where = f"runs.{kind}"
        given = check.mapping(value, where)
        entry = check.mapping(given, where, _RUN | (_RUN_OPTIONAL & set(given)))
        model_kind = check.model_kind(entry["model_kind"], f"{where}.model_kind")
        if model_kind != kind:
            check.broken(f"{where}.model_kind", f"is {model_kind!r}")
        adapter = None
        if entry["adapter"] is not None:
            raw = check.mapping(entry["adapter"], f"{where}.adapter", ReportKeys.ADAPTER)
            adapter = AdapterIdentity(
                check.text(raw["source"], f"{where}.adapter.source"),
                check.text(raw["sha256"], f"{where}.adapter.sha256"),
            )
        if (adapter is None) != (kind == "base"):
            check.broken(f"{where}.adapter", "the base arm has no adapter, the adapter arm one")
        examples = check.count(entry["examples"], f"{where}.examples")
        hint = entry.get("format_hint")
        mismatch = entry.get("format_mismatch")
        in_reasoning = 0
        if "calls_in_reasoning" in entry:
            in_reasoning = check.count(entry["calls_in_reasoning"], f"{where}.calls_in_reasoning")
            if not 0 < in_reasoning <= examples:
                check.broken(
                    f"{where}.calls_in_reasoning",
                    f"is {in_reasoning} of {examples} outputs (it counts some of them, "
                    "and is left out when none)",
                )
        return RunSummary(
            model_kind=model_kind,
            adapter=adapter,
            examples=examples,
            report_sha256=check.text(entry["report_sha256"], f"{where}.report_sha256"),
            format_hint=None if hint is None else check.text(hint, f"{where}.format_hint"),
            format_mismatch=(
                None
                if mismatch is None
                else check.format_mismatch(mismatch, f"{where}.format_mismatch", examples)
            ),
            calls_in_reasoning=in_reasoning,
        )

    def slice(self, name: str, value: object, names: Sequence[str]) -> SliceComparison:
        check = self.check
        where = f"slices.{name}"
        entry = check.mapping(value, where, _SLICE)
        examples = check.count(entry["examples"], f"{where}.examples")
        base, adapter, delta = check.paired_sides(
            entry, where, names, examples, ("base", "adapter", "delta", "adapter minus base")
        )
        given = check.mapping(entry["mcnemar"], f"{where}.mcnemar")
        clustered = given.get("method") == CLUSTER_TEST_METHOD
        mcnemar = check.mapping(
            given, f"{where}.mcnemar", _MCNEMAR | _CLUSTER_TEST if clustered else _MCNEMAR
        )
        metric = check.text(mcnemar["metric"], f"{where}.mcnemar.metric")
        if metric not in names:
            check.fail(f"{where}.mcnemar.metric", f"{metric!r} is not a compared metric")
        b = check.count(mcnemar["b"], f"{where}.mcnemar.b")
        c = check.count(mcnemar["c"], f"{where}.mcnemar.c")
        if not clustered and mcnemar["method"] != MCNEMAR_METHOD:
            check.fail(
                f"{where}.mcnemar.method", f"is not {MCNEMAR_METHOD!r} or {CLUSTER_TEST_METHOD!r}"
            )
        if mcnemar["n"] != examples or b + c > examples:
            check.broken(f"{where}.mcnemar", "counts disagree with the slice size")
        if clustered:
            result = self._cluster_test(f"{where}.mcnemar", mcnemar, b, c, examples, delta)
        else:
            result = McNemarResult(b=b, c=c, n=examples, p_value=mcnemar_exact(b, c))
        if mcnemar["p_value"] != result.p_value:
            check.broken(f"{where}.mcnemar.p_value", "is not the test's p-value of its counts")
        return SliceComparison(
            examples=examples,
            base=MappingProxyType(base),
            adapter=MappingProxyType(adapter),
            delta=delta,
            mcnemar_metric=metric,
            mcnemar=result,
        )

    def _cluster_test(
        self,
        where: str,
        entry: Mapping[str, Any],
        b: int,
        c: int,
        examples: int,
        delta: PairedBootstrapResult,
    ) -> McNemarResult:
        """Read a cluster-level test and recompute its p-value from its differences."""
        check = self.check
        clusters = check.count(entry["clusters"], f"{where}.clusters")
        if clusters != delta.clusters:
            check.broken(f"{where}.clusters", "is not the number of conversations resampled")
        table: list[tuple[int, int]] = []
        for index, item in enumerate(check.array(entry["differences"], f"{where}.differences")):
            at = f"{where}.differences[{index}]"
            pair = check.array(item, at)
            if len(pair) != 2 or type(pair[0]) is not int or pair[0] == 0:
                check.fail(at, "must be [non-zero difference, conversations]")
            if table and pair[0] <= table[-1][0]:
                check.fail(at, "differences must be sorted without repeats")
            table.append((pair[0], check.count(pair[1], at)))
        if sum(count for _, count in table) > clusters:
            check.broken(f"{where}.differences", "count more conversations than were compared")
        if sum(d * count for d, count in table) != c - b:
            check.broken(f"{where}.differences", "do not add up to c - b")
        return McNemarResult(
            b=b,
            c=c,
            n=examples,
            p_value=sign_flip_p_values(table)[0],
            method=CLUSTER_TEST_METHOD,
            clusters=clusters,
            differences=tuple(table),
        )

    def gap(self, where: str, value: object, names: Sequence[str]) -> LanguageGap:
        check = self.check
        entry = check.mapping(value, where, ReportKeys.GAP)
        pairs = check.count(entry["pairs"], f"{where}.pairs")
        stored = check.mapping(entry["coverage"], f"{where}.coverage", ReportKeys.COVERAGE)
        coverage = PairCoverage(
            target_rows=check.count(stored["target_rows"], f"{where}.coverage.target_rows"),
            paired_targets=check.count(
                stored["paired_targets"], f"{where}.coverage.paired_targets"
            ),
            root_rows=check.count(stored["root_rows"], f"{where}.coverage.root_rows"),
            paired_roots=check.count(stored["paired_roots"], f"{where}.coverage.paired_roots"),
            unmatched_targets=check.count(
                stored["unmatched_targets"], f"{where}.coverage.unmatched_targets"
            ),
        )
        if coverage.paired_targets != pairs or not coverage.target_rows or not coverage.root_rows:
            check.broken(f"{where}.coverage", "counts disagree with the pairs")
        if coverage_to_dict(coverage) != stored:
            check.broken(f"{where}.coverage", "rates disagree with the counts")
        root, target, bootstrap = check.paired_sides(
            entry, where, names, pairs, ReportKeys.GAP_SIDES
        )
        return LanguageGap(
            root_language=check.language(entry["root_language"], f"{where}.root_language"),
            pairs=pairs,
            coverage=coverage,
            pair_set_sha256=check.text(entry["pair_set_sha256"], f"{where}.pair_set_sha256"),
            root_metrics=MappingProxyType(root),
            target_metrics=MappingProxyType(target),
            bootstrap=bootstrap,
        )

    def marginal(self, where: str, value: object, names: Sequence[str]) -> MarginalGap:
        check = self.check
        entry = check.mapping(value, where, frozenset({"root_language", "metrics"}))
        metrics = check.mapping(entry["metrics"], f"{where}.metrics", frozenset(names))
        target: dict[str, MetricValue] = {}
        root: dict[str, MetricValue] = {}
        for name in names:
            at = f"{where}.metrics.{name}"
            item = check.mapping(metrics[name], at, frozenset({"value", "target", "root"}))
            target[name] = check.metrics({name: item["target"]}, f"{at}.target", [name])[name]
            root[name] = check.metrics({name: item["root"]}, f"{at}.root", [name])[name]
            if item["value"] != clean_float(target[name].value - root[name].value):
                check.broken(f"{at}.value", "is not target minus root")
        return MarginalGap(
            root_language=check.language(entry["root_language"], f"{where}.root_language"),
            target=MappingProxyType(target),
            root=MappingProxyType(root),
        )
