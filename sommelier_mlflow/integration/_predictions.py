"""Score a table of model outputs and gold calls, as the evaluator plugin sees it.

``mlflow.models.evaluate`` hands the evaluator columns, not a test split and
generation files: outputs, gold calls, and optionally languages, ids and root
ids. This module turns those columns into completions and scores them with
the same pure function an arm uses (``score_completions``), so slices,
matched-pair gaps and their bootstrap intervals are computed exactly as for
an arm, and adds the optional catalog measures per row.

An arm's report certifies *how* its outputs were produced (model identity,
decoding, prompt digests). Here nothing is known about that, and nothing is
invented: the result is a smaller
:class:`~sommelier_mlflow.evaluation.PredictionsReport` with the metrics,
slices, gaps and bootstrap settings and no provenance fields. Its gap seeds use the base-arm
label (``gap/base/<language>``), so evaluating an arm's outputs here
reproduces that arm's gap intervals.

Nothing here imports MLflow: the benchmark scores 10,000 rows through this
function directly to measure what MLflow adds around it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.data import (
    OVERALL,
    conversation_slice_values,
    messages_problem,
    validate_language,
)
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.evaluation import (
    AnsweredExample,
    BootstrapSettings,
    PredictionsReport,
    score_completions,
)
from sommelier_mlflow.integration._keys import evaluation_metric_keys
from sommelier_mlflow.metrics import BaseMeasure, MeasureSpec
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    ScoringMetric,
    completion_text,
    is_missing,
    scoring_metrics,
    scoring_mode,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

__all__ = [
    "table_columns",
    "PredictionScores",
    "extra_metric_keys",
    "renamed_option",
    "score_predictions",
]

_T = TypeVar("_T")

#: The bootstrap label of the evaluator's gaps (see the module docstring).
_GAP_SCOPE: Final = "base"
_AGGREGATES: Final = ("mean", "min", "max")


def table_columns(metrics: Sequence[ScoringMetric[Any]] | None = None) -> tuple[str, ...]:
    """The per-example table's columns before any catalog-metric columns.

    Args:
        metrics: The scored metrics (default: the registry's ``single`` mode).
    """
    chosen = scoring_metrics() if metrics is None else metrics
    flags = [column for metric in chosen if metric.binary for column in metric.table_columns()]
    counts = [column for metric in chosen if not metric.binary for column in metric.table_columns()]
    return ("example_id", "language", "parse_status", *flags, *counts, "raw_text")


@dataclass(frozen=True)
class PredictionScores:
    """What the evaluator logs and returns.

    Attributes:
        report: The evaluator report.
        table_rows: One flat row per input row, in input order.
        metrics: Every MLflow metric key (the mode's metrics per slice, gaps,
            and the catalog-metric aggregates).
    """

    report: PredictionsReport
    table_rows: list[dict[str, Any]]
    metrics: dict[str, float] = field(default_factory=dict)


def _ids(example_ids: Sequence[object] | None, count: int) -> list[str]:
    if example_ids is None:
        return [str(index) for index in range(count)]
    ids: list[str] = []
    for row, value in enumerate(example_ids):
        if is_missing(value) or isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ConfigError(f"row {row}: example id must be a string or integer, got {value!r}")
        text = str(value)
        if not text:
            raise ConfigError(f"row {row}: example id is empty")
        ids.append(text)
    seen: set[str] = set()
    repeated: set[str] = set()
    for text in ids:
        (repeated if text in seen else seen).add(text)
    duplicates = sorted(repeated)
    if duplicates:
        raise ConfigError(
            f"example ids must be unique; duplicated: {', '.join(map(repr, duplicates[:5]))}"
        )
    return ids


def _languages(languages: Sequence[object] | None, count: int, default: str) -> list[str]:
    if languages is None:
        return [default] * count
    out: list[str] = []
    for row, value in enumerate(languages):
        if is_missing(value) or value == "":
            out.append(default)
            continue
        try:
            out.append(validate_language(value))
        except InputError as exc:
            raise ConfigError(f"row {row}: {exc}") from exc
    return out


def _sources(sources: Sequence[object] | None, count: int) -> list[str | None]:
    if sources is None:
        return [None] * count
    out: list[str | None] = []
    for row, value in enumerate(sources):
        if is_missing(value) or value == "":
            out.append(None)
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            out.append(str(value))
        else:
            raise ConfigError(
                f"row {row}: source example id must be a string, an integer or empty, got {value!r}"
            )
    return out


def _tool_lists(tools: Sequence[object] | None, count: int) -> list[tuple[Any, ...]]:
    """Each row's offered tools: a list of tool schemas or its JSON text; empty cells offer none.

    The output format's decoder receives them; a format that types values
    by the schemas needs them, every other ignores them.
    """
    if tools is None:
        return [()] * count
    out: list[tuple[Any, ...]] = []
    for row, value in enumerate(tools):
        if isinstance(value, (str, bytes)):
            try:
                value = loads(value)
            except JSONDecodeError as exc:
                raise ConfigError(f"row {row}: tools is text but not valid JSON ({exc})") from exc
        elif not isinstance(value, (list, tuple)) and is_missing(value):
            value = []
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(tool, Mapping) for tool in value
        ):
            raise ConfigError(
                f"row {row}: tools must be a list of tool schemas (or its JSON text), "
                f"got {value!r:.200}"
            )
        out.append(tuple(value))
    return out


def _histories(
    messages: Sequence[object] | None,
    offered: Sequence[Sequence[Any]] | None,
    count: int,
) -> list[list[Any] | None]:
    """Each row's checked conversation history, ``None`` for a single-turn row.

    A history is checked as the split reader checks one (message order, calls
    answered, object arguments; call names against the row's tools when a
    tools column is given).
    """
    if messages is None:
        return [None] * count
    out: list[list[Any] | None] = []
    for row, value in enumerate(messages):
        if isinstance(value, (str, bytes)):
            try:
                value = loads(value)
            except JSONDecodeError as exc:
                raise ConfigError(
                    f"row {row}: messages is text but not valid JSON ({exc})"
                ) from exc
        elif not isinstance(value, (list, tuple)) and is_missing(value):
            out.append(None)
            continue
        history = list(value) if isinstance(value, (list, tuple)) else value
        problem = messages_problem(history, None if offered is None else offered[row])
        if problem is not None or not isinstance(history, list):
            raise ConfigError(f"row {row}: {problem or 'messages must be a list'}")
        out.append(history)
    return out


def _build_metrics(specs: Sequence[MeasureSpec | Mapping[str, Any]]) -> list[BaseMeasure[Any]]:
    built: list[BaseMeasure[Any]] = []
    for index, spec in enumerate(specs):
        if isinstance(spec, Mapping):
            try:
                spec = MeasureSpec.model_validate(dict(spec))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, error['loc'])) or '<spec>'}: {error['msg']}"
                    for error in exc.errors()
                )
                raise ConfigError(
                    f"metrics[{index}] is not a MeasureSpec ({problems}); write "
                    "{'name': <catalog name>, 'config': {...}, 'result_key': optional}"
                ) from None
        if not isinstance(spec, MeasureSpec):
            raise ConfigError(
                f"metrics[{index}] must be a MeasureSpec or a mapping, got {type(spec).__name__}"
            )
        built.append(spec.build())
    return built


def _flatten_result(prefix: str, value: object, out: dict[str, object]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten_result(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


def _safe_key(key: str) -> str:
    # MLflow metric names allow letters, digits, _ - . space / ; '/' would open a section.
    return "".join(ch if ch.isalnum() or ch in "_-. " else "_" for ch in key)


def _numeric(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    return None


def extra_metric_keys(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], languages: Sequence[str]
) -> tuple[dict[str, float], dict[str, dict[str, dict[str, float]]]]:
    """Aggregate numeric and boolean catalog-metric columns per slice.

    Keys are ``<slice>/extra/<column>.mean|.min|.max`` for ``overall`` and each
    language (booleans count as 0/1, so ``.mean`` is a rate). Columns with no
    numeric value in a slice are skipped there.

    Returns:
        The metric keys and the same numbers as a nested summary for the report.
    """
    keys: dict[str, float] = {}
    summary: dict[str, dict[str, dict[str, float]]] = {}
    sections = [(OVERALL, None), *((language, language) for language in sorted(set(languages)))]
    for section, language in sections:
        for column in columns:
            values = [
                number
                for row, row_language in zip(rows, languages, strict=True)
                if language is None or row_language == language
                for number in [_numeric(row.get(column))]
                if number is not None
            ]
            if not values:
                continue
            stats = {
                "mean": math.fsum(values) / len(values),
                "min": min(values),
                "max": max(values),
                "count": float(len(values)),
            }
            summary.setdefault(section, {})[column] = stats
            for aggregate in _AGGREGATES:
                keys[f"{section}/extra/{_safe_key(column)}.{aggregate}"] = stats[aggregate]
    return keys, summary


def renamed_option(
    new: tuple[str, _T | None], old: tuple[str, _T | None], *, stacklevel: int = 3
) -> _T | None:
    """The value of an option given by its name or, with a warning, by its old one.

    ``new`` and ``old`` are ``(name, value)`` pairs, ``None`` meaning not given.
    Options were renamed so that the CLI, the MLproject, the evaluator config
    and Python spell each one alike (``slice_columns`` became ``slice_by``); the
    old name keeps working for one release and says so with a
    ``DeprecationWarning`` pointing at the caller (``stacklevel``).

    Raises:
        ConfigError: Both names given: which one was meant cannot be told.
    """
    (new_name, new_value), (old_name, old_value) = new, old
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ConfigError(f"{old_name} is the old name of {new_name}: give only {new_name}")
    warnings.warn(
        f"{old_name} is renamed {new_name}, its name in the CLI, the MLproject, the "
        f"evaluator config and Python alike; {old_name} is accepted until the next release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return old_value


def score_predictions(
    outputs: Sequence[object],
    gold_calls: Sequence[object],
    *,
    example_ids: Sequence[object] | None = None,
    languages: Sequence[object] | None = None,
    source_example_ids: Sequence[object] | None = None,
    default_language: str = "en",
    seed: int = 0,
    resamples: int = 2000,
    metrics: Sequence[MeasureSpec | Mapping[str, Any]] = (),
    scoring: str = DEFAULT_MODE,
    slice_by: Mapping[str, Sequence[object]] | None = None,
    output_format: str = JSON_FORMAT,
    tools: Sequence[object] | None = None,
    slice_columns: Mapping[str, Sequence[object]] | None = None,
    messages: Sequence[object] | None = None,
) -> PredictionScores:
    """Score outputs against gold calls, with slices, gaps and optional catalog measures.

    Args:
        outputs: Raw output texts (or decoded JSON calls), one per row.
        gold_calls: Gold calls (dicts, JSON strings, or one-element lists).
        example_ids: Unique ids (default: the row position as a string).
        languages: Each row's language (default, and for empty values:
            ``default_language``); gives per-language slices.
        source_example_ids: For a translated row, the id of its root row;
            gives matched-pair language gaps (target minus root).
        default_language: Language of rows without one.
        seed: Base seed of the gap bootstraps.
        resamples: Bootstrap resamples per gap.
        metrics: Catalog measures (``MeasureSpec`` or its mapping) scored on
            every output; the row's gold call is passed as ``reference``.
        scoring: A registered scoring mode: ``single`` (one gold call per row),
            ``calls`` (each gold is a list of zero or more calls; the seven
            calls-mode metrics) or a plugin's.
        slice_by: Extra slice fields, field name to one string per row
            (logged as ``F:<encoded V>/<metric>``, see ``--slice-by``).
        output_format: The registered output format the outputs are written
            in (default ``json``); its decoder version joins ``parser_version``.
        tools: Each row's offered tools (a list of tool schemas or its JSON
            text), handed to the output format's decoder (default: none).
        slice_columns: The old name of ``slice_by``, accepted with a
            ``DeprecationWarning`` until the next release.
        messages: Each row's conversation history before the turn its output
            answers (a list of OpenAI chat messages, or its JSON text; an
            empty cell is a single-turn row). A split with histories gets
            the ``turn:`` and ``after:`` slices (``docs/conversations.md``).

    Returns:
        The evaluator report, the per-example table rows and every metric key.

    Raises:
        ConfigError: Mismatched lengths, malformed rows or metric specs (exit 2).
        InputError: A translation whose root is missing from the rows (exit 2).
        InvariantViolationError: A matched pair whose gold calls differ (exit 5).
    """
    count = len(outputs)
    given = renamed_option(("slice_by", slice_by), ("slice_columns", slice_columns))
    extra_fields = dict(given or {})
    _check_lengths(
        count,
        {
            "gold calls": gold_calls,
            "example ids": example_ids,
            "languages": languages,
            "source example ids": source_example_ids,
            "tools": tools,
            "messages": messages,
            **{f"values of slice column {name!r}": values for name, values in extra_fields.items()},
        },
    )
    validate_language(default_language)
    texts = [
        completion_text(value, where=f"row {row}: output") for row, value in enumerate(outputs)
    ]
    mode = scoring_mode(scoring)
    registered_output_format(output_format)  # an unknown format: exit 2 before any scoring
    gold_sets = [
        mode.gold_calls(value, f"row {row}: gold calls") for row, value in enumerate(gold_calls)
    ]
    row_values = _slice_rows(extra_fields, count)
    ids = _ids(example_ids, count)
    langs = _languages(languages, count, default_language)
    roots = _sources(source_example_ids, count)
    offered = _tool_lists(tools, count)
    histories = _histories(messages, offered if tools is not None else None, count)
    catalog = _build_metrics(metrics)
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=0.95)
    scored = score_completions(
        [
            AnsweredExample(
                example_id=ids[row],
                language=langs[row],
                source_example_id=roots[row],
                gold_call=None,
                raw_text=texts[row],
                gold_calls=gold_sets[row],
                slice_values=tuple(
                    sorted(row_values[row] + conversation_slice_values(histories[row]))
                ),
                tools=offered[row],
            )
            for row in range(count)
        ],
        bootstrap=settings,
        gap_scope=_GAP_SCOPE,
        scoring=scoring,
        slice_by=list(extra_fields),
        output_format=output_format,
    )

    position = {example_id: row for row, example_id in enumerate(ids)}
    rows: list[dict[str, Any]] = [{} for _ in range(count)]
    for table_row in scored.table_rows():
        rows[position[table_row["example_id"]]] = table_row
    references = [mode.catalog_reference(gold) for gold in gold_sets] if catalog else []
    fixed = set(table_columns(scored.metrics_scored))
    extra_columns = _add_catalog_columns(rows, catalog, texts, references, fixed)
    extra_keys, extra_summary = extra_metric_keys(rows, extra_columns, langs)

    report = PredictionsReport.from_scored(scored, settings, extra_summary)
    keys = evaluation_metric_keys(scored)
    keys.update(extra_keys)
    return PredictionScores(report=report, table_rows=rows, metrics=keys)


def _check_lengths(count: int, columns: Mapping[str, Sequence[object] | None]) -> None:
    """Refuse no rows, or a given column whose length is not the outputs' ``count``."""
    for label, column in columns.items():
        if column is not None and len(column) != count:
            raise ConfigError(f"got {count} outputs but {len(column)} {label}; give one per row")
    if count == 0:
        raise ConfigError("there are no rows to evaluate")


def _add_catalog_columns(
    rows: list[dict[str, Any]],
    catalog: Sequence[BaseMeasure[Any]],
    texts: Sequence[str],
    references: Sequence[object],
    fixed: set[str],
) -> list[str]:
    """Score every row with the catalog measures into new table columns; returns their names.

    Raises:
        ConfigError: A metric result that would overwrite a scored column.
    """
    extra_columns: dict[str, None] = {}
    for row_index, table_row in enumerate(rows if catalog else ()):
        merged: dict[str, object] = {}
        for metric in catalog:
            result = metric.score(texts[row_index], reference=references[row_index])
            for key, value in result.items():
                _flatten_result(key, value, merged)
        for key, value in merged.items():
            if key in fixed:
                raise ConfigError(
                    f"catalog measure result {key!r} collides with a table column; "
                    "give the metric another result_key"
                )
            extra_columns.setdefault(key)
            table_row[key] = value
    return list(extra_columns)


def _slice_rows(
    fields: Mapping[str, Sequence[object]], count: int
) -> list[tuple[tuple[str, str], ...]]:
    """Each row's ``(field, value)`` pairs; a slice value must be a non-empty string."""
    rows: list[list[tuple[str, str]]] = [[] for _ in range(count)]
    for name, values in fields.items():
        for row, value in enumerate(values):
            if not isinstance(value, str) or not value:
                raise ConfigError(
                    f"row {row}: slice column {name!r} must hold a non-empty string, "
                    f"got {value!r:.80}"
                )
            rows[row].append((name, value))
    return [tuple(sorted(row)) for row in rows]
