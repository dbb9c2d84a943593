"""The metric registry: every scoring metric is defined once, here or by a plug-in.

A metric is a name, a sentence saying what it counts, and a per-example
component function returning exact integers ``(numerator, denominator)``.
Everything downstream (corpus sums, slices, reports, bootstrap intervals,
McNemar, MLflow keys, Markdown, the evaluator table and the genai scorers)
iterates the registry instead of a positional tuple, so adding a metric is
one :func:`register_scoring_metric` call and no other code change.

Metrics are grouped into *scoring modes*: a mode is an ordered set of
metrics that share one per-example match type (``single`` matches one
parsed call with one gold call). Another mode, with its own parser and its
own match, registers its own set under its own name; a report records
the ``metric_names`` it was scored with, so readers never depend on what
happens to be registered when they run.

The sets live in a :class:`~sommelier_mlflow._plugins.Registry` whose
entry-point group, ``sommelier_mlflow.scoring_metrics`` (and the older
``sommelier_mlflow.metrics``, which the catalog shares), is loaded by every
function here that lists or reads metrics. Scoring, the evaluator, the genai
scorers and the training callback all read them through these functions, so
an installed plugin's metric reaches each of them, never only the commands
that happen to consult the catalog. Registering loads nothing, and neither
does :func:`builtin_scoring_metrics`, which tables built at import read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from sommelier_mlflow._plugins import (
    METRIC_PLUGINS,
    SCORING_METRICS_GROUP,
    Registry,
    is_valid_name,
)
from sommelier_mlflow.errors import ConfigError, UnknownMetricError

__all__ = [
    "DEFAULT_MODE",
    "ScoringMetric",
    "add_metric_set",
    "scoring_modes",
    "register_scoring_metric",
    "is_builtin_metric",
    "unregister_scoring_metric",
    "scoring_metrics",
    "scoring_metric_names",
    "builtin_scoring_metrics",
    "mcnemar_metric",
]

DEFAULT_MODE: Final = "single"

MatchT = TypeVar("MatchT")


@dataclass(frozen=True, slots=True)
class ScoringMetric(Generic[MatchT]):
    """The one definition of a scoring metric.

    Attributes:
        name: Metric name, ``[a-z][a-z0-9_]*``; the last segment of its MLflow keys.
        description: What the metric counts, in one sentence (shown to genai users).
        component: Per-example function from the mode's match object
            (:class:`~sommelier_mlflow.toolcalls.CallMatch` in the
            ``single`` mode) to exact non-negative integers
            ``(numerator, denominator)`` with ``numerator <= denominator``.
            Corpus values are sums of these, so they must be additive.
        binary: Every example contributes ``0/1`` or ``1/1``: the metric is a
            per-example yes/no outcome (a boolean table column and scorer).
        mcnemar: McNemar's test may use this metric's per-example outcome
            (requires ``binary``). A comparison tests the first such metric
            of the reports' ``metric_names``.
        table_column: Column of the per-example table: a boolean for a binary
            metric, ``<column>_numerator``/``<column>_denominator`` otherwise
            (default: the metric name).
        in_table: Whether the per-example table shows the metric at all (off
            when another column already says the same, e.g. the parse status).
    """

    name: str
    description: str
    component: Callable[[MatchT], tuple[int, int]]
    binary: bool = False
    mcnemar: bool = False
    table_column: str | None = None
    in_table: bool = True

    def __post_init__(self) -> None:
        if not is_valid_name(self.name):
            raise ConfigError(
                f"scoring metric name {self.name!r} must match [a-z][a-z0-9_]* (at most 64 "
                "characters): it becomes an MLflow key segment and a report field"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigError(f"scoring metric {self.name!r} needs a description of what it counts")
        if not callable(self.component):
            raise ConfigError(f"scoring metric {self.name!r}: component must be callable")
        if self.mcnemar and not self.binary:
            raise ConfigError(
                f"scoring metric {self.name!r}: McNemar needs a per-example yes/no outcome, "
                "so mcnemar=True requires binary=True"
            )
        column = self.column
        if not is_valid_name(column):
            raise ConfigError(
                f"scoring metric {self.name!r}: table column {column!r} must match [a-z][a-z0-9_]*"
            )

    @property
    def column(self) -> str:
        """The per-example table column (or column stem, for a non-binary metric)."""
        return self.table_column if self.table_column is not None else self.name

    def table_columns(self) -> tuple[str, ...]:
        """The per-example table columns this metric fills (none when ``in_table`` is off)."""
        if not self.in_table:
            return ()
        if self.binary:
            return (self.column,)
        return (f"{self.column}_numerator", f"{self.column}_denominator")


# Each mode's metrics, by mode name: a registry of registries, so names, types and
# refusals follow the one rule of every seam, and the outer one loads the plugins.
_METRIC_SETS: Final[Registry[Registry[ScoringMetric[Any]]]] = Registry(
    "scoring metric", SCORING_METRICS_GROUP, Registry
)
# Metrics registered at import by the package itself: plug-ins may add to a
# mode but not take its specified metrics away.
_BUILTIN: set[tuple[str, str]] = set()
# The package's own definitions, by identity: their components are trusted to
# return exact counts, so scoring skips the per-row check it runs on plug-ins.
_BUILTIN_METRICS: set[int] = set()


def _load_plugins() -> None:
    """Load both groups that may hold scoring metrics (each once per process)."""
    _METRIC_SETS.load_plugins()
    METRIC_PLUGINS.load_plugins()


def _registered_set(mode: str) -> Registry[ScoringMetric[Any]]:
    """The metric set of ``mode`` as registered so far (plugins load only if it is missing)."""
    try:
        return _METRIC_SETS.get(mode)
    except ConfigError:
        raise UnknownMetricError(
            f"unknown scoring mode {mode!r}; registered modes: {list(_METRIC_SETS.names())}"
        ) from None


def _metric_set(mode: str) -> Registry[ScoringMetric[Any]]:
    """The metric set of ``mode`` with every plugin's metrics in it."""
    _load_plugins()
    return _registered_set(mode)


def add_metric_set(mode: str) -> None:
    """Open the (empty) metric set of a scoring mode; :func:`register_scoring_mode` calls it.

    The mode object itself lives in :mod:`~sommelier_mlflow.toolcalls._modes`;
    this registry only holds each mode's metrics. Opening an existing set is a
    no-op, so re-registering the same mode object keeps its metrics.

    Raises:
        ConfigError: If the name is malformed.
    """
    if not is_valid_name(mode):
        raise ConfigError(f"scoring mode name {mode!r} must match [a-z][a-z0-9_]*")
    metrics: Registry[ScoringMetric[Any]] = Registry(
        f"scoring metric of mode {mode!r}", item_type=ScoringMetric
    )
    _METRIC_SETS.setdefault(mode, metrics)


add_metric_set(DEFAULT_MODE)


def scoring_modes() -> tuple[str, ...]:
    """The scoring modes with a metric set, plugins included, in registration order."""
    return tuple(name for name, _ in _METRIC_SETS.in_registration_order())


def register_scoring_metric(
    metric: ScoringMetric[Any], *, mode: str = DEFAULT_MODE, builtin: bool = False
) -> ScoringMetric[Any]:
    """Add a metric to a scoring mode; every later scoring of that mode includes it.

    Args:
        metric: The definition.
        mode: The scoring mode whose match objects ``metric.component`` reads.
        builtin: Mark it as one of the package's own (cannot be unregistered).

    Returns:
        The metric, so a module can keep a handle to what it registered.

    Raises:
        ConfigError: If the mode already has a metric of that name or one
            filling the same table column.
        UnknownMetricError: If the mode is not registered.
    """
    if not isinstance(metric, ScoringMetric):
        raise ConfigError(f"expected a ScoringMetric, got {type(metric).__name__}")
    metrics = _registered_set(mode)
    registered = metrics.in_registration_order()
    if any(name == metric.name for name, _ in registered):
        raise ConfigError(
            f"scoring mode {mode!r} already has a metric named {metric.name!r}; "
            "unregister it first or choose another name"
        )
    taken = {column for _, other in registered for column in other.table_columns()}
    clash = sorted(taken.intersection(metric.table_columns()))
    if clash:
        raise ConfigError(
            f"scoring metric {metric.name!r} would fill table column(s) {clash} that another "
            f"metric of mode {mode!r} already fills; set table_column"
        )
    metrics.register(metric.name, metric)
    if builtin:
        _BUILTIN.add((mode, metric.name))
        _BUILTIN_METRICS.add(id(metric))
    return metric


def is_builtin_metric(metric: ScoringMetric[Any]) -> bool:
    """Whether ``metric`` is one of the package's own registered definitions."""
    return id(metric) in _BUILTIN_METRICS


def unregister_scoring_metric(name: str, *, mode: str = DEFAULT_MODE) -> None:
    """Remove a metric a plug-in (or a test) registered.

    Raises:
        ConfigError: If it is one of the package's own metrics.
        UnknownMetricError: If no such metric is registered.
    """
    metrics = _registered_set(mode)
    if (mode, name) in _BUILTIN:
        raise ConfigError(f"{name!r} is a built-in metric of mode {mode!r} and cannot be removed")
    if name not in metrics:
        raise UnknownMetricError(f"scoring mode {mode!r} has no metric {name!r}")
    metrics.unregister(name)


def scoring_metrics(mode: str = DEFAULT_MODE) -> tuple[ScoringMetric[Any], ...]:
    """The metrics of a mode, plugins included, in registration order (the spec's order first).

    Raises:
        UnknownMetricError: (exit 2) No such mode; the message lists the registered ones.
    """
    return tuple(metric for _, metric in _metric_set(mode).in_registration_order())


def scoring_metric_names(mode: str = DEFAULT_MODE) -> tuple[str, ...]:
    """The names of :func:`scoring_metrics`, in the same order."""
    return tuple(name for name, _ in _metric_set(mode).in_registration_order())


def builtin_scoring_metrics(mode: str = DEFAULT_MODE) -> tuple[ScoringMetric[Any], ...]:
    """The package's own metrics of a mode, in registration order, without loading plugins.

    For what is built while the package imports (``METRIC_NAMES``, the catalog
    classes, the named scorers): loading a plugin there would run its
    ``import sommelier_mlflow`` against a half-imported package.
    """
    registered = _registered_set(mode).in_registration_order()
    return tuple(metric for _, metric in registered if is_builtin_metric(metric))


def mcnemar_metric(names: tuple[str, ...] | list[str]) -> str | None:
    """The first of ``names`` that some mode registers as McNemar's outcome, if any.

    Reports record their metric names; this finds which of them a comparison
    may test, without assuming the mode that produced them is the default.
    """
    _load_plugins()
    flagged = {
        metric.name
        for _, metrics in _METRIC_SETS.in_registration_order()
        for _, metric in metrics.in_registration_order()
        if metric.mcnemar
    }
    return next((name for name in names if name in flagged), None)
