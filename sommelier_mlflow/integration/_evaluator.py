"""The ``sommelier`` evaluator: the scoring mode's metrics inside ``mlflow.models.evaluate``.

Loaded lazily by :mod:`sommelier_mlflow.integration.evaluator`; importing this
module imports MLflow.

MLflow does not log what an evaluator returns (except, with a logged model, to
link it to the model), so the evaluator logs everything itself, through the
same functions as the command line: the metric keys in one batch, the
``sommelier.parser_version`` tag, ``sommelier/evaluator_report.json`` and the
per-example table ``sommelier/examples.json``. It returns the same metrics
and artifacts in ``EvaluationResult``.

Configuration (``evaluator_config``; flat with ``evaluators="sommelier"``, or
keyed ``{"sommelier": {...}}`` with a list of evaluators; MLflow passes each
evaluator its own dict either way):

``language_column`` (default ``"language"`` if present)
    Column of each row's language; gives ``<language>/...`` slices.
``example_id_column`` (default ``"example_id"`` if present)
    Unique row ids; otherwise the row position is the id.
``source_example_id_column`` (default ``"source_example_id"`` if present)
    On a translated row, the id of its root row; gives ``gap/<language>/...``.
``tools_column`` (default ``"tools"`` if present)
    Each row's offered tools (a list of tool schemas, or its JSON text),
    handed to the output format's decoder, which may type untyped values by
    them.
``messages_column`` (default ``"messages"`` if present)
    Each row's conversation history before the turn its output answers (a
    list of OpenAI chat messages, or its JSON text; an empty cell is a
    single-turn row); gives the ``turn:`` and ``after:`` slices
    (``docs/conversations.md``).
``default_language`` (default ``"en"``)
    Language of rows without one.
``seed``, ``resamples`` (default ``0``, ``2000``)
    Paired-bootstrap settings of the gap intervals.
``metrics`` (default none)
    Catalog measures as ``MeasureSpec`` objects or their mappings (``{"name":
    "CountsMetric", "config": {...}}``), scored on every output; numeric and
    boolean results are logged as ``<slice>/extra/<key>.mean|.min|.max`` and as
    table columns.
``log_table`` (default ``True``)
    Whether to log the per-example table.
``scoring`` (default ``"single"``)
    ``"calls"`` scores rows whose gold is a list of zero or more calls (``[]``
    when no tool applies) with the seven calls-mode metrics and parser
    ``sommelier.calls_parser.v1``, sliced by call count (``calls:0``,
    ``calls:1``, ``calls:2+``).
``output_format`` (default ``"json"``)
    The registered output format the outputs are written in (``hermes``,
    ``pythonic``, ... or a plugin's); its decoder version joins the report's
    ``parser_version``.
``slice_by`` (default none)
    Feature columns to slice by besides language (string values), as a list
    or a comma-separated string like ``-P slice_by=...``; logged as
    ``<column>:<encoded value>/<metric>``. Its old name ``slice_columns`` is
    accepted until the next release, with a ``DeprecationWarning``.
``chat_template_kwargs`` (default none)
    The extra chat-template variables the outputs' prompts were rendered with
    (a mapping or its JSON text, as ``--chat-template-kwargs``: ``{"enable_thinking":
    false}``); checked and logged as the param ``sommelier.chat_template_kwargs``
    (canonical JSON), so runs rendered differently are told apart.
``template_date`` (default none)
    The day the prompts' chat-template clock was fixed to (``YYYY-MM-DD``, as
    ``--template-date``); checked and logged as the param ``sommelier.template_date``.
``col_mapping``
    Consumed by MLflow itself (renames the targets/predictions columns); accepted.

A column named explicitly but absent, an unknown key or a malformed row raises
:class:`EvaluatorConfigError`, which is both a
:class:`~sommelier_mlflow.errors.ConfigError` and an ``MlflowException``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models.evaluation import EvaluationResult, ModelEvaluator
from mlflow.models.evaluation.artifacts import JsonEvaluationArtifact
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow._redact import redact_value
from sommelier_mlflow.data import (
    check_slice_fields,
    read_chat_template_kwargs,
    read_template_date,
    slice_field_names,
)
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from sommelier_mlflow.integration._evaluator_names import EVALUATOR_NAME, MODEL_TYPE
from sommelier_mlflow.integration._predictions import (
    PredictionScores,
    renamed_option,
    score_predictions,
)
from sommelier_mlflow.integration._primitives import (
    ARTIFACT_DIR,
    EXAMPLES_TABLE,
    artifact_uri,
    log_example_table,
    log_json_artifact,
    log_metrics_batch,
    log_params,
    set_sommelier_tags,
)
from sommelier_mlflow.metrics import MeasureSpec
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    output_format_names,
    scoring_mode_names,
)

__all__ = [
    "MODEL_TYPE",
    "EVALUATOR_REPORT_ARTIFACT",
    "RENAMED_KEYS",
    "EvaluatorConfigError",
    "SommelierEvaluator",
]

EVALUATOR_REPORT_ARTIFACT: Final = f"{ARTIFACT_DIR}/evaluator_report.json"
_COLUMN_DEFAULTS: Final = {
    "language_column": "language",
    "example_id_column": "example_id",
    "source_example_id_column": "source_example_id",
    "tools_column": "tools",
    "messages_column": "messages",
}
#: Keys renamed to the name the CLI, the MLproject and Python give the option
#: (issue 31), old to new; an old key is read, with a DeprecationWarning, for one release.
RENAMED_KEYS: Final = {"slice_columns": "slice_by"}
_KNOWN_KEYS: Final = frozenset(
    {
        *_COLUMN_DEFAULTS,
        *RENAMED_KEYS,
        "default_language",
        "seed",
        "resamples",
        "metrics",
        "log_table",
        "col_mapping",
        "scoring",
        "slice_by",
        "output_format",
        "chat_template_kwargs",
        "template_date",
    }
)
#: The param the declared chat-template variables are logged under.
CHAT_TEMPLATE_KWARGS_PARAM: Final = "sommelier.chat_template_kwargs"
#: The param the declared fixed template day is logged under.
TEMPLATE_DATE_PARAM: Final = "sommelier.template_date"


class EvaluatorConfigError(ConfigError, MlflowException):
    """A bad evaluator configuration or dataset.

    It is a :class:`~sommelier_mlflow.errors.ConfigError` (exit 2) for code that
    handles this package's errors, and an ``MlflowException`` with
    ``INVALID_PARAMETER_VALUE`` for code around ``mlflow.models.evaluate``.
    """

    def __init__(self, message: str) -> None:
        MlflowException.__init__(self, message, error_code=INVALID_PARAMETER_VALUE)


@dataclass(frozen=True)
class _Config:
    columns: dict[str, str | None]
    explicit: frozenset[str]
    default_language: str
    seed: int
    resamples: int
    metrics: tuple[MeasureSpec | Mapping[str, Any], ...]
    log_table: bool
    scoring: str = DEFAULT_MODE
    slice_by: tuple[str, ...] = ()
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    output_format: str = JSON_FORMAT
    template_date: str | None = None


def _parse_config(raw: object) -> _Config:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise EvaluatorConfigError(
            f"evaluator_config for {EVALUATOR_NAME!r} must be a dict, got {type(raw).__name__}"
        )
    config = dict(raw)
    # evaluators="sommelier" passes the config through as given; accept the keyed form too.
    if set(config) == {EVALUATOR_NAME} and isinstance(config[EVALUATOR_NAME], Mapping):
        config = dict(config[EVALUATOR_NAME])
    unknown = sorted(set(config) - _KNOWN_KEYS)
    if unknown:
        raise EvaluatorConfigError(
            f"unknown {EVALUATOR_NAME!r} evaluator_config key(s) {unknown}; "
            f"allowed: {sorted(_KNOWN_KEYS)}"
        )
    for old, new in RENAMED_KEYS.items():
        try:
            config[new] = renamed_option((new, config.get(new)), (old, config.pop(old, None)))
        except ConfigError as exc:
            raise EvaluatorConfigError(str(exc)) from exc
    columns: dict[str, str | None] = {}
    for key, default in _COLUMN_DEFAULTS.items():
        value = config.get(key, default)
        if value is not None and (not isinstance(value, str) or not value):
            raise EvaluatorConfigError(f"{key} must be a column name (str) or None, got {value!r}")
        columns[key] = value
    default_language = config.get("default_language", "en")
    if not isinstance(default_language, str):
        raise EvaluatorConfigError(f"default_language must be a string, got {default_language!r}")
    seed = config.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EvaluatorConfigError(f"seed must be an integer, got {seed!r}")
    resamples = config.get("resamples", 2000)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise EvaluatorConfigError(f"resamples must be a positive integer, got {resamples!r}")
    metrics = config.get("metrics", ())
    if isinstance(metrics, (MeasureSpec, Mapping, str)) or not isinstance(metrics, Sequence):
        raise EvaluatorConfigError(
            "metrics must be a list of MeasureSpec or {'name': ..., 'config': {...}} mappings, "
            f"got {metrics!r}"
        )
    log_table = config.get("log_table", True)
    if not isinstance(log_table, bool):
        raise EvaluatorConfigError(f"log_table must be true or false, got {log_table!r}")
    scoring = config.get("scoring", DEFAULT_MODE)
    if not isinstance(scoring, str) or scoring not in scoring_mode_names():
        raise EvaluatorConfigError(
            f"scoring must be one of {list(scoring_mode_names())}, got {scoring!r}"
        )
    output_format = config.get("output_format", JSON_FORMAT)
    if not isinstance(output_format, str) or output_format not in output_format_names():
        raise EvaluatorConfigError(
            f"output_format must be one of {list(output_format_names())}, got {output_format!r}"
        )
    try:
        given = config.get("slice_by")
        if given is not None and not isinstance(given, (str, Sequence)):
            raise ConfigError(f"give a list of column names or 'a,b', got {given!r}")
        slice_by = slice_field_names(given or ())
        check_slice_fields(slice_by, scoring=scoring)
    except ConfigError as exc:
        raise EvaluatorConfigError(f"slice_by: {exc}") from exc
    try:
        template_kwargs = read_chat_template_kwargs(config.get("chat_template_kwargs"))
    except ConfigError as exc:
        raise EvaluatorConfigError(f"chat_template_kwargs: {exc}") from exc
    try:
        template_date = read_template_date(config.get("template_date"))
    except ConfigError as exc:
        raise EvaluatorConfigError(f"template_date: {exc}") from exc
    return _Config(
        columns=columns,
        explicit=frozenset(key for key in _COLUMN_DEFAULTS if key in config),
        default_language=default_language,
        seed=seed,
        resamples=resamples,
        metrics=tuple(metrics),
        log_table=log_table,
        scoring=scoring,
        slice_by=tuple(name for name in slice_by if name != "language"),
        output_format=output_format,
        chat_template_kwargs=template_kwargs,
        template_date=template_date,
    )


def _as_list(values: Any, what: str) -> list[Any]:
    if values is None:
        raise EvaluatorConfigError(what)
    if isinstance(values, (pd.Series, pd.Index)):
        return list(values.to_numpy(dtype=object))
    if isinstance(values, np.ndarray):
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        return list(values)
    return list(values)


def _model_outputs(raw: Any, column: str | None, count: int) -> list[Any]:
    """Pick the output column from whatever a pyfunc model's ``predict`` returned."""
    if isinstance(raw, pd.DataFrame):
        if column is not None and column in raw.columns:
            raw = raw[column]
        elif raw.shape[1] == 1:
            raw = raw.iloc[:, 0]
        else:
            raise EvaluatorConfigError(
                f"the model returned columns {list(raw.columns)}; pass predictions=<column> "
                "to mlflow.models.evaluate to say which one holds the output text"
            )
    elif isinstance(raw, str):
        raw = [raw]
    elif (
        isinstance(raw, list)
        and raw
        and all(isinstance(item, Mapping) for item in raw)
        and column is not None
        and all(column in item for item in raw)
    ):
        raw = [item[column] for item in raw]
    outputs = _as_list(raw, "the model returned no predictions")
    if len(outputs) != count:
        raise EvaluatorConfigError(
            f"the model returned {len(outputs)} predictions for {count} rows; "
            "it must return one output text per input row"
        )
    return outputs


def _column(features: Any, config: _Config, key: str) -> list[Any] | None:
    name = config.columns[key]
    if name is None:
        return None
    available = list(features.columns) if isinstance(features, pd.DataFrame) else []
    if name not in available:
        if key in config.explicit:
            raise EvaluatorConfigError(
                f"{key}={name!r} but the data has no such column (feature columns: {available}); "
                "fix the column name or leave the key out"
            )
        return None
    return list(features[name].to_numpy(dtype=object))


def _slice_column(features: Any, name: str) -> list[Any]:
    available = list(features.columns) if isinstance(features, pd.DataFrame) else []
    if name not in available:
        raise EvaluatorConfigError(
            f"slice_by names {name!r} but the data has no such column "
            f"(feature columns: {available})"
        )
    return list(features[name].to_numpy(dtype=object))


def _example_ids(features: Any, config: _Config, count: int) -> list[Any]:
    ids = _column(features, config, "example_id_column")
    if ids is not None:
        return ids
    if isinstance(features, pd.DataFrame) and features.index.is_unique:
        return [str(label) for label in features.index]
    return [str(position) for position in range(count)]


class SommelierEvaluator(ModelEvaluator):
    """Scores tool-call outputs with the five strict metrics, per language, with gaps.

    Claims ``model_type="tool-calling"``. Works with static predictions
    (``model=None`` and ``predictions=<column>``) or a pyfunc model called on
    the feature columns; gold calls come from ``targets`` (dicts or JSON
    strings). See the module docstring for the configuration keys.
    """

    name = EVALUATOR_NAME

    @classmethod
    def can_evaluate(cls, *, model_type: Any, evaluator_config: Any, **kwargs: Any) -> bool:
        """Claim exactly the ``tool-calling`` model type."""
        return bool(model_type == MODEL_TYPE)

    def evaluate(
        self,
        *,
        model_type: Any,
        dataset: Any,
        run_id: str,
        evaluator_config: Any,
        model: Any = None,
        extra_metrics: Any = None,
        custom_artifacts: Any = None,
        predictions: Any = None,
        **kwargs: Any,
    ) -> EvaluationResult:
        """Score, log the metrics, report and table into ``run_id``, and return them.

        Raises:
            EvaluatorConfigError: Bad configuration, missing columns or malformed
                rows (both a ``ConfigError`` and an ``MlflowException``).
            TrackingError: The tracking store is unreachable.
        """
        config = _parse_config(evaluator_config)
        try:
            scores = self._score(
                dataset, config, model, predictions, extra_metrics, custom_artifacts
            )
        except EvaluatorConfigError:
            raise
        except (InputError, InvariantViolationError) as exc:
            raise EvaluatorConfigError(str(exc)) from exc
        if config.chat_template_kwargs:
            log_params(
                run_id,
                {CHAT_TEMPLATE_KWARGS_PARAM: canonical_json(config.chat_template_kwargs)},
            )
        if config.template_date is not None:
            log_params(run_id, {TEMPLATE_DATE_PARAM: config.template_date})
        return self._log(run_id, scores, config.log_table)

    @staticmethod
    def _score(
        dataset: Any,
        config: _Config,
        model: Any,
        predictions: Any,
        extra_metrics: Any,
        custom_artifacts: Any,
    ) -> PredictionScores:
        if extra_metrics or custom_artifacts:
            raise EvaluatorConfigError(
                "the sommelier evaluator does not run MLflow extra_metrics or custom_artifacts; "
                "request catalog metrics with evaluator_config={'metrics': [{'name': ...}]}"
            )
        golds = _as_list(
            dataset.labels_data,
            "no gold calls: pass targets=<column of gold calls> to mlflow.models.evaluate",
        )
        features = dataset.features_data
        if model is None:
            outputs = _as_list(
                dataset.predictions_data,
                "no outputs: pass predictions=<column of output texts> (static predictions) "
                "or a model to mlflow.models.evaluate",
            )
        else:
            outputs = _model_outputs(model.predict(features), predictions, len(golds))
        return score_predictions(
            outputs,
            golds,
            example_ids=_example_ids(features, config, len(golds)),
            languages=_column(features, config, "language_column"),
            source_example_ids=_column(features, config, "source_example_id_column"),
            default_language=config.default_language,
            seed=config.seed,
            resamples=config.resamples,
            metrics=config.metrics,
            scoring=config.scoring,
            slice_by={name: _slice_column(features, name) for name in config.slice_by},
            output_format=config.output_format,
            tools=_column(features, config, "tools_column"),
            messages=_column(features, config, "messages_column"),
        )

    @staticmethod
    def _log(run_id: str, scores: PredictionScores, table: bool) -> EvaluationResult:
        log_metrics_batch(run_id, scores.metrics)
        set_sommelier_tags(run_id, parser_version=scores.report.parser_version)
        report_uri = log_json_artifact(
            scores.report.to_json(), EVALUATOR_REPORT_ARTIFACT, run_id=run_id
        )
        artifacts: dict[str, Any] = {
            "sommelier_evaluator_report": JsonEvaluationArtifact(  # type: ignore[no-untyped-call]
                uri=report_uri, content=redact_value(scores.report.to_json())
            )
        }
        if table:
            log_example_table(scores.table_rows, run_id=run_id)
            artifacts["sommelier_examples"] = JsonEvaluationArtifact(  # type: ignore[no-untyped-call]
                uri=artifact_uri(run_id, EXAMPLES_TABLE)
            )
        return EvaluationResult(  # type: ignore[no-untyped-call]
            metrics=dict(scores.metrics), artifacts=artifacts, run_id=run_id
        )
