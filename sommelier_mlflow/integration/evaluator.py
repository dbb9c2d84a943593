"""Entry point of the ``sommelier`` evaluator plugin for ``mlflow.models.evaluate``.

MLflow loads ``sommelier_mlflow.integration.evaluator:SommelierEvaluator``
(entry-point group ``mlflow.model_evaluator``) while it imports its evaluator
registry, for every user of ``mlflow.models.evaluate`` in this environment. A
plugin whose module is slow or fails to import slows down or breaks all of
them, and MLflow drops a plugin whose import fails. So this module imports
nothing heavy and cannot fail: the class (a ``ModelEvaluator`` subclass, which
needs MLflow) is built on first attribute access, and any failure there is
reported as an ``ImportError``, which MLflow turns into a warning.

Usage::

    mlflow.models.evaluate(
        data=df, predictions="output", targets="gold", model_type="tool-calling",
        evaluators=["sommelier"],
        evaluator_config={"sommelier": {"language_column": "language"}},
    )
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow.integration._evaluator_names import MODEL_TYPE

if TYPE_CHECKING:
    from sommelier_mlflow.integration._evaluator import EvaluatorConfigError, SommelierEvaluator

__all__ = ["EvaluatorConfigError", "MODEL_TYPE", "SommelierEvaluator"]

_LAZY: Final = frozenset({"EvaluatorConfigError", "SommelierEvaluator"})


def __getattr__(name: str) -> Any:
    """Build the MLflow-dependent names on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from sommelier_mlflow.integration import _evaluator
    except Exception as exc:  # MLflow only tolerates ImportError from a plugin
        raise ImportError(
            f"the sommelier evaluator cannot be loaded ({type(exc).__name__}: {exc}); "
            "reinstall sommelier-mlflow with a supported mlflow version"
        ) from exc
    value = getattr(_evaluator, name)
    globals()[name] = value
    return value
