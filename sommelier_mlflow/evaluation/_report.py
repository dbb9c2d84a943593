"""The evaluation report: a typed, immutable model with exactly one reader and one writer.

A comparison is computed from two report files alone, possibly downloaded
from two MLflow runs months apart, so the reader (:meth:`EvaluationReport.from_json`)
trusts nothing: the schema version and every field are checked (unknown or
missing ones are refused), and every aggregate is recomputed from the
per-example components stored in the same file. A report whose metrics,
prompt-set digests or pair-set digests disagree with its own rows was edited
or corrupted and is refused as an invariant violation; a malformed one is a
data error naming the field.

The writer (:meth:`EvaluationReport.to_json` and :func:`write_evaluation_report`)
is the only place that knows the JSON layout; everything else reads the typed
object. Reading a file and writing it again gives the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, cast

import numpy as np
from numpy.typing import NDArray

from sommelier_mlflow._json import (
    atomic_write_json,
    canonical_json,
    sha256_text,
)
from sommelier_mlflow.data import (
    DEFAULT_PROMPT_FORMAT,
    EVALUATION_REPORT_SCHEMA,
    DatasetRef,
    Decoding,
    ModelIdentity,
    ModelKind,
    check_slice_fields,
    read_template_date,
    slice_name,
)
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.evaluation._checks import ReportChecker, ReportKeys, read_report_document
from sommelier_mlflow.evaluation._digests import pair_set_digest
from sommelier_mlflow.evaluation._results import (
    BootstrapSettings,
    PairedSlice,
    ScoredRun,
    SliceResult,
    cluster_labels,
    metrics_from_components,
)
from sommelier_mlflow.evaluation._serialise import (
    metrics_to_dict,
    paired_to_dict,
    read_gap,
    settings_to_dict,
)
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    PARSE_STATUSES,
    FormatMismatch,
    MetricValue,
    ParseStatus,
    scoring_mode_names,
    syntax_found,
)

__all__ = [
    "EVALUATION_REPORT_FILENAME",
    "AdapterIdentity",
    "SkippedOverlong",
    "ArmIdentity",
    "EvaluationReport",
    "validate_evaluation_report",
    "read_evaluation_report",
    "write_evaluation_report",
]

EVALUATION_REPORT_FILENAME: Final = "evaluation_report.json"

_TOP_KEYS: Final = ReportKeys.SCORED | {"identity", "per_example"}
_IDENTITY_KEYS: Final = frozenset(
    {
        "model_kind",
        "model_identity",
        "adapter",
        "parser_version",
        "decoding",
        "test_split_sha256",
        "prompt_set_sha256",
    }
)
# Written only when not the spec's defaults (``single`` scoring, language slices only),
# so reports from before scoring modes and slice fields read and rewrite unchanged.
_OPTIONAL_IDENTITY_KEYS: Final = frozenset(
    {
        "scoring",
        "slice_by",
        "prompt_format",
        "dataset",
        "chat_template_kwargs",
        "template_date",
        "sample",
        "skip_overlong",
    }
)
_SAMPLE_KEYS: Final = frozenset({"rule", "seed", "max_examples", "strata", "roots"})
_SKIP_KEYS: Final = frozenset({"context_length", "example_ids"})
_DATASET_KEYS: Final = frozenset({"name", "id", "digest"})
_SLICE_KEYS: Final = frozenset({"examples", "metrics", "prompt_set_sha256"})
_ROW_KEYS: Final = frozenset(
    {"example_id", "language", "prompt_sha256", "parse_status", "numerators", "denominators"}
)


# --- the model ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdapterIdentity:
    """Where an adapter came from and a digest of its files."""

    source: str
    sha256: str

    def to_dict(self) -> dict[str, str]:
        """``{"source", "sha256"}`` as reports store it."""
        return {"source": self.source, "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class SkippedOverlong:
    """What ``--skip-overlong`` left out: prompts that did not fit the model's context.

    Recorded whenever the run was allowed to skip (even when nothing was too
    long), so the gate can refuse to compare an arm that skipped with one
    that could not have.

    Attributes:
        context_length: The backend's context in tokens, ``None`` when it did not say.
        example_ids: The skipped examples, in split order.
    """

    context_length: int | None
    example_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"context_length", "example_ids"}`` as reports store it."""
        return {"context_length": self.context_length, "example_ids": list(self.example_ids)}


@dataclass(frozen=True, slots=True)
class ArmIdentity:
    """What produced an arm's generations; the comparison gate compares these fields.

    Attributes:
        model_kind: ``"base"`` or ``"adapter"``.
        model_identity: Base model and tokenizer ids and revisions.
        adapter: The adapter of an adapter arm, ``None`` for the base arm.
        parser_version: The parser every completion was parsed with.
        decoding: The run's single decoding configuration.
        test_split_sha256: Digest of the test-split file.
        scoring: The scoring mode (``single`` unless the report says otherwise).
        slice_by: Slice fields beyond language (the slice definition).
        prompt_format: The prompt format of every prompt (``sommelier`` unless
            the report says otherwise).
        dataset: The MLflow evaluation dataset the split was read from
            (``--test-split mlflow-dataset:NAME``); ``None`` for a split file.
        chat_template_kwargs: The extra template variables every prompt was
            rendered with (``--chat-template-kwargs``; written only when set).
        template_date: The day the template's clock said while every prompt
            was rendered (``--template-date``; written only when set).
        sample: How ``max_examples`` drew the evaluated rows (``rule``,
            ``seed``, ``max_examples``, ``strata``, ``roots``; see
            :func:`~sommelier_mlflow.data.sample_examples`); ``None`` when every
            row of the split was evaluated.
        skip_overlong: The prompts ``--skip-overlong`` left out; ``None`` when
            the run did not allow skipping.
    """

    model_kind: ModelKind
    model_identity: ModelIdentity
    adapter: AdapterIdentity | None
    parser_version: str
    decoding: Decoding
    test_split_sha256: str
    scoring: str = DEFAULT_MODE
    slice_by: tuple[str, ...] = ()
    prompt_format: str = DEFAULT_PROMPT_FORMAT
    dataset: DatasetRef | None = None
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    template_date: str | None = None
    sample: Mapping[str, Any] | None = None
    skip_overlong: SkippedOverlong | None = None


def _frozen(array: NDArray[np.int64]) -> NDArray[np.int64]:
    view = array.view()
    view.setflags(write=False)
    return view


@dataclass(frozen=True, eq=False)
class EvaluationReport:
    """One arm's checked evaluation report (``evaluation_report.json``), read-only.

    Attributes:
        identity: What produced the generations.
        metric_names: The scored metrics, in column order.
        metrics: Overall metrics.
        slices: Per-language metrics and prompt-set digests.
        paired_slices: Matched-pair gaps per target language.
        bootstrap: Settings of the language-gap intervals.
        example_ids: Example ids in row order (sorted).
        languages: Each row's language.
        prompt_sha256s: Each row's prompt digest.
        parse_statuses: Each row's parse status.
        numerators: Read-only ``(n, m)`` int64 components.
        denominators: Same shape.
        source: Where the report came from (a path or a label), for messages.
        slice_values: Each row's ``(field, value)`` pairs of the declared slice
            fields (empty tuples when only language is sliced).
        field_slices: Metrics and prompt-set digest per field slice ``F:V``.
        document_sha256: Digest of the document it was read from, if read.
        format_hint: The wrong-output-format hint of the run
            (``"318 of 357 outputs decode as hermes; did you mean ..."``), if
            scoring raised one. A diagnostic: written only when set, so
            reports without one keep their bytes; no score depends on it.
        format_mismatch: The counts behind the plain warning that the output
            format found its call syntax in under a fifth of the outputs while
            another format reads calls in more of them (written only when
            set; the reader recounts ``syntax_found`` from the rows' statuses).
        calls_in_reasoning: Outputs that made no call in their answer but wrote
            the format's call syntax while reasoning (written only when some
            did; the reader refuses more than the rows scored ``no_json``).
        conversation_ids: Each row's conversation (``None`` for a row that is
            not a turn of one); empty when no row is, so single-turn reports
            keep their bytes. Intervals and tests resample conversations.
    """

    identity: ArmIdentity
    metric_names: tuple[str, ...]
    metrics: Mapping[str, MetricValue]
    slices: Mapping[str, SliceResult]
    paired_slices: Mapping[str, PairedSlice]
    bootstrap: BootstrapSettings
    example_ids: tuple[str, ...]
    languages: tuple[str, ...]
    prompt_sha256s: tuple[str, ...]
    parse_statuses: tuple[ParseStatus, ...]
    numerators: NDArray[np.int64]
    denominators: NDArray[np.int64]
    source: str = "evaluation report"
    document_sha256: str | None = field(default=None, repr=False)
    slice_values: tuple[tuple[tuple[str, str], ...], ...] = ()
    field_slices: Mapping[str, SliceResult] = field(default_factory=lambda: MappingProxyType({}))
    format_hint: str | None = None
    format_mismatch: FormatMismatch | None = None
    calls_in_reasoning: int = 0
    conversation_ids: tuple[str | None, ...] = ()

    @cached_property
    def clusters(self) -> list[str] | None:
        """Each row's resampling unit (its conversation), ``None`` without conversations."""
        if not self.conversation_ids:
            return None
        return cluster_labels(self.conversation_ids, self.example_ids)

    @cached_property
    def field_slice_rows(self) -> dict[str, NDArray[np.intp]]:
        """Row indices of each field slice, in :attr:`field_slices` order."""
        members: dict[str, list[int]] = {name: [] for name in self.field_slices}
        for row, values in enumerate(self.slice_values):
            for name, value in values:
                members[slice_name(name, value)].append(row)
        return {name: np.array(rows, dtype=np.intp) for name, rows in members.items()}

    @property
    def examples(self) -> int:
        """Number of evaluated examples."""
        return len(self.example_ids)

    @property
    def prompt_set_sha256(self) -> dict[str, str]:
        """Prompt-set digest per language slice."""
        return {language: entry.prompt_set_sha256 or "" for language, entry in self.slices.items()}

    @cached_property
    def sha256(self) -> str:
        """Digest of the report's canonical JSON: names this exact report in a comparison.

        A report read from a file is named by the document the file held (the
        reader recorded its digest); a report built from a run, by what the
        writer will write.
        """
        if self.document_sha256 is not None:
            return self.document_sha256
        return sha256_text(canonical_json(self.to_json()))

    @classmethod
    def from_run(cls, run: ScoredRun, *, source: str = "evaluation report") -> EvaluationReport:
        """The report of a run scored by this package (built, not re-checked)."""
        examples = run.examples
        prompts = tuple(example.prompt_sha256 or "" for example in examples)
        return cls(
            identity=ArmIdentity(
                model_kind=run.model_kind,
                model_identity=run.model_identity,
                adapter=(
                    AdapterIdentity(run.adapter["source"], run.adapter["sha256"])
                    if run.adapter is not None
                    else None
                ),
                parser_version=run.parser_version,
                decoding=run.decoding,
                test_split_sha256=run.test_split_sha256,
                scoring=run.scored.scoring,
                slice_by=run.scored.slice_by,
                prompt_format=run.prompt_format,
                dataset=run.dataset,
                chat_template_kwargs=dict(run.chat_template_kwargs),
                template_date=run.template_date,
            ),
            metric_names=run.metric_names,
            bootstrap=run.bootstrap,
            example_ids=tuple(example.example_id for example in examples),
            languages=tuple(example.language for example in examples),
            prompt_sha256s=prompts,
            parse_statuses=tuple(example.parse_status for example in examples),
            numerators=_frozen(run.numerators),
            denominators=_frozen(run.denominators),
            metrics=MappingProxyType(dict(run.metrics)),
            slices=MappingProxyType(dict(run.slices)),
            paired_slices=MappingProxyType(dict(run.paired_slices)),
            source=source,
            slice_values=(
                tuple(example.slice_values for example in examples) if run.scored.slice_by else ()
            ),
            field_slices=MappingProxyType(dict(run.scored.field_slices)),
            format_hint=(
                run.scored.format_hint.message if run.scored.format_hint is not None else None
            ),
            format_mismatch=run.scored.format_mismatch,
            calls_in_reasoning=run.scored.calls_in_reasoning,
            conversation_ids=(
                tuple(example.conversation_id for example in examples)
                if run.scored.clusters is not None
                else ()
            ),
        )

    def to_json(self) -> dict[str, Any]:
        """The ``evaluation_report.json`` document (the writer's one layout).

        The per-example components are included (``per_example``) so a
        comparison can be computed from two report files alone.
        """
        identity = self.identity
        numerators = self.numerators.tolist()
        denominators = self.denominators.tolist()
        return {
            "schema_version": EVALUATION_REPORT_SCHEMA,
            "identity": {
                "model_kind": identity.model_kind,
                "model_identity": identity.model_identity.to_dict(),
                "adapter": identity.adapter.to_dict() if identity.adapter is not None else None,
                "parser_version": identity.parser_version,
                "decoding": identity.decoding.to_dict(),
                "test_split_sha256": identity.test_split_sha256,
                "prompt_set_sha256": self.prompt_set_sha256,
                **self._scoring_identity(),
            },
            "metric_names": list(self.metric_names),
            "examples": self.examples,
            "metrics": metrics_to_dict(self.metrics),
            "slices": {
                language: {
                    "examples": entry.examples,
                    "metrics": metrics_to_dict(entry.metrics),
                    "prompt_set_sha256": entry.prompt_set_sha256,
                }
                for language, entry in self.slices.items()
            },
            "paired_slices": {
                language: paired_to_dict(paired) for language, paired in self.paired_slices.items()
            },
            **self._field_slices_json(),
            "bootstrap": settings_to_dict(self.bootstrap),
            "per_example": [
                {
                    "example_id": self.example_ids[row],
                    "language": self.languages[row],
                    "prompt_sha256": self.prompt_sha256s[row],
                    "parse_status": self.parse_statuses[row],
                    "numerators": numerators[row],
                    "denominators": denominators[row],
                    **self._row_slice_values(row),
                    **self._row_conversation(row),
                }
                for row in range(self.examples)
            ],
            **({"format_hint": self.format_hint} if self.format_hint is not None else {}),
            **(
                {"format_mismatch": self.format_mismatch.to_dict()}
                if self.format_mismatch is not None
                else {}
            ),
            **({"calls_in_reasoning": self.calls_in_reasoning} if self.calls_in_reasoning else {}),
        }

    # The three parts below are written only when scoring is not ``single`` or
    # slices beyond language were declared, so a single-call report keeps the
    # exact bytes it had before scoring modes existed.

    def _scoring_identity(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.identity.scoring != DEFAULT_MODE:
            extra["scoring"] = self.identity.scoring
        if self.identity.slice_by:
            extra["slice_by"] = list(self.identity.slice_by)
        if self.identity.prompt_format != DEFAULT_PROMPT_FORMAT:
            extra["prompt_format"] = self.identity.prompt_format
        if self.identity.dataset is not None:
            extra["dataset"] = self.identity.dataset.to_dict()
        if self.identity.chat_template_kwargs:
            extra["chat_template_kwargs"] = dict(self.identity.chat_template_kwargs)
        if self.identity.template_date is not None:
            extra["template_date"] = self.identity.template_date
        if self.identity.sample is not None:
            extra["sample"] = dict(self.identity.sample)
        if self.identity.skip_overlong is not None:
            extra["skip_overlong"] = self.identity.skip_overlong.to_dict()
        return extra

    def _field_slices_json(self) -> dict[str, Any]:
        if not self.identity.slice_by:
            return {}
        return {
            "field_slices": {
                name: {
                    "examples": entry.examples,
                    "metrics": metrics_to_dict(entry.metrics),
                    "prompt_set_sha256": entry.prompt_set_sha256,
                }
                for name, entry in self.field_slices.items()
            }
        }

    def _row_conversation(self, row: int) -> dict[str, Any]:
        if not self.conversation_ids or self.conversation_ids[row] is None:
            return {}
        return {"conversation_id": self.conversation_ids[row]}

    def _row_slice_values(self, row: int) -> dict[str, Any]:
        if not self.identity.slice_by:
            return {}
        return {"slice_values": dict(self.slice_values[row])}

    @classmethod
    def from_json(cls, document: object, *, source: str = "evaluation report") -> EvaluationReport:
        """The one reader: check a decoded report completely and build the typed report.

        Args:
            document: The decoded JSON document.
            source: A path or label used in error messages.

        Raises:
            DataError: Wrong or missing ``schema_version``, missing, unknown or
                mistyped fields (exit 2).
            InvariantViolationError: Stored aggregates or digests that disagree
                with the report's own per-example rows (exit 5).
        """
        return _read(document, source)


# --- the reader ----------------------------------------------------------------------

# ids, languages, prompt digests, parse statuses, numerators, denominators
_Rows = tuple[
    list[str], list[str], list[str], list[ParseStatus], NDArray[np.int64], NDArray[np.int64]
]


def _identity(check: ReportChecker, identity: dict[str, Any]) -> ArmIdentity:
    model_kind = check.model_kind(identity["model_kind"], "identity.model_kind")
    model_identity = check.model_identity(identity["model_identity"], "identity.model_identity")
    adapter = None
    if identity["adapter"] is not None:
        entry = check.mapping(identity["adapter"], "identity.adapter", ReportKeys.ADAPTER)
        adapter = AdapterIdentity(
            source=check.text(entry["source"], "identity.adapter.source"),
            sha256=check.text(entry["sha256"], "identity.adapter.sha256"),
        )
    decoding = check.decoding(identity["decoding"], "identity.decoding")
    prompt_sets = check.mapping(identity["prompt_set_sha256"], "identity.prompt_set_sha256")
    for language, digest in prompt_sets.items():
        check.text(digest, f"identity.prompt_set_sha256.{language}")
    return ArmIdentity(
        model_kind=model_kind,
        model_identity=model_identity,
        adapter=adapter,
        parser_version=check.text(identity["parser_version"], "identity.parser_version"),
        decoding=decoding,
        test_split_sha256=check.text(identity["test_split_sha256"], "identity.test_split_sha256"),
    )


def _check_rows(
    check: ReportChecker, value: object, names: Sequence[str], slice_by: tuple[str, ...] = ()
) -> _Rows:
    rows = check.array(value, "per_example")
    row_keys = _ROW_KEYS | {"slice_values"} if slice_by else _ROW_KEYS
    width = len(names)
    ids: list[str] = []
    languages: list[str] = []
    prompts: list[str] = []
    statuses: list[ParseStatus] = []
    numerators: list[list[int]] = []
    denominators: list[list[int]] = []
    previous = ""
    for index, raw in enumerate(rows):
        where = f"per_example[{index}]"
        given = check.mapping(raw, where)
        row = check.mapping(
            given, where, row_keys | {"conversation_id"} if "conversation_id" in given else row_keys
        )
        example_id = check.text(row["example_id"], f"{where}.example_id")
        if ids and example_id <= previous:
            check.fail(
                f"{where}.example_id",
                f"{example_id!r} is out of order or duplicated; rows are sorted by example_id",
            )
        previous = example_id
        ids.append(example_id)
        languages.append(check.text(row["language"], f"{where}.language"))
        prompts.append(check.text(row["prompt_sha256"], f"{where}.prompt_sha256"))
        status = row["parse_status"]
        if status not in PARSE_STATUSES:
            check.fail(f"{where}.parse_status", f"unknown status {status!r}")
        statuses.append(status)
        for key, target in (("numerators", numerators), ("denominators", denominators)):
            counts = check.array(row[key], f"{where}.{key}")
            if len(counts) != width or any(type(item) is not int or item < 0 for item in counts):
                check.fail(
                    f"{where}.{key}", f"must be {width} non-negative integers, got {counts!r}"
                )
            target.append(counts)
    try:
        num = np.array(numerators, dtype=np.int64).reshape(len(rows), width)
        den = np.array(denominators, dtype=np.int64).reshape(len(rows), width)
    except OverflowError:
        check.fail("per_example", "a count does not fit in 64 bits")
    bad = np.flatnonzero((num > den).any(axis=1))
    if bad.size:
        check.fail(f"per_example[{int(bad[0])}]", "a numerator exceeds its denominator")
    return ids, languages, prompts, statuses, num, den


def _paired(
    check: ReportChecker,
    language: str,
    value: object,
    names: Sequence[str],
    slices: Mapping[str, SliceResult],
    row_of: Mapping[str, int],
    languages: Sequence[str],
    prompts: Sequence[str],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    clusters: Sequence[str] | None = None,
) -> PairedSlice:
    """Read one gap and check its pairs, digest, metrics and clusters against the report's rows."""
    result = read_gap(check, language, value, ReportKeys.GAP | {"pair_ids"}, slices, names)
    where = f"paired_slices.{language}"
    root_rows: list[int] = []
    target_rows: list[int] = []
    for index, (root_id, target_id) in enumerate(result.pairs):
        at = f"{where}.pair_ids[{index}]"
        if root_id not in row_of or target_id not in row_of:
            check.broken(at, "names an example that is not in per_example")
        root_row, target_row = row_of[root_id], row_of[target_id]
        if languages[root_row] != result.root_language or languages[target_row] != language:
            check.broken(at, f"does not join a {result.root_language} root to a {language} target")
        root_rows.append(root_row)
        target_rows.append(target_row)
    digest = pair_set_digest(
        (root_id, target_id, prompts[root_row], prompts[target_row])
        for (root_id, target_id), root_row, target_row in zip(
            result.pairs, root_rows, target_rows, strict=True
        )
    )
    if digest != cast(dict[str, Any], value)["pair_set_sha256"]:
        check.broken(f"{where}.pair_set_sha256", "does not match the listed pairs and prompts")
    roots = np.array(root_rows, dtype=np.int64)
    targets = np.array(target_rows, dtype=np.int64)
    expected = None if clusters is None else len({clusters[row] for row in root_rows})
    if result.bootstrap.clusters != expected:
        check.broken(
            f"{where}.bootstrap.clusters",
            f"is {result.bootstrap.clusters}, the pairs' conversations say {expected}",
        )
    check.same_metrics(
        result.root_metrics,
        metrics_from_components(numerators[roots], denominators[roots], names),
        f"{where}.root_metrics",
    )
    check.same_metrics(
        result.target_metrics,
        metrics_from_components(numerators[targets], denominators[targets], names),
        f"{where}.target_metrics",
    )
    return replace(result, pair_set_sha256=digest)


def _read(document: object, source: str) -> EvaluationReport:
    check = ReportChecker(source, "score")
    top = check.mapping(document, "report")
    if "schema_version" not in top:
        check.fail("schema_version", "missing; this is not a sommelier_mlflow evaluation report")
    if top["schema_version"] != EVALUATION_REPORT_SCHEMA:
        check.fail(
            "schema_version",
            f"unsupported {top['schema_version']!r}; "
            f"this version reads {EVALUATION_REPORT_SCHEMA!r}",
        )
    identity_entry, identity = _read_identity(check, top)
    slice_by = identity.slice_by
    optional_top = {"format_hint", "format_mismatch", "calls_in_reasoning"} & set(top)
    check.mapping(
        top, "report", _TOP_KEYS | ({"field_slices"} if slice_by else set()) | optional_top
    )
    format_hint = check.text(top["format_hint"], "format_hint") if "format_hint" in top else None

    names = check.metric_names(top["metric_names"])
    settings = check.settings(top["bootstrap"])

    ids, languages, prompts, statuses, numerators, denominators = _check_rows(
        check, top["per_example"], names, slice_by
    )
    conversations = _row_conversations(check, top["per_example"])
    clusters = cluster_labels(conversations, ids)
    row_values = _row_values(check, top["per_example"], slice_by)
    if not ids:
        check.fail("per_example", "is empty; a report covers at least one example")
    skipped = identity.skip_overlong
    if skipped is not None and set(skipped.example_ids) & set(ids):
        check.broken("identity.skip_overlong.example_ids", "names examples that were scored")
    if check.count(top["examples"], "examples") != len(ids):
        check.broken("examples", f"is {top['examples']} but per_example holds {len(ids)} rows")
    mismatch = _format_mismatch(check, top, statuses)
    in_reasoning = _calls_in_reasoning(check, top, statuses)
    metrics = check.metrics(top["metrics"], "metrics", names)
    check.same_metrics(metrics, metrics_from_components(numerators, denominators, names), "metrics")

    slices = _language_slices(
        check, top["slices"], identity_entry, languages, names, prompts, numerators, denominators
    )

    row_of = {example_id: row for row, example_id in enumerate(ids)}
    paired_entries = check.mapping(top["paired_slices"], "paired_slices")
    paired = {
        language: _paired(
            check,
            language,
            raw,
            names,
            slices,
            row_of,
            languages,
            prompts,
            numerators,
            denominators,
            clusters,
        )
        for language, raw in paired_entries.items()
    }
    return EvaluationReport(
        identity=identity,
        metric_names=names,
        metrics=MappingProxyType(metrics),
        slices=MappingProxyType(slices),
        paired_slices=MappingProxyType(paired),
        bootstrap=settings,
        example_ids=tuple(ids),
        languages=tuple(languages),
        prompt_sha256s=tuple(prompts),
        parse_statuses=tuple(statuses),
        numerators=_frozen(numerators),
        denominators=_frozen(denominators),
        source=source,
        slice_values=tuple(row_values) if slice_by else (),
        field_slices=MappingProxyType(
            _field_slices(check, top, row_values, prompts, numerators, denominators, names)
            if slice_by
            else {}
        ),
        document_sha256=sha256_text(canonical_json(top)),
        format_hint=format_hint,
        format_mismatch=mismatch,
        calls_in_reasoning=in_reasoning,
        conversation_ids=tuple(conversations) if clusters is not None else (),
    )


def _calls_in_reasoning(
    check: ReportChecker, top: dict[str, Any], statuses: Sequence[ParseStatus]
) -> int:
    """The optional ``calls_in_reasoning`` count: at most the rows scored ``no_json``."""
    if "calls_in_reasoning" not in top:
        return 0
    count = check.count(top["calls_in_reasoning"], "calls_in_reasoning")
    no_call = sum(1 for status in statuses if status == "no_json")
    if not 0 < count <= no_call:
        check.broken(
            "calls_in_reasoning",
            f"is {count} but {no_call} rows were scored no_json (it counts some of those, "
            "and is left out when none)",
        )
    return count


def _row_conversations(check: ReportChecker, rows: list[Any]) -> list[str | None]:
    """Each row's optional ``conversation_id`` (rows are already checked mappings)."""
    return [
        check.text(row["conversation_id"], f"per_example[{index}].conversation_id")
        if "conversation_id" in row
        else None
        for index, row in enumerate(rows)
    ]


def _format_mismatch(
    check: ReportChecker, top: dict[str, Any], statuses: Sequence[ParseStatus]
) -> FormatMismatch | None:
    """The optional ``format_mismatch``, its syntax count recounted from the rows' statuses."""
    if "format_mismatch" not in top:
        return None
    mismatch = check.format_mismatch(top["format_mismatch"], "format_mismatch", len(statuses))
    found = syntax_found(statuses)  # a row's status is the chosen format's
    if mismatch.syntax_found != found:
        check.broken(
            "format_mismatch.syntax_found",
            f"is {mismatch.syntax_found} but {found} rows have a status other than no_json",
        )
    return mismatch


def _read_identity(check: ReportChecker, top: dict[str, Any]) -> tuple[dict[str, Any], ArmIdentity]:
    """The report's ``identity`` object as stored and as read."""
    raw_identity = check.mapping(top.get("identity"), "identity")
    identity_entry = check.mapping(
        raw_identity, "identity", _IDENTITY_KEYS | (_OPTIONAL_IDENTITY_KEYS & set(raw_identity))
    )
    scoring, slice_by = _scoring(check, identity_entry)
    prompt_format = DEFAULT_PROMPT_FORMAT
    if "prompt_format" in identity_entry:
        prompt_format = check.text(identity_entry["prompt_format"], "identity.prompt_format")
        if prompt_format == DEFAULT_PROMPT_FORMAT:
            check.fail("identity.prompt_format", f"is left out for {DEFAULT_PROMPT_FORMAT!r}")
    identity = replace(
        _identity(check, identity_entry),
        scoring=scoring,
        slice_by=slice_by,
        prompt_format=prompt_format,
        dataset=_dataset(check, identity_entry),
        chat_template_kwargs=_chat_template_kwargs(check, identity_entry),
        template_date=_template_date(check, identity_entry),
        sample=_sample(check, identity_entry),
        skip_overlong=_skipped(check, identity_entry),
    )
    return identity_entry, identity


def _language_slices(
    check: ReportChecker,
    value: object,
    identity_entry: dict[str, Any],
    languages: list[str],
    names: tuple[str, ...],
    prompts: list[str],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
) -> dict[str, SliceResult]:
    """Read the language slices and recompute each from its rows."""
    slice_entries = check.mapping(value, "slices")
    language_array = np.array(languages)
    if set(slice_entries) != set(languages):
        check.broken(
            "slices", f"are {sorted(slice_entries)} but rows have {sorted(set(languages))}"
        )
    prompt_sets = identity_entry["prompt_set_sha256"]
    if set(prompt_sets) != set(slice_entries):
        check.broken("identity.prompt_set_sha256", "does not name exactly the slices")
    slices: dict[str, SliceResult] = {}
    for language, raw in slice_entries.items():
        where = f"slices.{language}"
        check.language(language, where)
        rows = np.flatnonzero(language_array == language).tolist()
        slices[language] = _slice(
            check, where, language, raw, rows, names, prompts, numerators, denominators
        )
        if prompt_sets[language] != slices[language].prompt_set_sha256:
            check.broken(f"{where}.prompt_set_sha256", "does not match the rows' prompt digests")
    return slices


def _dataset(check: ReportChecker, identity: dict[str, Any]) -> DatasetRef | None:
    if "dataset" not in identity:
        return None
    entry = check.mapping(identity["dataset"], "identity.dataset", _DATASET_KEYS)
    return DatasetRef(
        name=check.text(entry["name"], "identity.dataset.name"),
        dataset_id=check.text(entry["id"], "identity.dataset.id"),
        digest=check.text(entry["digest"], "identity.dataset.digest"),
    )


def _chat_template_kwargs(check: ReportChecker, identity: dict[str, Any]) -> dict[str, Any]:
    if "chat_template_kwargs" not in identity:
        return {}
    kwargs = check.mapping(identity["chat_template_kwargs"], "identity.chat_template_kwargs")
    if not kwargs:
        check.fail("identity.chat_template_kwargs", "is empty; leave it out when none were given")
    return dict(kwargs)


def _template_date(check: ReportChecker, identity: dict[str, Any]) -> str | None:
    if "template_date" not in identity:
        return None
    day = check.text(identity["template_date"], "identity.template_date")
    try:
        read_template_date(day)
    except ConfigError as exc:
        check.fail("identity.template_date", str(exc))
    return day


def _sample(check: ReportChecker, identity: dict[str, Any]) -> dict[str, Any] | None:
    if "sample" not in identity:
        return None
    entry = check.mapping(identity["sample"], "identity.sample", _SAMPLE_KEYS)
    check.text(entry["rule"], "identity.sample.rule")
    for key in ("seed", "max_examples", "roots"):
        check.count(entry[key], f"identity.sample.{key}")
    if not 0 < entry["max_examples"] < entry["roots"]:
        check.fail("identity.sample", "max_examples must be between 0 and roots (exclusive)")
    strata = check.array(entry["strata"], "identity.sample.strata")
    for name in strata:
        check.text(name, "identity.sample.strata")
    return dict(entry)


def _skipped(check: ReportChecker, identity: dict[str, Any]) -> SkippedOverlong | None:
    if "skip_overlong" not in identity:
        return None
    where = "identity.skip_overlong"
    entry = check.mapping(identity["skip_overlong"], where, _SKIP_KEYS)
    limit = entry["context_length"]
    if limit is not None and (type(limit) is not int or limit <= 0):
        check.fail(f"{where}.context_length", f"must be a positive integer or null, got {limit!r}")
    ids = [check.text(i, f"{where}.example_ids") for i in check.array(entry["example_ids"], where)]
    if len(set(ids)) != len(ids):
        check.fail(f"{where}.example_ids", "lists an example twice")
    return SkippedOverlong(limit, tuple(ids))


def _scoring(check: ReportChecker, identity: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    scoring = identity.get("scoring", DEFAULT_MODE)
    if "scoring" in identity and (scoring == DEFAULT_MODE or scoring not in scoring_mode_names()):
        check.fail(
            "identity.scoring",
            f"must be a registered non-default scoring mode (left out for {DEFAULT_MODE!r}), "
            f"got {scoring!r}",
        )
    raw = check.array(identity.get("slice_by", []), "identity.slice_by")
    if "slice_by" in identity and not raw:
        check.fail("identity.slice_by", "is empty; leave it out when only language is sliced")
    slice_by = tuple(check.text(name, "identity.slice_by") for name in raw)
    try:
        expected = check_slice_fields(slice_by, scoring=scoring)
    except InputError as exc:
        check.fail("identity.slice_by", str(exc))
    if expected != slice_by:
        check.fail("identity.slice_by", f"must be {list(expected)} for {scoring!r} scoring")
    return scoring, slice_by


def _row_values(
    check: ReportChecker, rows: list[Any], slice_by: tuple[str, ...]
) -> list[tuple[tuple[str, str], ...]]:
    if not slice_by:
        return []
    values: list[tuple[tuple[str, str], ...]] = []
    for index, row in enumerate(rows):
        where = f"per_example[{index}].slice_values"
        entry = check.mapping(row["slice_values"], where, frozenset(slice_by))
        values.append(
            tuple(
                sorted((name, check.text(text, f"{where}.{name}")) for name, text in entry.items())
            )
        )
    return values


def _field_slices(
    check: ReportChecker,
    top: dict[str, Any],
    row_values: list[tuple[tuple[str, str], ...]],
    prompts: list[str],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    names: tuple[str, ...],
) -> dict[str, SliceResult]:
    members: dict[str, list[int]] = {}
    for row, values in enumerate(row_values):
        for name, value in values:
            members.setdefault(slice_name(name, value), []).append(row)
    stored = check.mapping(top["field_slices"], "field_slices")
    if set(stored) != set(members):
        check.broken("field_slices", f"are {sorted(stored)} but rows have {sorted(members)}")
    result: dict[str, SliceResult] = {}
    for key, raw in stored.items():
        result[key] = _slice(
            check,
            f"field_slices.{key}",
            key,
            raw,
            members[key],
            names,
            prompts,
            numerators,
            denominators,
        )
    return result


def _slice(
    check: ReportChecker,
    where: str,
    key: str,
    value: object,
    rows: Sequence[int],
    names: tuple[str, ...],
    prompts: list[str],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
) -> SliceResult:
    """Read one slice and recompute its size, metrics and prompt digest from its rows.

    Language and field slices are stored alike; only how rows join a slice differs.
    """
    entry = check.mapping(value, where, _SLICE_KEYS)
    expected = SliceResult.from_rows(key, rows, prompts, numerators, denominators, names)
    if check.count(entry["examples"], f"{where}.examples") != expected.examples:
        check.broken(f"{where}.examples", f"is {entry['examples']}, rows say {expected.examples}")
    slice_metrics = check.metrics(entry["metrics"], f"{where}.metrics", names)
    check.same_metrics(slice_metrics, expected.metrics, f"{where}.metrics")
    if entry["prompt_set_sha256"] != expected.prompt_set_sha256:
        check.broken(f"{where}.prompt_set_sha256", "does not match the rows' prompt digests")
    return SliceResult(
        slice=key,
        examples=expected.examples,
        metrics=MappingProxyType(slice_metrics),
        prompt_set_sha256=expected.prompt_set_sha256,
    )


def validate_evaluation_report(report: object, *, source: str = "evaluation report") -> None:
    """Refuse a report document that is malformed or inconsistent with its own rows.

    Raises:
        DataError: Malformed report (exit 2).
        InvariantViolationError: Inconsistent report (exit 5).
    """
    EvaluationReport.from_json(report, source=source)


def read_evaluation_report(path: str | os.PathLike[str]) -> EvaluationReport:
    """Read and completely check an ``evaluation_report.json`` file.

    Raises:
        DataError: Unreadable, not strict JSON, or malformed (exit 2).
        InvariantViolationError: Aggregates disagree with the rows (exit 5).
    """
    source, data = read_report_document(path, "evaluation report")
    return EvaluationReport.from_json(data, source=source)


def write_evaluation_report(
    path: str | os.PathLike[str], report: EvaluationReport | ScoredRun
) -> Path:
    """Atomically write an evaluation report (the one writer).

    Args:
        path: Target file (conventionally ``evaluation_report.json``).
        report: The typed report, or a scored run to write the report of.

    Returns:
        The written path.
    """
    if isinstance(report, ScoredRun):
        report = EvaluationReport.from_run(report, source=os.fspath(path))
    return atomic_write_json(path, report.to_json())
