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
from sommelier_mlflow.toolcalls import ExampleScore, GoldCall, parse_tool_call, score_example

__all__ = [
    "F1_DENOMINATOR_METRIC",
    "F1_NUMERATOR_METRIC",
    "GENAI_MAX_WORKERS_ENV",
    "SAFE_GENAI_MAX_WORKERS",
    "argument_exact_match",
    "argument_f1",
    "argument_f1_denominator",
    "argument_f1_numerator",
    "full_call_exact_match",
    "function_name_accuracy",
    "genai_evaluate",
    "micro_argument_f1",
    "safe_genai_env",
    "sommelier_scorers",
    "valid_json_rate",
]

GENAI_MAX_WORKERS_ENV: Final = "MLFLOW_GENAI_EVAL_MAX_WORKERS"
SAFE_GENAI_MAX_WORKERS: Final = 4
F1_NUMERATOR_METRIC: Final = "argument_f1_numerator/sum"
F1_DENOMINATOR_METRIC: Final = "argument_f1_denominator/sum"
_GOLD_KEYS: Final = ("gold_call", "gold_calls")


def _gold_of(expectations: object) -> Any:
    if isinstance(expectations, str):
        try:
            expectations = loads(expectations)
        except JSONDecodeError as exc:
            raise ConfigError(f"expectations is a string but not valid JSON ({exc})") from exc
    if isinstance(expectations, Mapping):
        for key in _GOLD_KEYS:
            if key in expectations:
                gold = expectations[key]
                if isinstance(gold, str):
                    try:
                        gold = loads(gold)
                    except JSONDecodeError as exc:
                        raise ConfigError(
                            f"expectations[{key!r}] is a string but not valid JSON ({exc})"
                        ) from exc
                if key == "gold_calls":
                    if not isinstance(gold, list) or len(gold) != 1:
                        raise ConfigError(
                            "expectations['gold_calls'] must be a list of exactly one call"
                        )
                    gold = gold[0]
                return gold
        if "name" in expectations and "arguments" in expectations:
            return expectations
    raise ConfigError(
        "expectations must hold the gold call: {'gold_call': {'name': ..., 'arguments': {...}}}, "
        "{'gold_calls': [call]} or the call itself; got "
        f"{type(expectations).__name__} {expectations!r:.200}"
    )


def _output_text(outputs: object) -> str:
    if outputs is None:
        return ""
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, Mapping):
        return canonical_json(dict(outputs))
    if isinstance(outputs, (list, tuple)):
        return canonical_json(list(outputs))
    raise DataError(
        f"outputs must be the raw output text (str) or a decoded call (dict), "
        f"got {type(outputs).__name__}"
    )


@functools.lru_cache(maxsize=4096)
def _score_texts(text: str, gold_json: str) -> ExampleScore:
    # Seven scorers score the same row: parse and compare it once.
    gold = GoldCall(loads(gold_json))
    parsed = parse_tool_call(text)
    return score_example(parsed.status, parsed.call, gold)


def _score(outputs: object, expectations: object) -> ExampleScore:
    gold = _gold_of(expectations)
    if isinstance(gold, Mapping) and not isinstance(gold, dict):
        gold = dict(gold)
    GoldCall(gold)  # validate with a clear message before caching by its JSON
    return _score_texts(_output_text(outputs), canonical_json(gold))


def _valid_json_rate(outputs: Any, expectations: Any) -> bool:
    """Whether the output parsed into one well-formed tool call."""
    return _score(outputs, expectations).numerators[0] == 1


def _function_name_accuracy(outputs: Any, expectations: Any) -> bool:
    """Whether the parsed call names the gold function."""
    return _score(outputs, expectations).numerators[1] == 1


def _argument_exact_match(outputs: Any, expectations: Any) -> bool:
    """Whether the parsed arguments equal the gold arguments (canonical JSON)."""
    return _score(outputs, expectations).numerators[2] == 1


def _argument_f1(outputs: Any, expectations: Any) -> float:
    """This row's argument F1; the mean over rows is macro F1 (see the module docstring)."""
    score = _score(outputs, expectations)
    return score.numerators[3] / score.denominators[3] if score.denominators[3] else 0.0


def _argument_f1_numerator(outputs: Any, expectations: Any) -> int:
    """``2 * matched`` argument pairs of this row; summed over rows for micro F1."""
    return _score(outputs, expectations).numerators[3]


def _argument_f1_denominator(outputs: Any, expectations: Any) -> int:
    """Predicted plus gold argument pairs of this row; summed over rows for micro F1."""
    return _score(outputs, expectations).denominators[3]


def _full_call_exact_match(outputs: Any, expectations: Any) -> bool:
    """Whether name and arguments both match the gold call."""
    return _score(outputs, expectations).numerators[4] == 1


def _sum(values: list[float]) -> float:
    """Exact total of integer per-row counts (named ``sum`` in the metric key)."""
    return float(sum(values))


_sum.__name__ = "sum"

valid_json_rate: Final[Scorer] = scorer(
    _valid_json_rate,
    name="valid_json_rate",
    description="Share of outputs that parse into exactly one well-formed tool call.",
)
function_name_accuracy: Final[Scorer] = scorer(
    _function_name_accuracy,
    name="function_name_accuracy",
    description="Share of outputs whose parsed call names the gold function.",
)
argument_exact_match: Final[Scorer] = scorer(
    _argument_exact_match,
    name="argument_exact_match",
    description="Share of outputs whose arguments equal the gold arguments exactly.",
)
argument_f1: Final[Scorer] = scorer(
    _argument_f1,
    name="argument_f1",
    description=(
        "Per-row argument F1 over flattened path/value pairs; its mean is macro F1. "
        "Micro F1 = argument_f1_numerator/sum / argument_f1_denominator/sum."
    ),
)
argument_f1_numerator: Final[Scorer] = scorer(
    _argument_f1_numerator,
    name="argument_f1_numerator",
    description="2 x matched argument pairs per row; its sum is micro F1's numerator.",
    aggregations=[_sum],
)
argument_f1_denominator: Final[Scorer] = scorer(
    _argument_f1_denominator,
    name="argument_f1_denominator",
    description="Predicted + gold argument pairs per row; its sum is micro F1's denominator.",
    aggregations=[_sum],
)
full_call_exact_match: Final[Scorer] = scorer(
    _full_call_exact_match,
    name="full_call_exact_match",
    description="Share of outputs with the exact gold function name and arguments.",
)

_ALL: Final = (
    valid_json_rate,
    function_name_accuracy,
    argument_exact_match,
    argument_f1,
    argument_f1_numerator,
    argument_f1_denominator,
    full_call_exact_match,
)


def sommelier_scorers() -> list[Scorer]:
    """All seven scorers: the five metrics plus the two micro-F1 count scorers."""
    return list(_ALL)


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
