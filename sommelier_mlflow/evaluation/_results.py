"""The types scoring takes and returns: rows, slices, pairs, a scored arm.

They are plain frozen records so that a report, the comparison gate and the
evaluator plugin can all read them without running scoring again; the one
function here, :func:`metrics_from_components`, is the exact sum every
aggregate of them is built from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sommelier_mlflow.data import (
    DEFAULT_PROMPT_FORMAT,
    DatasetRef,
    Decoding,
    ModelIdentity,
    ModelKind,
)
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.evaluation._digests import prompt_set_digest
from sommelier_mlflow.evaluation._stats import PairedBootstrapResult
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    ExampleScore,
    FormatHint,
    FormatMismatch,
    MetricValue,
    ParseStatus,
    ScoringMetric,
    scoring_mode,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

__all__ = [
    "metrics_from_components",
    "cluster_labels",
    "AnsweredExample",
    "BootstrapSettings",
    "ExampleResult",
    "SliceResult",
    "PairCoverage",
    "PairedSlice",
    "ScoredExamples",
    "ScoredRun",
]


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


def cluster_labels(
    conversation_ids: Sequence[str | None], example_ids: Sequence[str]
) -> list[str] | None:
    """The resampling unit of each row: its conversation, or the row alone.

    ``None`` when no row names a conversation (a single-turn split: rows are
    resampled and tested one by one, as always). Otherwise a row without a
    conversation is a cluster of its own, labelled so that it can never share
    a label with a conversation.
    """
    if all(conversation is None for conversation in conversation_ids):
        return None
    return [
        f"c:{conversation}" if conversation is not None else f"e:{example_id}"
        for conversation, example_id in zip(conversation_ids, example_ids, strict=True)
    ]


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
        tools: The tools the example offered, as its row holds them; the output
            format's decoder receives them (one whose values are untyped text
            types them by these schemas). Empty when the caller has none.
        conversation_id: The conversation the example is a turn of; turns of
            one conversation are resampled and tested together. ``None`` for
            a single-turn example (a split without conversations).
        multi_turn: A multi-turn question's ``multi_turn`` field (user turns,
            added tools, gold turns, environment); ``None`` on any other row.
        turns: A multi-turn question's trajectory: per user turn, the model's
            raw output at each step (``raw_text`` is then their transcript).
    """

    example_id: str
    language: str
    source_example_id: str | None
    gold_call: Mapping[str, Any] | None
    raw_text: str
    prompt_sha256: str | None = None
    gold_calls: tuple[Mapping[str, Any], ...] | None = None
    slice_values: tuple[tuple[str, str], ...] = ()
    tools: Sequence[Mapping[str, Any]] = ()
    conversation_id: str | None = None
    multi_turn: Mapping[str, Any] | None = None
    turns: tuple[tuple[str, ...], ...] | None = None

    @property
    def expected_calls(self) -> tuple[Mapping[str, Any], ...]:
        """Every expected call, in the given order."""
        if self.gold_calls is not None:
            return self.gold_calls
        return () if self.gold_call is None else (self.gold_call,)


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
        conversation_id: The conversation it is a turn of (``None``: single-turn).
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
    conversation_id: str | None = None

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

    @classmethod
    def from_rows(
        cls,
        name: str,
        members: Sequence[int],
        prompts: Sequence[str | None],
        numerators: NDArray[np.int64],
        denominators: NDArray[np.int64],
        metric_names: Sequence[str],
    ) -> SliceResult:
        """The one way a slice is built: its rows' exact sums and prompt-set digest.

        Scoring builds every slice with it and the report reader recomputes
        every stored slice with it, so a language slice, a field slice and a
        re-read slice can never disagree on how a slice is summed or digested.

        Args:
            name: The slice's name (language or ``F:V``).
            members: The rows in the slice, in row order.
            prompts: Every row's prompt digest (``None`` where unknown).
            numerators: ``(n, m)`` components of every row.
            denominators: Same shape.
            metric_names: One name per column.
        """
        rows = np.array(members, dtype=np.int64)
        chosen = [prompts[row] for row in members]
        return cls(
            slice=name,
            examples=len(members),
            metrics=metrics_from_components(numerators[rows], denominators[rows], metric_names),
            prompt_set_sha256=(
                prompt_set_digest([prompt or "" for prompt in chosen])
                if all(prompt is not None for prompt in chosen)
                else None
            ),
        )


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
        format_mismatch: Set when ``output_format`` found its call syntax in
            under a fifth of the outputs while another format reads calls in
            more of them: the scores then measure the format, not the model.
        calls_in_reasoning: Outputs that made no call in their answer but wrote
            the format's call syntax while reasoning (``<think>``, harmony's
            ``analysis`` channel); they score as making no call.
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
    format_mismatch: FormatMismatch | None = None
    calls_in_reasoning: int = 0

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

    @property
    def clusters(self) -> list[str] | None:
        """Each row's resampling unit (:func:`cluster_labels`); ``None`` without conversations."""
        return cluster_labels(
            [example.conversation_id for example in self.examples],
            [example.example_id for example in self.examples],
        )


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
        dataset: The MLflow evaluation dataset the split was read from, if any.
        chat_template_kwargs: The extra template variables every prompt was
            rendered with (``--chat-template-kwargs``).
        template_date: The day the template's clock was fixed to while every
            prompt was rendered (``--template-date``), or ``None``.
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
    dataset: DatasetRef | None = None
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    template_date: str | None = None

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
