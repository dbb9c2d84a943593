"""The five tool-call metrics as scorers for ``mlflow.genai.evaluate``.

Each scorer reads one row's ``outputs`` and ``expectations`` and scores it
offline: the same conservative parser and the same exact comparisons as the
rest of the product, no model and no LLM judge.

``outputs``
    The model's raw output text (a ``str``), or an already-decoded call (a
    dict, scored as its canonical JSON text, so ``{"name", "arguments"}`` is
    ``ok`` and any other shape is ``invalid_shape``). ``None`` scores as an
    empty output (``no_json``).
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
from sommelier_mlflow.errors import ConfigError, DataError
from sommelier_mlflow.toolcalls import (
    CALLS_MODE,
    DEFAULT_MODE,
    ExampleScore,
    GoldCall,
    ScoringMetric,
    completion_text,
    gold_call_of,
    gold_calls_of,
    parse_tool_call,
    parse_tool_calls,
    score_calls_example,
    score_example,
    scoring_metric_names,
    scoring_metrics,
)

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


def _gold_of(expectations: object) -> dict[str, Any]:
    """Unwrap genai ``expectations`` to the gold call; the call itself follows the one rule."""
    expectations = _decoded(expectations)
    if isinstance(expectations, Mapping):
        for key in _GOLD_KEYS:
            if key in expectations:
                return gold_call_of(expectations[key], where=f"expectations[{key!r}]")
        if "name" in expectations and "arguments" in expectations:
            return gold_call_of(expectations, where="expectations")
    raise DataError(
        "expectations must hold the gold call: {'gold_call': {'name': ..., 'arguments': {...}}}, "
        "{'gold_calls': [call]} or the call itself; got "
        f"{type(expectations).__name__} {expectations!r:.200}"
    )


@functools.lru_cache(maxsize=4096)
def _score_texts(text: str, gold_json: str, metric_names: tuple[str, ...]) -> ExampleScore:
    # Seven scorers score the same row: parse and compare it once. The metric
    # names are part of the key so a newly registered metric is never missed.
    del metric_names
    gold = GoldCall(loads(gold_json))
    parsed = parse_tool_call(text)
    return score_example(parsed.status, parsed.call, gold)


def _gold_set_of(expectations: object) -> list[dict[str, Any]]:
    """``calls`` mode: the gold calls of a row (``[]`` when no tool applies)."""
    expectations = _decoded(expectations)
    if isinstance(expectations, Mapping):
        for key in _GOLD_KEYS:
            if key in expectations:
                return gold_calls_of(expectations[key], where=f"expectations[{key!r}]")
    raise DataError(
        "expectations must hold the gold calls: {'gold_calls': [call, ...]} ([] when no tool "
        f"applies) or {{'gold_call': call}}; got {type(expectations).__name__} "
        f"{expectations!r:.200}"
    )


@functools.lru_cache(maxsize=4096)
def _score_calls_texts(text: str, gold_json: str, metric_names: tuple[str, ...]) -> ExampleScore:
    del metric_names  # part of the cache key only, as in _score_texts
    parsed = parse_tool_calls(text)
    return score_calls_example(parsed.status, parsed.calls, loads(gold_json))


def _score(outputs: object, expectations: object, mode: str = DEFAULT_MODE) -> ExampleScore:
    if mode == CALLS_MODE:
        return _score_calls_texts(
            completion_text(outputs),
            canonical_json(_gold_set_of(expectations)),
            scoring_metric_names(CALLS_MODE),
        )
    gold = _gold_of(expectations)
    return _score_texts(completion_text(outputs), canonical_json(gold), scoring_metric_names())


def _sum(values: list[float]) -> float:
    """Exact total of integer per-row counts (named ``sum`` in the metric key)."""
    return float(sum(values))


_sum.__name__ = "sum"


def _metric_scorers(metric: ScoringMetric[Any], mode: str) -> tuple[Scorer, ...]:
    """The scorers of one registry metric.

    A binary metric is one yes/no scorer, whose mean is the exact metric. Any
    other metric gets its per-row ratio (whose mean is a *macro* average) and
    two count scorers summed over rows, whose ratio is the exact corpus value.
    """
    name = metric.name
    if metric.binary:

        def outcome(outputs: Any, expectations: Any) -> bool:
            return _score(outputs, expectations, mode).correct(name)

        return (scorer(outcome, name=name, description=metric.description),)

    def ratio(outputs: Any, expectations: Any) -> float:
        numerator, denominator = _score(outputs, expectations, mode).component(name)
        return numerator / denominator if denominator else 0.0

    def numerator(outputs: Any, expectations: Any) -> int:
        return _score(outputs, expectations, mode).component(name)[0]

    def denominator(outputs: Any, expectations: Any) -> int:
        return _score(outputs, expectations, mode).component(name)[1]

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


# Built once per definition: MLflow identifies scorers by object as well as name.
_BUILT: dict[int, tuple[ScoringMetric[Any], tuple[Scorer, ...]]] = {}


def _scorers_of(metric: ScoringMetric[Any], mode: str = DEFAULT_MODE) -> tuple[Scorer, ...]:
    built = _BUILT.get(id(metric))
    if built is None or built[0] is not metric:
        built = _BUILT[id(metric)] = (metric, _metric_scorers(metric, mode))
    return built[1]


def sommelier_scorers(scoring: str = DEFAULT_MODE) -> list[Scorer]:
    """One scorer per registered binary metric and three per other metric, in registry order.

    For the spec's five that is seven scorers: four yes/no metrics plus
    ``argument_f1`` with its two micro-F1 count scorers. With
    ``scoring="calls"`` they are the calls-mode metrics, reading
    ``expectations["gold_calls"]`` (a list, ``[]`` when no tool applies):
    ``call_set_exact_match`` as a yes/no scorer and every other metric as its
    per-row ratio plus two summed count scorers (the ratio of the sums is the
    exact corpus value; ``abstention_accuracy`` and ``false_call_rate`` count
    only abstention rows).
    """
    if scoring not in (DEFAULT_MODE, CALLS_MODE):
        raise ConfigError(f"scoring must be {DEFAULT_MODE!r} or {CALLS_MODE!r}, got {scoring!r}")
    return [built for metric in scoring_metrics(scoring) for built in _scorers_of(metric, scoring)]


_DEFAULT: Final = {built.name: built for built in sommelier_scorers()}
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
