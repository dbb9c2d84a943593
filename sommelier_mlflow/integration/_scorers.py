"""The five tool-call metrics as scorers for ``mlflow.genai.evaluate``.

Each scorer reads one row's ``outputs`` and ``expectations`` and scores it
offline: the same conservative parser and the same exact comparisons as the
rest of the product, no model and no LLM judge.

``outputs``
    The model's raw output text (a ``str``), or an already-decoded call (a
    dict, scored as its canonical JSON text, so ``{"name", "arguments"}`` is
    ``ok`` and any other shape is ``invalid_shape``). ``None`` scores as an
    empty output (``no_json``).
``inputs`` (optional)
    ``inputs["tools"]``, the tools the row offered (a list of tool schemas or
    its JSON text; an evaluation dataset's records carry it), is handed to the
    output format's decoder, which may type untyped values by it. Without
    it the decoder sees no tools. ``inputs["messages"]``, the conversation
    before the turn the output answers (a conversation row's history, or its
    JSON text), is checked as the split reader checks it (a malformed one
    fails the row); the output is scored against that turn's gold calls.
``expectations``
    The gold call: ``expectations["gold_call"]`` (a dict or its JSON string),
    ``expectations["gold_calls"]`` (a list of exactly one call), or the call
    itself as ``{"name": ..., "arguments": ...}``. A malformed gold call makes
    the scorer fail on that row; MLflow records the error on the row and
    leaves the row out of that scorer's aggregate, so check the results for
    scorer errors.

What MLflow logs per run, and how to read it:

* ``valid_json_rate/mean``, ``function_name_accuracy/mean``,
  ``argument_exact_match/mean``, ``full_call_exact_match/mean``: each row
  scores ``True``/``False`` and its denominator is 1, so the mean *is* the
  exact metric (numerator / number of rows).
* ``argument_f1/mean``: each row scores its own F1 (``2 * matched /
  (predicted + gold pairs)``), so this mean is the **macro** average over rows,
  not the product's micro F1.
* ``argument_f1_numerator/sum`` and ``argument_f1_denominator/sum``: the
  pooled counts. The exact micro ``argument_f1`` is their ratio; use
  :func:`micro_argument_f1` on ``EvaluationResult.metrics``. (Floats hold
  these integer sums exactly below 2**53.)

On a SQLite tracking store, ``mlflow.genai.evaluate`` with its default ten
worker threads can stall on database locks; :func:`genai_evaluate` (or
:func:`safe_genai_env` before calling MLflow yourself) sets
``MLFLOW_GENAI_EVAL_MAX_WORKERS`` to 4 unless it is already set.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mlflow.genai.scorers import Scorer, scorer

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads
from sommelier_mlflow.data import messages_problem
from sommelier_mlflow.errors import ConfigError, DataError
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    ExampleScore,
    ScoringMetric,
    builtin_scoring_metrics,
    completion_text,
    one_example_score,
    scoring_metric_names,
    scoring_mode,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

# The public surface is listed once, in :mod:`sommelier_mlflow.scorers`.

GENAI_MAX_WORKERS_ENV: Final = "MLFLOW_GENAI_EVAL_MAX_WORKERS"
SAFE_GENAI_MAX_WORKERS: Final = 4
F1_NUMERATOR_METRIC: Final = "argument_f1_numerator/sum"
F1_DENOMINATOR_METRIC: Final = "argument_f1_denominator/sum"
_GOLD_KEYS: Final = ("gold_call", "gold_calls")


def _decoded(expectations: object) -> object:
    """``expectations`` parsed when MLflow hands it over as JSON text, else as given."""
    if not isinstance(expectations, str):
        return expectations
    try:
        return loads(expectations)
    except JSONDecodeError as exc:
        raise DataError(f"expectations is a string but not valid JSON ({exc})") from exc


def _gold_of(expectations: object) -> object:
    """Unwrap genai ``expectations`` to the gold value; the scoring mode then reads it."""
    expectations = _decoded(expectations)
    if isinstance(expectations, Mapping):
        for key in _GOLD_KEYS:
            if key in expectations:
                return expectations[key]
        if "name" in expectations and "arguments" in expectations:
            return expectations
    raise DataError(
        "expectations must hold the gold call(s): {'gold_call': {'name': ..., 'arguments': "
        "{...}}}, {'gold_calls': [call, ...]} ([] when no tool applies) or the call itself; "
        f"got {type(expectations).__name__} {expectations!r:.200}"
    )


def _tools_of(inputs: object) -> list[Any]:
    """The tools the row offered, ``inputs["tools"]`` (an evaluation dataset's shape), or none.

    Only a decoder that types values by the tool schemas reads them; a row
    without them is scored with no tools, as before they were passed.
    """
    tools = _decoded(inputs.get("tools")) if isinstance(inputs, Mapping) else None
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(tool, Mapping) for tool in tools):
        raise DataError(
            f"inputs['tools'] must be a list of tool schemas, got {type(tools).__name__} "
            f"{tools!r:.200}"
        )
    return tools


def _check_messages(inputs: object, tools: list[Any]) -> None:
    """Refuse a malformed ``inputs["messages"]`` history, as the split reader would."""
    messages = _decoded(inputs.get("messages")) if isinstance(inputs, Mapping) else None
    if messages is None:
        return
    has_tools = isinstance(inputs, Mapping) and inputs.get("tools") is not None
    problem = messages_problem(messages, tools if has_tools else None)
    if problem is not None:
        raise DataError(f"inputs['messages']: {problem}")


@functools.lru_cache(maxsize=4096)
def _score_texts(
    text: str,
    gold_json: str,
    tools_json: str,
    mode_name: str,
    format_name: str,
    metric_names: tuple[str, ...],
) -> ExampleScore:
    # Several scorers score the same row: parse and compare it once. The metric
    # names are part of the key so a newly registered metric is never missed.
    del metric_names
    mode = scoring_mode(mode_name)
    gold = mode.make_gold(loads(gold_json))
    parsed = mode.parse(text, registered_output_format(format_name), loads(tools_json))
    return one_example_score(mode.match(parsed, gold), mode_name)


def _score(
    outputs: object, expectations: object, inputs: object, mode: str, fmt: str
) -> ExampleScore:
    calls = scoring_mode(mode).gold_calls(_gold_of(expectations), "expectations")
    tools = _tools_of(inputs)
    _check_messages(inputs, tools)
    return _score_texts(
        completion_text(outputs),
        canonical_json(list(calls)),
        canonical_json(tools),
        mode,
        fmt,
        scoring_metric_names(mode),
    )


def _sum(values: list[float]) -> float:
    """Exact total of integer per-row counts (named ``sum`` in the metric key)."""
    return float(sum(values))


_sum.__name__ = "sum"


def _metric_scorers(metric: ScoringMetric[Any], mode: str, fmt: str) -> tuple[Scorer, ...]:
    """The scorers of one registry metric.

    A binary metric is one yes/no scorer, whose mean is the exact metric. Any
    other metric gets its per-row ratio (whose mean is a *macro* average) and
    two count scorers summed over rows, whose ratio is the exact corpus value.
    """
    name = metric.name
    if metric.binary:

        def outcome(outputs: Any, expectations: Any, inputs: Any = None) -> bool:
            return _score(outputs, expectations, inputs, mode, fmt).correct(name)

        return (scorer(outcome, name=name, description=metric.description),)

    def ratio(outputs: Any, expectations: Any, inputs: Any = None) -> float:
        numerator, denominator = _score(outputs, expectations, inputs, mode, fmt).component(name)
        return numerator / denominator if denominator else 0.0

    def numerator(outputs: Any, expectations: Any, inputs: Any = None) -> int:
        return _score(outputs, expectations, inputs, mode, fmt).component(name)[0]

    def denominator(outputs: Any, expectations: Any, inputs: Any = None) -> int:
        return _score(outputs, expectations, inputs, mode, fmt).component(name)[1]

    return (
        scorer(
            ratio,
            name=name,
            description=(
                f"{metric.description} Per-row value: its mean is a macro average. The exact "
                f"value is {name}_numerator/sum / {name}_denominator/sum."
            ),
        ),
        scorer(
            numerator,
            name=f"{name}_numerator",
            description=f"Per-row numerator of {name}; its sum is the exact numerator.",
            aggregations=[_sum],
        ),
        scorer(
            denominator,
            name=f"{name}_denominator",
            description=f"Per-row denominator of {name}; its sum is the exact denominator.",
            aggregations=[_sum],
        ),
    )


# Built once per definition and format: MLflow identifies scorers by object as well as name.
_BUILT: dict[tuple[int, str], tuple[ScoringMetric[Any], tuple[Scorer, ...]]] = {}


def _scorers_of(metric: ScoringMetric[Any], mode: str, fmt: str) -> tuple[Scorer, ...]:
    built = _BUILT.get((id(metric), fmt))
    if built is None or built[0] is not metric:
        built = _BUILT[(id(metric), fmt)] = (metric, _metric_scorers(metric, mode, fmt))
    return built[1]


def sommelier_scorers(
    scoring: str = DEFAULT_MODE, output_format: str = JSON_FORMAT
) -> list[Scorer]:
    """One scorer per registered binary metric and three per other metric, in registry order.

    For the spec's five that is seven scorers: four yes/no metrics plus
    ``argument_f1`` with its two micro-F1 count scorers. With
    ``scoring="calls"`` they are the calls-mode metrics, reading
    ``expectations["gold_calls"]`` (a list, ``[]`` when no tool applies):
    ``call_set_exact_match`` as a yes/no scorer and every other metric as its
    per-row ratio plus two summed count scorers (the ratio of the sums is the
    exact corpus value; ``abstention_accuracy`` and ``false_call_rate`` count
    only abstention rows). Any other registered mode works the same way.

    ``output_format`` names the registered format the outputs are written in
    (default ``json``); e.g. ``"hermes"`` reads ``<tool_call>`` blocks.

    Raises:
        ConfigError: An unknown scoring mode or output format (the message
            lists the registered names).
    """
    mode = scoring_mode(scoring)
    fmt = registered_output_format(output_format).name
    return [built for metric in mode.metrics() for built in _scorers_of(metric, scoring, fmt)]


# The package's own metrics only: this runs at import, before any plugin may load.
_DEFAULT: Final = {
    built.name: built
    for metric in builtin_scoring_metrics()
    for built in _scorers_of(metric, DEFAULT_MODE, JSON_FORMAT)
}
valid_json_rate: Final[Scorer] = _DEFAULT["valid_json_rate"]
function_name_accuracy: Final[Scorer] = _DEFAULT["function_name_accuracy"]
argument_exact_match: Final[Scorer] = _DEFAULT["argument_exact_match"]
argument_f1: Final[Scorer] = _DEFAULT["argument_f1"]
argument_f1_numerator: Final[Scorer] = _DEFAULT["argument_f1_numerator"]
argument_f1_denominator: Final[Scorer] = _DEFAULT["argument_f1_denominator"]
full_call_exact_match: Final[Scorer] = _DEFAULT["full_call_exact_match"]


def micro_argument_f1(metrics: Mapping[str, float]) -> float:
    """Recover the exact micro ``argument_f1`` from ``mlflow.genai.evaluate`` metrics.

    Args:
        metrics: ``EvaluationResult.metrics`` of a run scored with
            :data:`argument_f1_numerator` and :data:`argument_f1_denominator`.

    Returns:
        ``argument_f1_numerator/sum / argument_f1_denominator/sum`` (0.0 when
        the denominator is 0), equal to the product's ``argument_f1``.

    Raises:
        DataError: If either sum is missing.
    """
    try:
        numerator = float(metrics[F1_NUMERATOR_METRIC])
        denominator = float(metrics[F1_DENOMINATOR_METRIC])
    except KeyError as exc:
        raise DataError(
            f"metric {exc.args[0]!r} is missing; score with the argument_f1_numerator and "
            "argument_f1_denominator scorers (sommelier_scorers() includes them)"
        ) from exc
    return numerator / denominator if denominator else 0.0


def safe_genai_env(max_workers: int = SAFE_GENAI_MAX_WORKERS) -> int:
    """Cap ``mlflow.genai.evaluate``'s worker threads unless the user chose a number.

    With MLflow's default of ten workers, evaluation against a SQLite tracking
    store can stall on database locks; four is safe and, for these
    microsecond scorers, no slower.

    Returns:
        The effective ``MLFLOW_GENAI_EVAL_MAX_WORKERS``.
    """
    current = os.environ.get(GENAI_MAX_WORKERS_ENV)
    if current is None or not current.strip():
        os.environ[GENAI_MAX_WORKERS_ENV] = str(max_workers)
        return max_workers
    try:
        return int(current)
    except ValueError as exc:
        raise ConfigError(
            f"{GENAI_MAX_WORKERS_ENV}={current!r} is not an integer; unset it or set a number"
        ) from exc


def genai_evaluate(data: Any, scorers: Sequence[Scorer] | None = None, **kwargs: Any) -> Any:
    """Run ``mlflow.genai.evaluate`` with the sommelier scorers and a safe worker count.

    Args:
        data: Rows with ``inputs`` (a dict, required by MLflow), ``outputs``
            and ``expectations`` (see the module docstring), as MLflow accepts
            them (a list of dicts or a DataFrame).
        scorers: Scorers to run (default: :func:`sommelier_scorers`).
        **kwargs: Passed to ``mlflow.genai.evaluate`` (``predict_fn``, ``model_id``).

    Returns:
        MLflow's ``EvaluationResult``; :func:`micro_argument_f1` reads its metrics.
    """
    import mlflow.genai

    safe_genai_env()
    return mlflow.genai.evaluate(
        data=data, scorers=list(scorers) if scorers is not None else sommelier_scorers(), **kwargs
    )
