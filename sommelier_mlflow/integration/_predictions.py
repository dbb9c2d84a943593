"""Score a table of model outputs and gold calls, as the evaluator plugin sees it.

``mlflow.models.evaluate`` hands the evaluator columns, not a test split and
generation files: outputs, gold calls, and optionally languages, ids and root
ids. This module turns those columns into the rows the evaluation layer
scores, runs the very same ``score_run`` (so slices, matched-pair gaps and
their bootstrap intervals are computed exactly as for an arm), and adds the
optional catalog metrics per row.

An arm's report certifies *how* its outputs were produced (model identity,
decoding, prompt digests). Here nothing is known about that, so the result is
a smaller *evaluator report* (``sommelier_mlflow.evaluator_report.v1``) that
keeps the metrics, slices, gaps and bootstrap settings and drops every
provenance field; internally the rows get placeholder prompts and decoding
that never leave this module.

Nothing here imports MLflow: the benchmark scores 10,000 rows through this
function directly to measure what MLflow adds around it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads, sha256_text
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    ModelIdentity,
    TestExample,
    TestSplit,
    schema_version,
    validate_language,
)
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.evaluation import score_run
from sommelier_mlflow.integration._keys import OVERALL, evaluation_metric_keys
from sommelier_mlflow.metrics import BaseMetric, MetricSpec
from sommelier_mlflow.toolcalls import is_tool_call, parse_tool_call

__all__ = [
    "EVALUATOR_REPORT_SCHEMA",
    "PredictionScores",
    "TABLE_COLUMNS",
    "extra_metric_keys",
    "gold_call_of",
    "output_text_of",
    "score_predictions",
]

EVALUATOR_REPORT_SCHEMA: Final = schema_version("evaluator_report")
#: The columns of the per-example table, before any catalog-metric columns.
TABLE_COLUMNS: Final = (
    "example_id",
    "language",
    "parse_status",
    "name_correct",
    "arguments_correct",
    "full_call_correct",
    "argument_f1_numerator",
    "argument_f1_denominator",
    "raw_text",
)
_PROMPT_TEXT: Final = ""
_PROMPT_SHA256: Final = sha256_text(_PROMPT_TEXT)
# Never reported: score_run needs a decoding and an identity to check records against.
_DECODING: Final = Decoding(max_new_tokens=1, batch_size=1)
_IDENTITY: Final = ModelIdentity("mlflow-evaluate", None, "mlflow-evaluate", None)
_AGGREGATES: Final = ("mean", "min", "max")


@dataclass(frozen=True)
class PredictionScores:
    """What the evaluator logs and returns.

    Attributes:
        report: The evaluator report document.
        table_rows: One flat row per input row, in input order.
        metrics: Every MLflow metric key (the five metrics per slice, gaps,
            and the catalog-metric aggregates).
    """

    report: dict[str, Any]
    table_rows: list[dict[str, Any]]
    metrics: dict[str, float] = field(default_factory=dict)


def _missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return type(value).__name__ in {"NAType", "NaTType"}


def output_text_of(value: object, row: int) -> str:
    """The raw output text of one row.

    A string is the model's raw output. A mapping or list (an output already
    decoded from JSON) is scored as its canonical JSON text, so a dict that is
    a valid call parses as ``ok`` and anything else as ``invalid_shape``.

    Raises:
        ConfigError: A missing (None/NaN) or non-text output.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        try:
            return canonical_json(dict(value) if isinstance(value, Mapping) else list(value))
        except TypeError as exc:
            raise ConfigError(f"row {row}: output is not JSON-serialisable ({exc})") from exc
    if _missing(value):
        raise ConfigError(
            f"row {row}: the output is missing (None/NaN); every row needs the model's raw "
            "output text (use '' for an empty output: it scores as no_json)"
        )
    raise ConfigError(
        f"row {row}: output must be the model's raw text (str) or a decoded JSON call, "
        f"got {type(value).__name__}"
    )


def gold_call_of(value: object, row: int) -> dict[str, Any]:
    """The gold call of one row, from a dict, a JSON string, or a one-element list of either.

    Raises:
        ConfigError: Anything that is not exactly one ``{name, arguments}`` call.
    """
    candidate = value
    if isinstance(candidate, str):
        try:
            candidate = loads(candidate)
        except JSONDecodeError as exc:
            raise ConfigError(
                f"row {row}: gold call is a string but not valid JSON ({exc})"
            ) from exc
    if isinstance(candidate, (list, tuple)):
        if len(candidate) != 1:
            raise ConfigError(
                f"row {row}: gold call list must hold exactly one call, got {len(candidate)}"
            )
        candidate = candidate[0]
    if isinstance(candidate, Mapping) and not isinstance(candidate, dict):
        candidate = dict(candidate)
    if not is_tool_call(candidate):
        raise ConfigError(
            f"row {row}: gold call must be {{'name': non-empty str, 'arguments': object}} "
            f"(a dict or its JSON string), got {value!r}"
        )
    assert isinstance(candidate, dict)  # is_tool_call guarantees it
    return candidate


def _ids(example_ids: Sequence[object] | None, count: int) -> list[str]:
    if example_ids is None:
        return [str(index) for index in range(count)]
    ids: list[str] = []
    for row, value in enumerate(example_ids):
        if _missing(value) or isinstance(value, bool) or not isinstance(value, (str, int)):
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
        if _missing(value) or value == "":
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
        if _missing(value) or value == "":
            out.append(None)
        elif isinstance(value, (str, int)) and not isinstance(value, bool):
            out.append(str(value))
        else:
            raise ConfigError(
                f"row {row}: source example id must be a string, an integer or empty, got {value!r}"
            )
    return out


def _build_metrics(specs: Sequence[MetricSpec | Mapping[str, Any]]) -> list[BaseMetric[Any]]:
    built: list[BaseMetric[Any]] = []
    for index, spec in enumerate(specs):
        if isinstance(spec, Mapping):
            try:
                spec = MetricSpec.model_validate(dict(spec))
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, error['loc'])) or '<spec>'}: {error['msg']}"
                    for error in exc.errors()
                )
                raise ConfigError(
                    f"metrics[{index}] is not a MetricSpec ({problems}); write "
                    "{'name': <catalog name>, 'config': {...}, 'result_key': optional}"
                ) from None
        if not isinstance(spec, MetricSpec):
            raise ConfigError(
                f"metrics[{index}] must be a MetricSpec or a mapping, got {type(spec).__name__}"
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
    metrics: Sequence[MetricSpec | Mapping[str, Any]] = (),
) -> PredictionScores:
    """Score outputs against gold calls, with slices, gaps and optional catalog metrics.

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
        metrics: Catalog metrics (``MetricSpec`` or its mapping) scored on
            every output; the row's gold call is passed as ``reference``.

    Returns:
        The evaluator report, the per-example table rows and every metric key.

    Raises:
        ConfigError: Mismatched lengths, malformed rows or metric specs (exit 2).
        InputError: A translation whose root is missing from the rows (exit 2).
        InvariantViolationError: A matched pair whose gold calls differ (exit 5).
    """
    count = len(outputs)
    for label, column in (
        ("gold calls", gold_calls),
        ("example ids", example_ids),
        ("languages", languages),
        ("source example ids", source_example_ids),
    ):
        if column is not None and len(column) != count:
            raise ConfigError(f"got {count} outputs but {len(column)} {label}; give one per row")
    if count == 0:
        raise ConfigError("there are no rows to evaluate")
    validate_language(default_language)
    texts = [output_text_of(value, row) for row, value in enumerate(outputs)]
    golds = [gold_call_of(value, row) for row, value in enumerate(gold_calls)]
    ids = _ids(example_ids, count)
    langs = _languages(languages, count, default_language)
    roots = _sources(source_example_ids, count)
    catalog = _build_metrics(metrics)

    examples = tuple(
        TestExample(
            example_id=ids[row],
            language=langs[row],
            query="",
            tools=[],
            gold_call=golds[row],
            source_example_id=roots[row],
            prompt_text=_PROMPT_TEXT,
            prompt_sha256=_PROMPT_SHA256,
        )
        for row in range(count)
    )
    decoding = _DECODING.to_dict()
    records = []
    for row in range(count):
        parsed = parse_tool_call(texts[row])
        records.append(
            GenerationRecord(
                example_id=ids[row],
                model_kind="base",
                language=langs[row],
                prompt_sha256=_PROMPT_SHA256,
                raw_text=texts[row],
                parse_status=parsed.status,
                parsed_call=parsed.call,
                decoding=decoding,
            )
        )
    scored = score_run(
        TestSplit(path="<mlflow.models.evaluate data>", sha256="", examples=examples),
        records,
        model_kind="base",
        model_identity=_IDENTITY,
        adapter=None,
        seed=seed,
        resamples=resamples,
    )
    full = scored.to_report()

    by_id = {result.example_id: result.table_row() for result in scored.examples}
    rows = [by_id[example_id] for example_id in ids]
    extra_columns: dict[str, None] = {}
    for row_index, table_row in enumerate(rows if catalog else ()):
        merged: dict[str, object] = {}
        for metric in catalog:
            for key, value in metric.score(texts[row_index], reference=golds[row_index]).items():
                _flatten_result(key, value, merged)
        for key, value in merged.items():
            if key in TABLE_COLUMNS:
                raise ConfigError(
                    f"catalog metric result {key!r} collides with a table column; "
                    "give the metric another result_key"
                )
            extra_columns.setdefault(key)
            table_row[key] = value
    extra_keys, extra_summary = extra_metric_keys(rows, list(extra_columns), langs)

    report: dict[str, Any] = {
        "schema_version": EVALUATOR_REPORT_SCHEMA,
        "parser_version": full["identity"]["parser_version"],
        "metric_names": full["metric_names"],
        "examples": full["examples"],
        "metrics": full["metrics"],
        "slices": {
            language: {"examples": entry["examples"], "metrics": entry["metrics"]}
            for language, entry in full["slices"].items()
        },
        "paired_slices": {
            language: {key: value for key, value in entry.items() if key != "pair_set_sha256"}
            for language, entry in full["paired_slices"].items()
        },
        "bootstrap": full["bootstrap"],
        "extra_metrics": extra_summary,
    }
    keys = evaluation_metric_keys(report)
    keys.update(extra_keys)
    return PredictionScores(report=report, table_rows=rows, metrics=keys)
