"""Join one arm's generations to the test split and score them.

Scoring is where the product's guarantees are enforced, so it refuses rather
than repairs: every generation must belong to a known example, carry that
example's language and prompt digest, and use the run's one decoding; every
evaluated example must have exactly one generation. The stored parse is an
audit copy only: each ``raw_text`` is parsed again with the current parser,
and a stored parse that disagrees is an invariant violation, because it means
either the record was edited or it was produced by a different parser than the
``parser_version`` the report is about to claim.

Rows are kept in ``example_id`` order (not file order). Every digest, every
per-example array and every bootstrap therefore depends only on the identities
and contents of the rows, so two arms scored from differently ordered files
still line up row for row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from sommelier_mlflow._gc import paused_gc
from sommelier_mlflow._json import canonical_json
from sommelier_mlflow._progress import SCORING_PROGRESS_MIN, progress_bar
from sommelier_mlflow.data import (
    DEFAULT_PROMPT_FORMAT,
    Decoding,
    GenerationRecord,
    ModelIdentity,
    ModelKind,
    TestExample,
    TestSplit,
    check_model_kind,
    check_scoring_mode,
    check_slice_fields,
    slice_name,
    slice_sections,
    validate_language,
)
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from sommelier_mlflow.evaluation._digests import pair_set_digest, prompt_set_digest
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import (
    PairedBootstrapResult,
    paired_bootstrap,
)
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    PARSER_VERSION,
    CallsParseResult,
    ExampleScore,
    FormatHint,
    MetricValue,
    OutputFormat,
    Parsed,
    ParseResult,
    ParseStatus,
    ScoringMetric,
    ScoringMode,
    format_hint,
    output_format_names,
    parse_tool_call,
    score_components,
    scoring_mode,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

__all__ = [
    "AnsweredExample",
    "BootstrapSettings",
    "ExampleResult",
    "PairCoverage",
    "PairedSlice",
    "ScoredExamples",
    "ScoredRun",
    "SliceResult",
    "metrics_from_components",
    "score_completions",
    "score_run",
]

_PREVIEW: Final = 5


def preview_ids(ids: Sequence[str]) -> str:
    """Name the first few ids of a list and how many more there are.

    Error messages must point at concrete rows without printing 20,000 ids.
    """
    shown = ", ".join(repr(example_id) for example_id in ids[:_PREVIEW])
    rest = len(ids) - _PREVIEW
    return f"{shown} and {rest} more" if rest > 0 else shown


def metrics_from_components(
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    metric_names: Sequence[str],
) -> dict[str, MetricValue]:
    """Sum per-example component rows into exact metrics, in ``metric_names`` order.

    Args:
        numerators: Integer array of shape ``(n, m)``.
        denominators: Integer array of the same shape.
        metric_names: One name per column.

    Returns:
        One :class:`MetricValue` per metric; all-zero counts for ``n == 0``.
    """
    top = numerators.sum(axis=0, dtype=np.int64)
    bottom = denominators.sum(axis=0, dtype=np.int64)
    return {
        name: MetricValue(int(top[index]), int(bottom[index]))
        for index, name in enumerate(metric_names)
    }


@dataclass(frozen=True, slots=True)
class BootstrapSettings:
    """The bootstrap configuration of one run, recorded in its report.

    Attributes:
        seed: The base seed; each interval derives its own seed from it and a
            label (see :func:`~sommelier_mlflow.evaluation.derive_seed`).
        resamples: Resamples per interval.
        confidence: Nominal coverage of every interval.
    """

    seed: int
    resamples: int
    confidence: float

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")
        if (
            isinstance(self.resamples, bool)
            or not isinstance(self.resamples, int)
            or self.resamples < 1
        ):
            raise ConfigError(f"resamples must be a positive integer, got {self.resamples!r}")
        if (
            isinstance(self.confidence, bool)
            or not isinstance(self.confidence, (int, float))
            or not 0.0 < self.confidence < 1.0
        ):
            raise ConfigError(
                f"confidence must be a number strictly between 0 and 1, got {self.confidence!r}"
            )


@dataclass(frozen=True, slots=True)
class ExampleResult:
    """One example's generation, fresh parse and score: a row of the per-example table.

    Attributes:
        example_id: The example's id.
        language: Its language slice.
        source_example_id: The root it translates, if any.
        prompt_sha256: The verified prompt digest (``None`` when the outputs
            came without prompts, as in the evaluator plugin).
        raw_text: The completion exactly as generated.
        parse_status: The status the current parser assigns to ``raw_text``.
        parsed_call: The parsed call when ``parse_status == "ok"`` (``single`` scoring).
        score: The additive metric components, one per scored metric.
        parsed_calls: The parsed calls when ``parse_status == "ok"`` (``calls`` scoring).
        slice_values: The example's value of each declared slice field, sorted by field.
    """

    example_id: str
    language: str
    source_example_id: str | None
    prompt_sha256: str | None
    raw_text: str
    parse_status: ParseStatus
    parsed_call: dict[str, Any] | None
    score: ExampleScore
    parsed_calls: tuple[dict[str, Any], ...] | None = None
    slice_values: tuple[tuple[str, str], ...] = ()

    @property
    def full_call_correct(self) -> bool:
        """Whether name and arguments are both right (the McNemar outcome)."""
        return self.score.full_call_correct

    def table_row(self, metrics: Sequence[ScoringMetric[Any]]) -> dict[str, Any]:
        """The row of the per-example table logged to MLflow (flat, JSON-safe).

        Binary metrics come first as yes/no columns, then the exact counts of
        the others, each in registry order; ``raw_text`` closes the row.
        """
        row: dict[str, Any] = {
            "example_id": self.example_id,
            "language": self.language,
            "parse_status": self.parse_status,
        }
        for metric in metrics:
            if metric.binary and metric.in_table:
                row[metric.column] = self.score.correct(metric.name)
        for metric in metrics:
            if not metric.binary and metric.in_table:
                numerator, denominator = self.score.component(metric.name)
                row[f"{metric.column}_numerator"] = numerator
                row[f"{metric.column}_denominator"] = denominator
        row["raw_text"] = self.raw_text
        return row


@dataclass(frozen=True, slots=True)
class SliceResult:
    """Metrics of one slice; its prompt-set digest is ``None`` without prompts.

    Attributes:
        slice: The slice's name: a language (``en``) or a field slice (``F:V``).
        examples: Rows in the slice.
        metrics: Their exact metrics.
        prompt_set_sha256: Digest of their prompts, ``None`` without prompts.
    """

    slice: str
    examples: int
    metrics: Mapping[str, MetricValue]
    prompt_set_sha256: str | None


@dataclass(frozen=True, slots=True)
class PairCoverage:
    """How much of each slice the matched pairs cover.

    Attributes:
        target_rows: Rows in the target language slice (translated or not).
        paired_targets: Target rows joined to an evaluated root (= pairs).
        root_rows: Rows in the root language slice.
        paired_roots: Distinct roots that at least one pair uses.
        unmatched_targets: Target rows naming a root that was not evaluated.
    """

    target_rows: int
    paired_targets: int
    root_rows: int
    paired_roots: int
    unmatched_targets: int


@dataclass(frozen=True, slots=True)
class PairedSlice:
    """Matched-pair language gap of one target language (target minus root).

    Attributes:
        language: The target language.
        root_language: The language of the roots its rows translate.
        pairs: ``(root_id, target_id)`` per pair, ordered by target id.
        coverage: Pair coverage of both slices.
        pair_set_sha256: Digest of the pairs and their prompts (``None`` without prompts).
        root_metrics: The roots' metrics over the pairs only.
        target_metrics: The targets' metrics over the pairs only.
        bootstrap: The paired bootstrap (a = roots, b = targets).
    """

    language: str
    root_language: str
    pairs: tuple[tuple[str, str], ...]
    coverage: PairCoverage
    pair_set_sha256: str | None
    root_metrics: Mapping[str, MetricValue]
    target_metrics: Mapping[str, MetricValue]
    bootstrap: PairedBootstrapResult


@dataclass(frozen=True, eq=False)
class ScoredExamples:
    """What scoring computes from examples and completions alone, with no provenance.

    Attributes:
        metrics_scored: The metric definitions, in column order.
        examples: Per-example results, ordered by ``example_id``.
        numerators: ``(n, m)`` int64 components, rows as ``examples``, columns
            as ``metrics_scored``.
        denominators: Same shape.
        metrics: Overall metrics.
        slices: Per-language results, keyed and ordered by language.
        paired_slices: Matched-pair gaps, keyed and ordered by target language.
        scoring: The scoring mode (``single``, ``calls`` or a registered one).
        slice_by: Declared slice fields beyond language, in definition order.
        field_slices: Results per field slice, keyed ``F:V``, in ``slice_by``
            then value order (a :class:`SliceResult` whose ``slice`` is the name).
        output_format: The output format the completions were decoded from.
        format_hint: Set when more than a fifth of the outputs got no call
            from ``output_format`` but calls from another registered format
            (a diagnostic: the scores are those of ``output_format``).
    """

    metrics_scored: tuple[ScoringMetric[Any], ...]
    examples: tuple[ExampleResult, ...]
    numerators: NDArray[np.int64]
    denominators: NDArray[np.int64]
    metrics: Mapping[str, MetricValue]
    slices: dict[str, SliceResult]
    paired_slices: dict[str, PairedSlice]
    scoring: str = DEFAULT_MODE
    slice_by: tuple[str, ...] = ()
    field_slices: dict[str, SliceResult] = field(default_factory=dict)
    output_format: str = JSON_FORMAT
    format_hint: FormatHint | None = None

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The scored metrics' names, in column order."""
        return tuple(metric.name for metric in self.metrics_scored)

    @property
    def parser_version(self) -> str:
        """The mode's parser version, joined by the output format's decoder version."""
        mode = scoring_mode(self.scoring)
        return mode.full_parser_version(registered_output_format(self.output_format))

    def table_rows(self) -> list[dict[str, Any]]:
        """The per-example table (one flat dict per example, ``example_id`` order)."""
        return [example.table_row(self.metrics_scored) for example in self.examples]


@dataclass(frozen=True, eq=False)
class ScoredRun:
    """One scored arm: its provenance around what :func:`score_completions` computed.

    Attributes:
        model_kind: ``"base"`` or ``"adapter"``.
        model_identity: Base model and tokenizer ids/revisions.
        adapter: ``{"source", "sha256"}`` for an adapter arm, ``None`` for base.
        parser_version: The parser that produced every parse in this run.
        decoding: The run's single decoding configuration.
        test_split_sha256: Digest of the test-split file.
        bootstrap: Bootstrap settings used for the language gaps.
        scored: Rows, components and every aggregate.
        prompt_format: The prompt format every prompt was rendered in.
    """

    model_kind: ModelKind
    model_identity: ModelIdentity
    adapter: dict[str, str] | None
    parser_version: str
    decoding: Decoding
    test_split_sha256: str
    bootstrap: BootstrapSettings
    scored: ScoredExamples
    prompt_format: str = DEFAULT_PROMPT_FORMAT

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The scored metrics' names, in column order."""
        return self.scored.metric_names

    @property
    def examples(self) -> tuple[ExampleResult, ...]:
        """Per-example results, ordered by ``example_id``."""
        return self.scored.examples

    @property
    def numerators(self) -> NDArray[np.int64]:
        """``(n, m)`` int64 numerator components."""
        return self.scored.numerators

    @property
    def denominators(self) -> NDArray[np.int64]:
        """``(n, m)`` int64 denominator components."""
        return self.scored.denominators

    @property
    def metrics(self) -> Mapping[str, MetricValue]:
        """Overall metrics."""
        return self.scored.metrics

    @property
    def slices(self) -> dict[str, SliceResult]:
        """Per-language results."""
        return self.scored.slices

    @property
    def paired_slices(self) -> dict[str, PairedSlice]:
        """Matched-pair gaps per target language."""
        return self.scored.paired_slices

    def table_rows(self) -> list[dict[str, Any]]:
        """The per-example table (one flat dict per example, ``example_id`` order)."""
        return self.scored.table_rows()


def _check_adapter(model_kind: str, adapter: Mapping[str, Any] | None) -> dict[str, str] | None:
    if model_kind == "base":
        if adapter is not None:
            raise ConfigError(
                "a base arm must not name an adapter; score it with model_kind='adapter' "
                "or pass adapter=None"
            )
        return None
    if adapter is None:
        raise ConfigError(
            "an adapter arm needs adapter={'source': ..., 'sha256': ...} identifying the adapter"
        )
    if (
        not isinstance(adapter, Mapping)
        or set(adapter) != {"source", "sha256"}
        or not all(isinstance(adapter[key], str) and adapter[key] for key in adapter)
    ):
        raise ConfigError(
            f"adapter must be {{'source': non-empty str, 'sha256': non-empty str}}, got {adapter!r}"
        )
    return {"source": adapter["source"], "sha256": adapter["sha256"]}


def _select_examples(split: TestSplit, languages: Sequence[str] | None) -> list[TestExample]:
    if not split.examples:
        raise InputError(f"test split {split.path!r} has no examples to score")
    if languages is None:
        chosen = set(split.languages)
    else:
        if isinstance(languages, str):
            raise ConfigError("languages must be a list of language codes, not one string")
        chosen = {validate_language(language) for language in languages}
        if not chosen:
            raise ConfigError("languages is empty; omit it to score every language in the split")
        empty = sorted(chosen - set(split.languages))
        if empty:
            raise InputError(
                f"configured language slice(s) {empty} have no rows in test split "
                f"{split.path!r} (it has {list(split.languages)}); fix the language list"
            )
    selected = sorted(
        (example for example in split.examples if example.language in chosen),
        key=lambda example: example.example_id,
    )
    unformatted = [example.example_id for example in selected if example.prompt_sha256 is None]
    if unformatted:
        raise InputError(
            f"{len(unformatted)} example(s) have no prompt_sha256 ({preview_ids(unformatted)}): "
            "scoring verifies every generation against its prompt digest, so score against "
            "the formatted split the generations were produced from"
        )
    return selected


def _prompt_format(selected: Sequence[TestExample]) -> str:
    """The one prompt format of the arm's prompts; a split mixing two is refused."""
    formats: dict[str, str] = {}
    for example in selected:
        formats.setdefault(example.prompt_format, example.example_id)
    if len(formats) > 1:
        seen = ", ".join(
            f"{name!r} (e.g. {example!r})" for name, example in sorted(formats.items())
        )
        raise InputError(
            f"the split's prompts were rendered in {len(formats)} prompt formats (field "
            f"prompt_format: {seen}); render every row in one format"
        )
    return next(iter(formats))


def _join(
    split: TestSplit,
    selected: Sequence[TestExample],
    generations: Iterable[GenerationRecord],
) -> list[GenerationRecord]:
    """Return the one generation of each selected example, in ``selected`` order."""
    known = split.by_id()
    wanted = {example.example_id for example in selected}
    by_id: dict[str, GenerationRecord] = {}
    unknown: list[str] = []
    outside: list[str] = []
    duplicates: list[str] = []
    for record in generations:
        if not isinstance(record, GenerationRecord):
            raise InputError(
                f"generations must be GenerationRecord objects, got {type(record).__name__}"
            )
        example_id = record.example_id
        if example_id not in known:
            unknown.append(example_id)
        elif example_id not in wanted:
            outside.append(example_id)
        elif example_id in by_id:
            duplicates.append(example_id)
        else:
            by_id[example_id] = record
    if unknown:
        raise InputError(
            f"{len(unknown)} generation(s) reference example ids not in test split "
            f"{split.path!r}: {preview_ids(unknown)}; score them against the split they "
            "were generated from"
        )
    if outside:
        raise InputError(
            f"{len(outside)} generation(s) belong to languages outside the configured slices: "
            f"{preview_ids(outside)}; add their languages or drop those generations"
        )
    if duplicates:
        unique = sorted(set(duplicates))
        raise InputError(
            f"{len(unique)} example id(s) have more than one generation: {preview_ids(unique)}; "
            "each example must be generated exactly once per arm"
        )
    missing = [example.example_id for example in selected if example.example_id not in by_id]
    if missing:
        raise InputError(
            f"{len(missing)} example(s) have no generation: {preview_ids(missing)}; "
            "generate every example of the split (metrics never drop examples)"
        )
    return [by_id[example.example_id] for example in selected]


def _run_decoding(records: Sequence[GenerationRecord], declared: Decoding | None) -> Decoding:
    seen: dict[str, str] = {}
    for record in records:
        key = canonical_json(record.decoding)
        seen.setdefault(key, record.example_id)
    if len(seen) > 1:
        variants = "; ".join(f"{key} (e.g. {example})" for key, example in sorted(seen.items()))
        raise InvariantViolationError(
            f"generations of one run used {len(seen)} different decodings: {variants}; "
            "regenerate the arm with one decoding configuration"
        )
    decoding = Decoding.from_dict(records[0].decoding)
    if declared is not None and declared.to_dict() != decoding.to_dict():
        raise InvariantViolationError(
            f"generations were decoded with {decoding.to_dict()} but the run declares "
            f"{declared.to_dict()}; the recorded decoding must be the one used"
        )
    return decoding


def _check_record(example: TestExample, record: GenerationRecord, model_kind: str) -> None:
    if record.model_kind != model_kind:
        raise InputError(
            f"generation for {example.example_id!r} is from a {record.model_kind!r} arm but "
            f"this run scores the {model_kind!r} arm; pass that arm's generations"
        )
    if record.language != example.language:
        raise InvariantViolationError(
            f"generation for {example.example_id!r} says language {record.language!r} but the "
            f"example is {example.language!r}; the generations do not belong to this split"
        )
    if record.prompt_sha256 != example.prompt_sha256:
        raise InvariantViolationError(
            f"generation for {example.example_id!r} was produced from prompt "
            f"{record.prompt_sha256} but the split's prompt is {example.prompt_sha256}; "
            "regenerate from this split's stored prompts"
        )


@dataclass(frozen=True, slots=True)
class AnsweredExample:
    """One example and its completion: everything scoring needs, and nothing about provenance.

    Attributes:
        example_id: Unique id of the example.
        language: Its language slice.
        source_example_id: For a translated example, the id of its root.
        gold_call: The one expected ``{name, arguments}`` call (``None`` when the
            example expects zero or several calls: give ``gold_calls``).
        raw_text: The completion exactly as produced.
        prompt_sha256: The digest of the prompt it answered, when known;
            without it slices and pairs carry no prompt/pair-set digest.
        gold_calls: The expected calls for ``calls`` scoring (default: ``gold_call`` alone).
        slice_values: ``(field, value)`` of each declared slice field.
    """

    example_id: str
    language: str
    source_example_id: str | None
    gold_call: Mapping[str, Any] | None
    raw_text: str
    prompt_sha256: str | None = None
    gold_calls: tuple[Mapping[str, Any], ...] | None = None
    slice_values: tuple[tuple[str, str], ...] = ()

    @property
    def expected_calls(self) -> tuple[Mapping[str, Any], ...]:
        """Every expected call, in the given order."""
        if self.gold_calls is not None:
            return self.gold_calls
        return () if self.gold_call is None else (self.gold_call,)


def _parse_and_compare(
    completions: Sequence[AnsweredExample], mode: ScoringMode[Any], fmt: OutputFormat, bar: Any
) -> tuple[list[Parsed], list[Any]]:
    """Parse each completion once the mode's way and compare it with its gold.

    Each distinct gold is built once and shared (the comparison reuses its
    canonical forms). Parsing is the per-example cost of scoring, so ``bar``
    (a progress bar, possibly disabled) advances here, once per completion.
    """
    parses: list[Parsed] = []
    comparisons: list[Any] = []
    golds: dict[str, Any] = {}
    for completion in completions:
        calls = completion.expected_calls
        problem = mode.gold_problem(len(calls))
        if problem is not None:
            raise InputError(f"example {completion.example_id!r} {problem}")
        key = canonical_json(list(calls))
        gold = golds.get(key)
        if gold is None:
            gold = golds[key] = mode.make_gold(calls)
        parsed = mode.parse(completion.raw_text, fmt)  # the one parse of this completion
        parses.append(parsed)
        comparisons.append(mode.compare(parsed, gold))
        bar.update(1)
    return parses, comparisons


def _result_row(
    completion: AnsweredExample,
    parsed: Parsed,
    score: ExampleScore,
    slice_values: tuple[tuple[str, str], ...],
) -> ExampleResult:
    """The table row of one scored completion (positional: this runs once per example)."""
    return ExampleResult(
        completion.example_id,
        completion.language,
        completion.source_example_id,
        completion.prompt_sha256,
        completion.raw_text,
        parsed.status,
        parsed.call if isinstance(parsed, ParseResult) else None,
        score,
        parsed.calls if isinstance(parsed, CallsParseResult) else None,
        slice_values,
    )


def _component_arrays(
    comparisons: Sequence[Any], metrics: Sequence[ScoringMetric[Any]]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    flat_numerators, flat_denominators = score_components(comparisons, metrics)
    shape = (len(comparisons), len(metrics))
    numerators = np.array(flat_numerators, dtype=np.int64).reshape(shape)
    denominators = np.array(flat_denominators, dtype=np.int64).reshape(shape)
    return numerators, denominators


def _paired_slices(
    completions: Sequence[AnsweredExample],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    metric_names: tuple[str, ...],
    slice_sizes: Mapping[str, int],
    gap_scope: str,
    settings: BootstrapSettings,
) -> dict[str, PairedSlice]:
    row_of = {completion.example_id: row for row, completion in enumerate(completions)}
    translated: dict[str, list[int]] = defaultdict(list)
    for row, completion in enumerate(completions):
        if completion.source_example_id is not None:
            translated[completion.language].append(row)

    paired: dict[str, PairedSlice] = {}
    for language in sorted(translated):
        pair_rows: list[tuple[int, int]] = []
        unmatched = 0
        for target_row in translated[language]:
            target = completions[target_row]
            root_row = row_of.get(target.source_example_id or "")
            if root_row is None:
                unmatched += 1
                continue
            root = completions[root_row]
            if root.language == language:
                raise InputError(
                    f"example {target.example_id!r} ({language}) names source example "
                    f"{root.example_id!r} of the same language; a translation's root must be "
                    "in another language"
                )
            if canonical_json(list(root.expected_calls)) != canonical_json(
                list(target.expected_calls)
            ):
                raise InvariantViolationError(
                    f"translated example {target.example_id!r} and its root {root.example_id!r} "
                    "have different gold calls; a matched pair must ask for the identical call "
                    "(prepare drops such rows)"
                )
            pair_rows.append((root_row, target_row))
        if not pair_rows:
            raise InputError(
                f"language {language!r} has {unmatched} translated row(s) but none of their "
                "roots is evaluated, so no matched-pair gap can be measured; include the root "
                "language in the evaluated slices (or drop the dangling source_example_id)"
            )
        root_languages = sorted({completions[root_row].language for root_row, _ in pair_rows})
        if len(root_languages) != 1:
            raise InputError(
                f"translated rows of {language!r} have roots in several languages "
                f"{root_languages}; a language gap needs one root language per target language"
            )
        root_language = root_languages[0]
        roots = np.fromiter((root for root, _ in pair_rows), dtype=np.int64, count=len(pair_rows))
        targets = np.fromiter(
            (target for _, target in pair_rows), dtype=np.int64, count=len(pair_rows)
        )
        bootstrap = paired_bootstrap(
            numerators[roots],
            denominators[roots],
            numerators[targets],
            denominators[targets],
            resamples=settings.resamples,
            seed=derive_seed(settings.seed, f"gap/{gap_scope}/{language}"),
            confidence=settings.confidence,
            metric_names=metric_names,
        )
        prompts = [
            (completions[root].prompt_sha256, completions[target].prompt_sha256)
            for root, target in pair_rows
        ]
        pair_digest = None
        if all(root is not None and target is not None for root, target in prompts):
            pair_digest = pair_set_digest(
                (
                    completions[root].example_id,
                    completions[target].example_id,
                    root_prompt or "",
                    target_prompt or "",
                )
                for (root, target), (root_prompt, target_prompt) in zip(
                    pair_rows, prompts, strict=True
                )
            )
        paired[language] = PairedSlice(
            language=language,
            root_language=root_language,
            pairs=tuple(
                (completions[root].example_id, completions[target].example_id)
                for root, target in pair_rows
            ),
            coverage=PairCoverage(
                target_rows=slice_sizes[language],
                paired_targets=len(pair_rows),
                root_rows=slice_sizes[root_language],
                paired_roots=len({root for root, _ in pair_rows}),
                unmatched_targets=unmatched,
            ),
            pair_set_sha256=pair_digest,
            root_metrics=metrics_from_components(
                numerators[roots], denominators[roots], metric_names
            ),
            target_metrics=metrics_from_components(
                numerators[targets], denominators[targets], metric_names
            ),
            bootstrap=bootstrap,
        )
    return paired


@paused_gc()  # parsing builds objects per example; see sommelier_mlflow._gc
def score_completions(
    completions: Iterable[AnsweredExample],
    *,
    bootstrap: BootstrapSettings,
    gap_scope: str,
    metrics: Sequence[ScoringMetric[Any]] | None = None,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
    output_format: str = JSON_FORMAT,
) -> ScoredExamples:
    """Score completions against their gold calls: rows, slices and matched-pair gaps.

    This is the whole of scoring, as a pure function of its arguments: no
    file, model identity or decoding is involved, so an arm (via
    :func:`score_run`) and the evaluator plugin score identically. Each
    completion is parsed exactly once.

    Args:
        completions: One per example, in any order; ids must be unique.
        bootstrap: Seed, resamples and confidence of the gap intervals.
        gap_scope: Label mixed into each gap's seed,
            ``derive_seed(seed, f"gap/{gap_scope}/{language}")``
            (an arm uses its ``model_kind``).
        metrics: Metrics to score, in column order (default: the registry's
            metrics of ``scoring``).
        scoring: The registered scoring mode: ``single`` (one gold call per
            example, ``sommelier.parser.v1``), ``calls`` (zero or more,
            ``sommelier.calls_parser.v1``) or another registered one.
        slice_by: Slice fields beyond language; each completion must carry
            a value for each in ``slice_values``. The mode's default slices
            come first (``calls`` adds ``calls:0``, ``calls:1``, ``calls:2+``).
        progress: Allow a progress bar (examples/s, ETA) on stderr. It shows
            only for more than :data:`SCORING_PROGRESS_MIN` completions, where
            scoring takes long enough to be worth watching.
        output_format: The registered output format the completions are
            written in (default ``json``: the mode's own parser).

    Returns:
        The scored rows in ``example_id`` order and every aggregate.

    Raises:
        InputError: No completions, duplicate ids, a malformed gold call, or
            translated rows none of whose roots is among the completions.
        InvariantViolationError: A matched pair whose gold calls differ.
    """
    mode = scoring_mode(scoring)
    fmt = registered_output_format(output_format)
    fields = check_slice_fields(slice_by, scoring=scoring)
    chosen = mode.metrics() if metrics is None else tuple(metrics)
    names = tuple(metric.name for metric in chosen)
    rows = sorted(completions, key=lambda completion: completion.example_id)
    if not rows:
        raise InputError("there are no completions to score")
    repeated = sorted(
        {
            rows[i].example_id
            for i in range(1, len(rows))
            if rows[i].example_id == rows[i - 1].example_id
        }
    )
    if repeated:
        raise InputError(
            f"{len(repeated)} example id(s) occur more than once: {preview_ids(repeated)}; "
            "each example is scored exactly once"
        )
    with progress_bar(
        len(rows), "score", enabled=progress and len(rows) > SCORING_PROGRESS_MIN
    ) as bar:
        parses, comparisons = _parse_and_compare(rows, mode, fmt, bar)
    numerators, denominators = _component_arrays(comparisons, chosen)
    values = [_slice_values(completion, fields, mode) for completion in rows]
    results = tuple(
        _result_row(completion, parsed, ExampleScore(names, tuple(top), tuple(bottom)), row_values)
        for completion, parsed, top, bottom, row_values in zip(
            rows, parses, numerators.tolist(), denominators.tolist(), values, strict=True
        )
    )
    languages_of = np.array([completion.language for completion in rows])
    slices = {
        language: _slice_result(
            language,
            np.flatnonzero(languages_of == language),
            rows,
            numerators,
            denominators,
            names,
        )
        for language in sorted(set(languages_of.tolist()))
    }
    paired = _paired_slices(
        rows,
        numerators,
        denominators,
        names,
        {language: result.examples for language, result in slices.items()},
        gap_scope,
        bootstrap,
    )
    return ScoredExamples(
        metrics_scored=chosen,
        examples=results,
        numerators=numerators,
        denominators=denominators,
        metrics=metrics_from_components(numerators, denominators, names),
        slices=slices,
        paired_slices=paired,
        scoring=scoring,
        slice_by=fields,
        field_slices=_field_slices(rows, values, fields, numerators, denominators, names),
        output_format=fmt.name,
        format_hint=_format_hint(rows, parses, mode, fmt),
    )


def _format_hint(
    rows: Sequence[AnsweredExample],
    parses: Sequence[Parsed],
    mode: ScoringMode[Any],
    fmt: OutputFormat,
) -> FormatHint | None:
    """Whether another registered format reads calls from many outputs ``fmt`` gets none from."""
    others = {
        name: partial(mode.parse, output_format=registered_output_format(name))
        for name in output_format_names()
        if name != fmt.name
    }
    texts = [completion.raw_text for completion in rows]
    return format_hint(texts, [parsed.status for parsed in parses], fmt.name, others)


def _slice_values(
    completion: AnsweredExample, fields: tuple[str, ...], mode: ScoringMode[Any]
) -> tuple[tuple[str, str], ...]:
    """The example's value of each slice field, sorted by field.

    A field the mode derives from the gold calls (``calls`` mode's call count)
    is computed; any other is read from the row.
    """
    given = dict(completion.slice_values)
    out: list[tuple[str, str]] = []
    for name in fields:
        derive = mode.derived_slices.get(name)
        if derive is not None:
            out.append((name, derive(completion.expected_calls)))
        elif name in given:
            out.append((name, given[name]))
        else:
            raise InputError(
                f"example {completion.example_id!r} has no value for slice field {name!r}; "
                "every row needs each declared slice field"
            )
    return tuple(sorted(out))


def _field_slices(
    rows: Sequence[AnsweredExample],
    values: Sequence[tuple[tuple[str, str], ...]],
    fields: tuple[str, ...],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    names: tuple[str, ...],
) -> dict[str, SliceResult]:
    """One :class:`SliceResult` per ``F:V``, fields in definition order, values sorted."""
    members: dict[str, list[int]] = defaultdict(list)
    for row, row_values in enumerate(values):
        for name, value in row_values:
            members[slice_name(name, value)].append(row)
    ordered = sorted(members, key=lambda key: (fields.index(key.split(":", 1)[0]), key))
    slice_sections(ordered)  # refuses two slices that would share MLflow keys (exit 2)
    return {
        key: _slice_result(
            key, np.array(members[key], dtype=np.int64), rows, numerators, denominators, names
        )
        for key in ordered
    }


def _slice_result(
    name: str,
    members: NDArray[np.int64],
    rows: Sequence[AnsweredExample],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    names: tuple[str, ...],
) -> SliceResult:
    """One slice's result, language or ``F:V`` alike: its rows' sums and prompt-set digest."""
    prompts = [rows[row].prompt_sha256 for row in members]
    return SliceResult(
        slice=name,
        examples=len(members),
        metrics=metrics_from_components(numerators[members], denominators[members], names),
        prompt_set_sha256=(
            prompt_set_digest([prompt or "" for prompt in prompts])
            if all(prompt is not None for prompt in prompts)
            else None
        ),
    )


def _audit_stored_parse(record: GenerationRecord, result: ExampleResult, same: bool) -> None:
    # Generation records always store the single-call JSON parse (the record
    # schema's audit copy). When the run scored with exactly that parse
    # (``same``) the row's own result is reused; otherwise it is re-derived.
    fresh: ParseResult | ExampleResult = result if same else parse_tool_call(record.raw_text)
    fresh_status = fresh.parse_status if isinstance(fresh, ExampleResult) else fresh.status
    fresh_parsed = fresh.parsed_call if isinstance(fresh, ExampleResult) else fresh.call
    stored_call = None if record.parsed_call is None else canonical_json(record.parsed_call)
    fresh_call = None if fresh_parsed is None else canonical_json(fresh_parsed)
    if fresh_status != record.parse_status or stored_call != fresh_call:
        raise InvariantViolationError(
            f"generation for {record.example_id!r} stores parse {record.parse_status!r} "
            f"{stored_call} but {PARSER_VERSION} parses its raw_text as {fresh_status!r} "
            f"{fresh_call}; the record was edited or written by another parser, so regenerate "
            "or re-parse it before scoring"
        )


def score_run(
    split: TestSplit,
    generations: Iterable[GenerationRecord],
    *,
    model_kind: ModelKind,
    model_identity: ModelIdentity,
    adapter: Mapping[str, Any] | None,
    decoding: Decoding | None = None,
    languages: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
    output_format: str = JSON_FORMAT,
) -> ScoredRun:
    """Score one arm's generations against the test split.

    The join and every provenance check happen here; the scoring itself is
    :func:`score_completions`.

    Args:
        split: The (formatted) test split the generations were produced from.
        generations: One record per evaluated example, in any order.
        model_kind: ``"base"`` or ``"adapter"``; every record must carry it.
        model_identity: The base model and tokenizer that generated.
        adapter: ``{"source", "sha256"}`` for an adapter arm, ``None`` for base.
        decoding: The decoding the run declares; if given, the records' decoding
            must equal it.
        languages: Language slices to evaluate (default: every language of the
            split). Each must have rows; examples of other languages are left
            out of the run, and so must their generations be.
        seed: Base seed of the gap bootstraps (each derives
            ``derive_seed(seed, f"gap/{model_kind}/{language}")``).
        resamples: Bootstrap resamples per gap.
        confidence: Nominal coverage of the gap intervals.
        scoring: The declared scoring mode; ``single`` refuses a split with an
            example of zero or several gold calls (exit 2, naming its line).
        slice_by: Slice fields beyond language, read from each example's
            ``slice_values`` (see :func:`score_completions`).
        progress: Allow the scoring progress bar (see :func:`score_completions`).
        output_format: The registered output format of the completions
            (default ``json``); its decoder version joins ``parser_version``.

    Returns:
        The scored run; ``EvaluationReport.from_run`` gives its report.

    Raises:
        InputError: Unknown, missing or duplicate generations, a wrong
            ``model_kind``, an empty configured slice, unformatted examples, or
            translated rows none of whose roots are evaluated (exit 2).
        ConfigError: Bad adapter, languages or bootstrap settings (exit 2).
        InvariantViolationError: A prompt-digest or language mismatch, mixed
            decoding, a stored parse the current parser disagrees with, or a
            matched pair whose gold calls differ (exit 5).
    """
    check_model_kind(model_kind)
    if not isinstance(model_identity, ModelIdentity):
        raise ConfigError(
            f"model_identity must be a ModelIdentity, got {type(model_identity).__name__}"
        )
    adapter_info = _check_adapter(model_kind, adapter)
    registered_output_format(output_format)  # an unknown format is a configuration error first
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=confidence)
    check_slice_fields(slice_by, scoring=scoring)  # configuration first, then the data
    check_scoring_mode(split, scoring)
    selected = _select_examples(split, languages)
    prompt_format = _prompt_format(selected)
    records = _join(split, selected, generations)
    for example, record in zip(selected, records, strict=True):
        _check_record(example, record, model_kind)
    run_decoding = _run_decoding(records, decoding)
    scored = score_completions(
        [
            AnsweredExample(
                example_id=example.example_id,
                language=example.language,
                source_example_id=example.source_example_id,
                gold_call=example.gold_calls[0] if len(example.gold_calls) == 1 else None,
                raw_text=record.raw_text,
                prompt_sha256=record.prompt_sha256,  # verified equal to the example's digest
                gold_calls=example.gold_calls,
                slice_values=example.slice_values,
            )
            for example, record in zip(selected, records, strict=True)
        ],
        bootstrap=settings,
        gap_scope=model_kind,
        scoring=scoring,
        slice_by=slice_by,
        progress=progress,
        output_format=output_format,
    )
    # selected is in example_id order, as are the scored rows.
    same = scoring == DEFAULT_MODE and output_format == JSON_FORMAT
    for record, result in zip(records, scored.examples, strict=True):
        _audit_stored_parse(record, result, same)
    return ScoredRun(
        model_kind=model_kind,
        model_identity=model_identity,
        adapter=adapter_info,
        parser_version=scored.parser_version,
        decoding=run_decoding,
        test_split_sha256=split.sha256,
        bootstrap=settings,
        scored=scored,
        prompt_format=prompt_format,
    )
