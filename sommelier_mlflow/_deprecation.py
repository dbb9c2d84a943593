"""Old public names kept for one release after a rename, each warning when used.

Issue 31 gave every concept one word (the glossary at the top of
``docs/architecture.md``); the names it replaced keep working until the next
release so that users' code has time to move. One rule serves every kind of
old name: a module attribute (through the module's ``__getattr__``, so the
warning fires on use, not on importing the package), a method or attribute
(through a property) and a keyword argument.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["warn_renamed", "RENAMED", "DOCUMENTED", "deprecated_aliases"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (``DeprecationWarning``, at the caller's line) that ``old`` is now ``new``.

    Args:
        old: The old spelling, as the user wrote it (``"CallComparison"``).
        new: What to write instead.
        stacklevel: Frames between this call and the user's code; the default
            suits a helper called directly by the deprecated entry point.
    """
    warnings.warn(
        f"{old} is renamed {new} (one word per concept: see the glossary in "
        f"docs/architecture.md); {old} works until the next release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


#: Public names issue 31 renamed, old to new, that warn when used (until the next release).
RENAMED: Final[Mapping[str, str]] = {
    # the per-example match (a "comparison" is base against adapter)
    "BfclComparison": "BfclMatch",
    "CallComparison": "CallMatch",
    "CallsComparison": "CallsMatch",
    # the catalog's per-row measures (a "metric" is an exact-count scoring metric)
    "MetricConfig": "MeasureConfig",
    "ToolCallMetric": "ToolCallMeasure",
    "evaluate_metrics": "evaluate_measures",
    "list_metrics": "list_measures",
    "unregister_metric": "unregister_measure",
    # the two report types (evaluation_report.json and the evaluator plug-in's)
    "EvaluatorReport": "PredictionsReport",
    "read_evaluator_report": "read_predictions_report",
    "write_evaluator_report": "write_predictions_report",
}

#: Renamed names that ``DESIGN.md`` lists as the public API: they resolve silently,
#: because that contract promises them unchanged until the document deprecates them.
DOCUMENTED: Final[Mapping[str, str]] = {
    "BaseMetric": "BaseMeasure",
    "CompositeMetric": "CompositeMeasure",
    "CountsMetric": "CountsMeasure",
    "EvaluationResult": "MeasureResults",
    "JsonFormatMetric": "JsonFormatMeasure",
    "MetricSpec": "MeasureSpec",
    "get_metric": "get_measure",
    "register_metric": "register_measure",
}


def deprecated_aliases(module: str, namespace: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving the old names of the new names a module has.

    Use it as ``__getattr__ = deprecated_aliases(__name__, globals())``:
    ``from module import Old`` then works (warning, unless the name is in
    :data:`DOCUMENTED`) wherever the module offers ``New``, while ``__all__``
    and ``dir()`` list only the new names. One table serves every module, so
    an old name means the same thing wherever it was importable.

    Args:
        module: The module's ``__name__``, for the warning and the AttributeError.
        namespace: The module's globals, read when an old name is used.
    """

    def __getattr__(name: str) -> Any:
        new = DOCUMENTED.get(name)
        if new is not None and new in namespace:
            return namespace[new]
        new = RENAMED.get(name)
        if new is None or new not in namespace:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{module}.{new}")
        return namespace[new]

    return __getattr__
