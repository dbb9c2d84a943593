"""Tool-call metrics during training: a transformers ``TrainerCallback``.

``SommelierCallback`` evaluates a fixed, seeded subset of a test split while a
model trains (the base once, at step 0, with the adapter disabled; then the
model being trained) and logs ``tooleval/<slice>/<metric>`` with
``step=state.global_step`` into the run the trainer logs to. It scores with
the same pure function as ``evaluate``, so a point on the learning curve and
an ``evaluate`` run of the same weights say the same thing.

Importing this package is cheap; transformers is imported when the callback
class is first accessed (PEP 562), and neither TRL nor training is a
dependency of scoring: the core never imports this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sommelier_mlflow.training._callback import SommelierCallback

__all__ = ["SommelierCallback"]


def __getattr__(name: str) -> Any:
    """Build the transformers-dependent callback class on first use."""
    if name != "SommelierCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from sommelier_mlflow.training import _callback

    value = _callback.SommelierCallback
    globals()[name] = value
    return value
