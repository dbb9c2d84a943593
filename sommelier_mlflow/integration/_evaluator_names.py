"""The names MLflow knows the evaluator plugin by.

Both the plugin's entry module (:mod:`sommelier_mlflow.integration.evaluator`,
which must import without MLflow) and its MLflow-dependent implementation
(:mod:`sommelier_mlflow.integration._evaluator`) need these two names. Keeping
them in a module of their own lets each import them without importing the
other, so the two evaluator modules form no import circle.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EVALUATOR_NAME", "MODEL_TYPE"]

#: The name users pass in ``evaluators=[...]`` and as the ``evaluator_config`` key.
EVALUATOR_NAME: Final = "sommelier"
#: The ``model_type`` the evaluator claims.
MODEL_TYPE: Final = "tool-calling"
