"""Score completions against their gold calls: the per-mode work of scoring.

:func:`score_completions` is a pure function of completions and settings: it
parses each completion once with the scoring mode's parser, compares it with
its gold, sums exact components into overall, language and field-slice
metrics, and measures matched-pair language gaps. Provenance (which split,
which arm, which decoding) is checked before it, in
:mod:`sommelier_mlflow.evaluation._joining`.

Rows are kept in ``example_id`` order (not input order). Every digest, every
per-example array and every bootstrap therefore depends only on the identities
and contents of the rows, so two arms scored from differently ordered files
still line up row for row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Final

import numpy as np
from numpy.typing import NDArray

from sommelier_mlflow._deprecation import warn_renamed
from sommelier_mlflow._gc import paused_gc
from sommelier_mlflow._json import canonical_json
from sommelier_mlflow._progress import SCORING_PROGRESS_MIN, progress_bar
from sommelier_mlflow.data import (
    TURN_SLICE_FIELD,
    check_slice_fields,
    slice_name,
    slice_sections,
    with_conversation_slices,
)
from sommelier_mlflow.errors import InputError, InvariantViolationError
from sommelier_mlflow.evaluation._digests import pair_set_digest
from sommelier_mlflow.evaluation._results import (
    AnsweredExample,
    ExampleResult,
    PairCoverage,
    PairedSlice,
    ScoredExamples,
    SliceResult,
    cluster_labels,
    metrics_from_components,
)
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import paired_bootstrap
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    CallsParseResult,
    ExampleScore,
    FormatHint,
    FormatMismatch,
    OutputFormat,
    Parsed,
    ParseResult,
    ScoringMetric,
    ScoringMode,
    Tools,
    TrajectoryJudge,
    TrajectoryScoring,
    calls_in_reasoning,
    format_diagnosis,
    output_format_hint_order,
    score_components,
    scoring_mode,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

if TYPE_CHECKING:
    from sommelier_mlflow.evaluation._results import BootstrapSettings

__all__ = ["preview_ids", "score_completions"]

_PREVIEW: Final = 5


def preview_ids(ids: Sequence[str]) -> str:
    """Name the first few ids of a list and how many more there are.

    Error messages must point at concrete rows without printing 20,000 ids.
    """
    shown = ", ".join(repr(example_id) for example_id in ids[:_PREVIEW])
    rest = len(ids) - _PREVIEW
    return f"{shown} and {rest} more" if rest > 0 else shown


def _parse_and_match(
    completions: Sequence[AnsweredExample],
    mode: ScoringMode[Any],
    fmt: OutputFormat,
    bar: Any,
    judge: TrajectoryJudge | None,
) -> tuple[list[Parsed], list[Any]]:
    """Parse each completion once the mode's way and match it against its gold.

    Each distinct gold is built once and shared (the match reuses its
    canonical forms). A multi-turn row goes to ``judge`` instead, which reads
    each step of its trajectory and runs it (see :class:`TrajectoryScoring`).
    Parsing is the per-example cost of scoring, so ``bar`` (a progress bar,
    possibly disabled) advances here, once per completion.
    """
    parses: list[Parsed] = []
    matches: list[Any] = []
    golds: dict[str, Any] = {}
    read = _reader(mode, fmt)
    for completion in completions:
        if judge is not None and completion.multi_turn is not None:
            parsed, match = judge(completion, read)
            parses.append(parsed)
            matches.append(match)
            bar.update(1)
            continue
        calls = completion.expected_calls
        problem = mode.gold_problem(len(calls))
        if problem is not None:
            raise InputError(f"example {completion.example_id!r} {problem}")
        key = canonical_json(list(calls))
        gold = golds.get(key)
        if gold is None:
            gold = golds[key] = mode.make_gold(calls)
        # The one parse of this completion; the decoder may type values by the tools.
        parsed = mode.parse(completion.raw_text, fmt, completion.tools)
        parses.append(parsed)
        matches.append(mode.match(parsed, gold))
        bar.update(1)
    return parses, matches


def _trajectory_scoring(
    rows: Sequence[AnsweredExample], mode: ScoringMode[Any]
) -> TrajectoryScoring | None:
    """The mode's trajectory scoring when the rows hold a multi-turn question, else ``None``.

    Raises:
        InputError: A multi-turn row in a mode that cannot run trajectories.
    """
    multi = [row.example_id for row in rows if row.multi_turn is not None]
    if not multi:
        return None
    if mode.trajectories is None:
        raise InputError(
            f"{len(multi)} example(s) are multi-turn questions ({preview_ids(multi)}), which "
            f"scoring mode {mode.name!r} cannot score; score them with --scoring bfcl"
        )
    return mode.trajectories


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
        completion.conversation_id,
    )


def _component_arrays(
    matches: Sequence[Any], metrics: Sequence[ScoringMetric[Any]]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    flat_numerators, flat_denominators = score_components(matches, metrics)
    shape = (len(matches), len(metrics))
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
    """Matched-pair gaps: per target language, its pairs, their metrics and bootstrap.

    In a split with conversations, a pair belongs to its root's conversation,
    and the bootstrap resamples conversations of pairs (all the pairs of one
    conversation together), as the deltas do.
    """
    clusters = cluster_labels(
        [completion.conversation_id for completion in completions],
        [completion.example_id for completion in completions],
    )
    row_of = {completion.example_id: row for row, completion in enumerate(completions)}
    translated: dict[str, list[int]] = defaultdict(list)
    for row, completion in enumerate(completions):
        if completion.source_example_id is not None:
            translated[completion.language].append(row)

    paired: dict[str, PairedSlice] = {}
    for language in sorted(translated):
        pair_rows, unmatched = _pair_rows(completions, language, translated[language], row_of)
        root_language = completions[pair_rows[0][0]].language
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
            clusters=None if clusters is None else [clusters[root] for root in roots.tolist()],
        )
        pair_digest = _pair_digest(completions, pair_rows)
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


def _pair_rows(
    completions: Sequence[AnsweredExample],
    language: str,
    target_rows: Sequence[int],
    row_of: Mapping[str, int],
) -> tuple[list[tuple[int, int]], int]:
    """Join one language's translated rows to their evaluated roots.

    Returns:
        ``(root_row, target_row)`` per pair, in target order (all roots of one
        language), and how many targets name a root that was not evaluated.

    Raises:
        InputError: A root of the same language, no pair at all, or roots
            in several languages.
        InvariantViolationError: A pair whose gold calls differ.
    """
    pair_rows: list[tuple[int, int]] = []
    unmatched = 0
    for target_row in target_rows:
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
        if canonical_json(list(root.expected_calls)) != canonical_json(list(target.expected_calls)):
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
    return pair_rows, unmatched


def _pair_digest(
    completions: Sequence[AnsweredExample], pair_rows: Sequence[tuple[int, int]]
) -> str | None:
    """The pair-set digest of the pairs and their prompts (``None`` when a prompt is unknown)."""
    pairs = [(completions[root], completions[target]) for root, target in pair_rows]
    if any(root.prompt_sha256 is None or target.prompt_sha256 is None for root, target in pairs):
        return None
    return pair_set_digest(
        (root.example_id, target.example_id, root.prompt_sha256 or "", target.prompt_sha256 or "")
        for root, target in pairs
    )


@paused_gc()  # parsing builds objects per example; see sommelier_mlflow._gc
def score_completions(
    answered: Iterable[AnsweredExample] = (),
    *,
    bootstrap: BootstrapSettings,
    gap_scope: str,
    metrics: Sequence[ScoringMetric[Any]] | None = None,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
    output_format: str = JSON_FORMAT,
    completions: Iterable[AnsweredExample] | None = None,
) -> ScoredExamples:
    """Score completions against their gold calls: rows, slices and matched-pair gaps.

    This is the whole of scoring, as a pure function of its arguments: no
    file, model identity or decoding is involved, so an arm (via
    :func:`score_run`) and the evaluator plugin score identically. Each
    completion is parsed exactly once.

    Args:
        answered: The answered examples (each an example with its
            completion), one per example, in any order; ids must be unique.
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
            come first (``calls`` adds ``calls:0``, ``calls:1``, ``calls:2+``);
            completions of conversation turns (whose ``slice_values`` carry
            ``turn``) add ``turn`` and ``after`` last.
        progress: Allow a progress bar (examples/s, ETA) on stderr. It shows
            only for more than :data:`SCORING_PROGRESS_MIN` completions, where
            scoring takes long enough to be worth watching.
        output_format: The registered output format the completions are
            written in (default ``json``: the mode's own parser).
        completions: The old name of ``answered`` (it takes answered
            examples, not the generation layer's ``Completion`` objects);
            accepted with a ``DeprecationWarning`` until the next release.

    Returns:
        The scored rows in ``example_id`` order and every aggregate.

    Raises:
        InputError: No completions, duplicate ids, a malformed gold call,
            translated rows none of whose roots is among the completions, or
            both ``answered`` and its old name ``completions`` given.
        InvariantViolationError: A matched pair whose gold calls differ.
    """
    if completions is not None:
        if answered != ():
            raise InputError(
                "score_completions got both answered= and its old name completions=: "
                "give only answered="
            )
        warn_renamed("score_completions(completions=...)", "score_completions(answered=...)")
        answered = completions
    mode = scoring_mode(scoring)
    fmt = registered_output_format(output_format)
    rows = _in_id_order(answered)
    fields = with_conversation_slices(
        check_slice_fields(slice_by, scoring=scoring),
        any(TURN_SLICE_FIELD in dict(row.slice_values) for row in rows),
    )
    trajectories = _trajectory_scoring(rows, mode)
    chosen = mode.metrics() if metrics is None else tuple(metrics)
    if trajectories is not None and metrics is None:
        chosen += trajectories.metrics
    names = tuple(metric.name for metric in chosen)
    # One sandbox per scoring call, opened only for a split with multi-turn rows.
    with (
        nullcontext(None) if trajectories is None else trajectories.open() as judge,
        progress_bar(
            len(rows), "score", enabled=progress and len(rows) > SCORING_PROGRESS_MIN
        ) as bar,
    ):
        parses, matches = _parse_and_match(rows, mode, fmt, bar, judge)
    hint, mismatch = _format_diagnosis(rows, parses, mode, fmt)
    in_reasoning = (
        0
        if fmt.decode is None
        else calls_in_reasoning(
            [completion.raw_text for completion in rows],
            [parsed.status for parsed in parses],
            fmt.decode,
            [completion.tools for completion in rows],
        )
    )
    numerators, denominators = _component_arrays(matches, chosen)
    values = [_slice_values(completion, fields, mode) for completion in rows]
    results = tuple(
        _result_row(completion, parsed, ExampleScore(names, tuple(top), tuple(bottom)), row_values)
        for completion, parsed, top, bottom, row_values in zip(
            rows, parses, numerators.tolist(), denominators.tolist(), values, strict=True
        )
    )
    slices = _slice_results(
        sorted({completion.language for completion in rows}),
        [(completion.language,) for completion in rows],
        rows,
        numerators,
        denominators,
        names,
    )
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
        format_hint=hint,
        format_mismatch=mismatch,
        calls_in_reasoning=in_reasoning,
    )


def _in_id_order(completions: Iterable[AnsweredExample]) -> list[AnsweredExample]:
    """The completions sorted by ``example_id``; none, or a repeated id, is refused."""
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
    return rows


def _reader(mode: ScoringMode[Any], fmt: OutputFormat) -> Callable[[str, Tools], Parsed]:
    """``mode``'s parse of an output written in ``fmt``, as a ``(text, tools)`` decoder."""

    def read(text: str, tools: Tools) -> Parsed:
        return mode.parse(text, fmt, tools)

    return read


def _format_diagnosis(
    rows: Sequence[AnsweredExample],
    parses: Sequence[Parsed],
    mode: ScoringMode[Any],
    fmt: OutputFormat,
) -> tuple[FormatHint | None, FormatMismatch | None]:
    """Whether another registered format reads calls from outputs ``fmt`` gets none from."""
    others = {
        name: _reader(mode, registered_output_format(name))
        for name in output_format_hint_order()
        if name != fmt.name
    }
    texts = [completion.raw_text for completion in rows]
    statuses = [parsed.status for parsed in parses]
    tools = [completion.tools for completion in rows]
    return format_diagnosis(texts, statuses, fmt.name, others, tools)


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
    keys = [tuple(slice_name(name, value) for name, value in row_values) for row_values in values]
    ordered = sorted(
        {key for row_keys in keys for key in row_keys},
        key=lambda key: (fields.index(key.split(":", 1)[0]), key),
    )
    slice_sections(ordered)  # refuses two slices that would share MLflow keys (exit 2)
    return _slice_results(ordered, keys, rows, numerators, denominators, names)


def _slice_results(
    ordered: Sequence[str],
    keys: Sequence[tuple[str, ...]],
    rows: Sequence[AnsweredExample],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
    names: tuple[str, ...],
) -> dict[str, SliceResult]:
    """Every slice's result, language or ``F:V`` alike (see :meth:`SliceResult.from_rows`).

    Args:
        ordered: The slice names, in the order the result keeps.
        keys: Per row, the names of the slices it belongs to.
        rows: The scored completions, aligned with ``keys``.
        numerators: ``(n, m)`` components of ``rows``.
        denominators: Same shape.
        names: The metric names, one per column.
    """
    members: dict[str, list[int]] = defaultdict(list)
    for row, row_keys in enumerate(keys):
        for key in row_keys:
            members[key].append(row)
    prompts = [completion.prompt_sha256 for completion in rows]
    return {
        key: SliceResult.from_rows(key, members[key], prompts, numerators, denominators, names)
        for key in ordered
    }
