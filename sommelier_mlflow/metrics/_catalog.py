"""The measure catalog: measure classes looked up by name.

Configurations (``MeasureSpec``, the MLflow evaluator config, CLI flags) name
measures by string, so the catalog is the one place that turns a name into a
class. A name means one class: registering a second class under a taken name
is refused rather than silently replacing the first. A class has one name:
registering it under a new name renames it, and since ``name`` is read from
the class, instances created earlier report the new name too.

Another installed package adds measures through the ``sommelier_mlflow.metrics``
entry-point group: its entry point names a module that calls
:func:`register_measure`. The group is loaded by the plugin loader it shares
with the scoring metrics (:data:`sommelier_mlflow._plugins.METRIC_PLUGINS`)
the first time a name is missing or the catalog is listed; a plugin that
fails is a warning naming it.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from sommelier_mlflow._plugins import METRIC_PLUGINS
from sommelier_mlflow.errors import MetricConfigError, MetricTypeError, UnknownMetricError
from sommelier_mlflow.metrics._base import BaseMeasure, validate_measure_name

__all__ = ["register_measure", "unregister_measure", "get_measure", "list_measures"]

_MetricClass = TypeVar("_MetricClass", bound="type[BaseMeasure[Any]]")

_registry: dict[str, type[BaseMeasure[Any]]] = {}
_lock = threading.RLock()


def _register(cls: _MetricClass, name: str | None) -> _MetricClass:
    if not (isinstance(cls, type) and issubclass(cls, BaseMeasure)):
        raise MetricTypeError(f"register_measure takes a BaseMeasure subclass, got {cls!r}.")
    if cls._abstract:
        raise MetricTypeError(
            f"{cls.__name__} is abstract (it does not bind its value type or implement "
            "evaluate) and cannot be registered."
        )
    new_name = validate_measure_name(cls.name if name is None else name, "Measure name")
    with _lock:
        holder = _registry.get(new_name)
        if holder is not None and holder is not cls:
            raise MetricConfigError(
                f"Measure name {new_name!r} is already registered for "
                f"{holder.__module__}.{holder.__qualname__}; choose another name."
            )
        for old_name, registered in list(_registry.items()):
            if registered is cls and old_name != new_name:
                del _registry[old_name]
        _registry[new_name] = cls
        cls._metric_name = new_name
    return cls


@overload
def register_measure(cls: _MetricClass, /, *, name: str | None = None) -> _MetricClass: ...


@overload
def register_measure(
    cls: None = None, /, *, name: str | None = None
) -> Callable[[_MetricClass], _MetricClass]: ...


def register_measure(
    cls: _MetricClass | None = None, /, *, name: str | None = None
) -> _MetricClass | Callable[[_MetricClass], _MetricClass]:
    """Add a measure class to the catalog: ``@register_measure`` or ``@register_measure(name=...)``.

    Args:
        cls: The class, when used bare or called directly.
        name: Catalog name; defaults to the class's current name. Giving a
            registered class a new name renames it (the old name is freed).

    Returns:
        The class itself, or a decorator that registers and returns it.

    Raises:
        MetricTypeError: If the class is not a concrete metric.
        MetricConfigError: If the name is malformed or already taken by
            another class.
    """
    if cls is None:

        def decorate(target: _MetricClass) -> _MetricClass:
            return _register(target, name)

        return decorate
    return _register(cls, name)


def unregister_measure(name: str) -> type[BaseMeasure[Any]]:
    """Remove a name from the catalog and return the class it named.

    The class keeps its name; mainly for tests and plugins that replace a
    measure deliberately.

    Raises:
        UnknownMetricError: If nothing is registered under ``name``.
    """
    with _lock:
        if name not in _registry:
            raise UnknownMetricError(_unknown_message(name))
        return _registry.pop(name)


def get_measure(name: str) -> type[BaseMeasure[Any]]:
    """Return the measure class registered under ``name``.

    Raises:
        MetricTypeError: If ``name`` is not a string.
        UnknownMetricError: (a ``KeyError``) If no class has that name; the
            message suggests the closest registered names.
    """
    if not isinstance(name, str):
        raise MetricTypeError(f"Measure names are strings, got {type(name).__name__}.")
    with _lock:
        found = _registry.get(name)
    if found is None:
        METRIC_PLUGINS.load_plugins()
        with _lock:
            found = _registry.get(name)
    if found is None:
        raise UnknownMetricError(_unknown_message(name))
    return found


def list_measures() -> list[str]:
    """All registered measure names, plugins included, sorted."""
    METRIC_PLUGINS.load_plugins()
    with _lock:
        return sorted(_registry)


def _unknown_message(name: str) -> str:
    with _lock:
        names = sorted(_registry)
    folded = {candidate.lower(): candidate for candidate in names}
    close = difflib.get_close_matches(name.lower(), list(folded), n=3, cutoff=0.6)
    suggestions = [folded[match] for match in close]
    message = f"Unknown measure {name!r}."
    if suggestions:
        message += " Did you mean " + " or ".join(repr(s) for s in suggestions) + "?"
    listing = ", ".join(names) if names else "none"
    return f"{message} Registered measures: {listing}."
