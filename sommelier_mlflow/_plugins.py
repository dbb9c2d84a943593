"""One registry type for every seam, filled by the package and by installed plugins.

Backends, scoring modes, scoring metrics, output formats, prompt formats and
catalog metrics are all "a name that means one object". Each seam keeps one
:class:`Registry` of its own (the catalog keeps its own table and uses one
only to load its group); the package registers its built-ins at import,
and another installed distribution adds its own by declaring an entry point
in the seam's group (``sommelier_mlflow.output_formats`` and so on). Entry
points are loaded lazily, on the first lookup, so an installed plugin reaches
the command line, ``mlflow run``, the evaluator and the scorers without
anyone importing it, while a plain ``import sommelier_mlflow`` stays cheap.
Registering never loads plugins: it runs while the package (or a plugin) is
being imported, where importing another plugin would find it half done.

Loading a plugin runs someone else's code: a plugin that fails to import or
to register is reported with :func:`warnings.warn` naming it, and the
registry goes on with what it has. A broken third-party package must not
take the command line down with it.

The module is part of the core: it imports only the standard library and
the error tree.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Final, Generic, TypeVar, overload

from sommelier_mlflow.errors import ConfigError

__all__ = [
    "BACKENDS_GROUP",
    "SCORING_MODES_GROUP",
    "SCORING_METRICS_GROUP",
    "OUTPUT_FORMATS_GROUP",
    "PROMPT_FORMATS_GROUP",
    "INPUT_FORMATS_GROUP",
    "METRICS_GROUP",
    "is_valid_name",
    "PluginWarning",
    "Registry",
    "METRIC_PLUGINS",
]

BACKENDS_GROUP: Final = "sommelier_mlflow.backends"
SCORING_MODES_GROUP: Final = "sommelier_mlflow.scoring_modes"
SCORING_METRICS_GROUP: Final = "sommelier_mlflow.scoring_metrics"
OUTPUT_FORMATS_GROUP: Final = "sommelier_mlflow.output_formats"
PROMPT_FORMATS_GROUP: Final = "sommelier_mlflow.prompt_formats"
INPUT_FORMATS_GROUP: Final = "sommelier_mlflow.input_formats"
METRICS_GROUP: Final = "sommelier_mlflow.metrics"

# Names are typed on command lines, recorded in reports and used in MLflow
# keys, so they stay in an alphabet that needs no escaping anywhere.
_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")

T = TypeVar("T")
_Obj = TypeVar("_Obj")


def is_valid_name(name: object) -> bool:
    """Whether ``name`` is a registry name: ``[a-z][a-z0-9_]*``, at most 64 characters.

    Every seam's names (and the metric table's columns) follow this one rule,
    since each may end up in a command line, a report field or an MLflow key.
    """
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


class PluginWarning(UserWarning):
    """An installed plugin could not be loaded; the registry goes on without it."""


class Registry(Generic[T]):
    """Names to objects of one kind, plus the plugins of one entry-point group.

    An entry point's object is loaded and, if it is callable and not yet
    registered by the import itself, called with no arguments; either way
    the plugin's module is expected to register what it provides (importing
    a module that calls :meth:`register` is the usual form). The entry
    point's own name is only used to name the plugin in warnings.

    Args:
        kind: What the registry holds, in words ("output format"); used in messages.
        group: The entry-point group plugins declare, or ``None`` for none.
        item_type: When given, :meth:`register` refuses objects of another type.
    """

    def __init__(self, kind: str, group: str | None = None, item_type: type | None = None) -> None:
        self.kind = kind
        self.group = group
        self.item_type = item_type
        self._items: dict[str, T] = {}
        self._plugins_loaded = group is None

    @overload
    def register(self, name: str) -> Callable[[_Obj], _Obj]: ...

    @overload
    def register(self, name: str, obj: _Obj) -> _Obj: ...

    def register(self, name: str, obj: object = None) -> object:
        """Register ``obj`` under ``name``; without ``obj``, return a decorator.

        Registering the same object twice is harmless (a module imported by two
        paths); a different object under a taken name is refused, because a
        name recorded in a report must mean one thing.

        Raises:
            ConfigError: A malformed or already taken name, or an object of
                another type than the registry's ``item_type``.
        """
        if obj is not None:
            self._check_type(obj)  # first: a wrong object has no meaningful name
        if not is_valid_name(name):
            raise ConfigError(
                f"{self.kind} name {name!r} must be lower-case letters, digits and '_', "
                "starting with a letter (at most 64 characters)"
            )
        if obj is None:

            def decorate(target: _Obj) -> _Obj:
                self._put(name, target)
                return target

            return decorate
        self._put(name, obj)
        return obj

    def _check_type(self, obj: object) -> None:
        if self.item_type is not None and not isinstance(obj, self.item_type):
            raise ConfigError(
                f"a {self.kind} must be a {self.item_type.__name__}, got {type(obj).__name__}"
            )

    def _put(self, name: str, obj: object) -> None:
        self._check_type(obj)
        existing = self._items.get(name)
        if existing is not None and existing is not obj:
            raise ConfigError(f"a {self.kind} named {name!r} is already registered")
        self._items[name] = obj  # type: ignore[assignment]

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests and plugins that clean up after themselves).

        Raises:
            ConfigError: Nothing is registered under ``name``.
        """
        if self._items.pop(name, None) is None:
            raise ConfigError(f"no {self.kind} named {name!r} is registered")

    def get(self, name: str) -> T:
        """The object registered as ``name``, loading plugins first if needed.

        Raises:
            ConfigError: (exit 2) No such name; the message lists the registered ones.
        """
        found = self._items.get(name)
        if found is None:
            self.load_plugins()
            found = self._items.get(name)
        if found is None:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; registered: {', '.join(self.names()) or 'none'}"
            )
        return found

    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        return name in self._items

    def setdefault(self, name: str, obj: T) -> T:
        """The object registered as ``name``, after registering ``obj`` there if none is.

        Like :meth:`register`, and unlike a lookup, it never loads plugins.

        Raises:
            ConfigError: A malformed name, or an object of another type.
        """
        existing = self._items.get(name)
        return existing if existing is not None else self.register(name, obj)

    def names(self) -> tuple[str, ...]:
        """Every registered name, plugins included, sorted."""
        self.load_plugins()
        return tuple(sorted(self._items))

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, object)`` pairs, plugins included, sorted by name."""
        self.load_plugins()
        return tuple(sorted(self._items.items()))

    def in_registration_order(self) -> tuple[tuple[str, T], ...]:
        """``(name, object)`` pairs, plugins included, in the order they were registered.

        For a seam whose order means something (scoring metrics: report columns).
        """
        self.load_plugins()
        return tuple(self._items.items())

    def load_plugins(self) -> None:
        """Load the group's entry points once; each failure is a :class:`PluginWarning`."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True  # before loading: a plugin may look names up itself
        assert self.group is not None
        for entry in entry_points(group=self.group):
            self._load(entry)

    def _load(self, entry: EntryPoint) -> None:
        try:
            loaded = entry.load()
            if callable(loaded) and loaded not in self._items.values():
                loaded()
        except Exception as exc:  # a plugin's failure is its own, never the CLI's
            warnings.warn(
                f"{self.kind} plugin {entry.name!r} ({entry.value}, group {self.group}) "
                f"could not be loaded and is ignored: {type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=3,
            )


METRIC_PLUGINS: Final[Registry[Any]] = Registry("metric", METRICS_GROUP)
"""The one loader of the ``sommelier_mlflow.metrics`` group; it holds nothing itself.

The group's modules register catalog metrics, and scoring metrics from
before those had a group of their own, so both registries load it through
this one object: each entry point then runs once per process, whichever
registry asks first.
"""
