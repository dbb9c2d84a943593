"""Composite measures: evaluate several measures on one text as one unit.

A composite's result is the flat union of its leaves' results, so a request
for several measures yields one mapping of ``result_key -> value`` whatever the
nesting. Because the union is flat, two leaves reporting the same key would
silently overwrite each other; that is refused when the tree is built and
again when it is evaluated.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sommelier_mlflow.errors import MetricConfigError, MetricTypeError
from sommelier_mlflow.metrics._base import BaseMeasure
from sommelier_mlflow.metrics._types import JSONValue

__all__ = ["CompositeMeasure"]


class CompositeMeasure(BaseMeasure[JSONValue]):
    """A measure whose value is the merged output of its children.

    ``CompositeMeasure(a, b)`` is the same as ``CompositeMeasure().add(a, b)``.
    Children keep insertion order, which is also the order of evaluation.
    The row's ``reference`` is passed to the children whose ``evaluate``
    accepts one and withheld from the others.
    """

    def __init__(self, *children: BaseMeasure[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._children: list[BaseMeasure[Any]] = []
        self.add(*children)

    @property
    def is_composite(self) -> bool:
        """Always ``True``: a composite can hold children."""
        return True

    @property
    def children(self) -> Iterator[BaseMeasure[Any]]:
        """The direct children, in insertion order (a snapshot, safe to mutate under)."""
        return iter(list(self._children))

    def add(self, *metrics: BaseMeasure[Any]) -> CompositeMeasure:
        """Attach measures as children; all of them or, on error, none.

        Returns:
            This composite, so calls can be chained.

        Raises:
            MetricTypeError: If an argument is not a metric.
            MetricConfigError: If a measure already has a parent, would create a
                cycle, or would report a result key that the tree already has.
        """
        attached: list[BaseMeasure[Any]] = []
        try:
            for metric in metrics:
                self._attach(metric)
                attached.append(metric)
        except Exception:
            for metric in reversed(attached):
                self.remove(metric)
            raise
        return self

    def _attach(self, metric: BaseMeasure[Any]) -> None:
        if not isinstance(metric, BaseMeasure):
            raise MetricTypeError(
                f"A CompositeMeasure holds measures, got {type(metric).__name__}."
            )
        if metric._parent is self:
            raise MetricConfigError(f"{type(metric).__name__} is already a child of this measure.")
        if metric._parent is not None:
            raise MetricConfigError(
                f"{type(metric).__name__} already belongs to {type(metric._parent).__name__}; "
                "remove it there first (or set `metric.parent` to move it)."
            )
        if any(node is self for node in metric.descendants(include_self=True)):
            raise MetricConfigError(
                f"Adding {type(metric).__name__} here would make the measure tree a cycle."
            )
        self._children.append(metric)
        metric._parent = self
        try:
            self.root._check_unique_keys()
        except MetricConfigError:
            self._children.pop()
            metric._parent = None
            raise

    def remove(self, metric: BaseMeasure[Any]) -> None:
        """Detach a direct child (matched by identity).

        Raises:
            MetricConfigError: If ``metric`` is not a direct child.
        """
        for index, child in enumerate(self._children):
            if child is metric:
                del self._children[index]
                metric._parent = None
                return
        raise MetricConfigError(
            f"{type(metric).__name__} is not a direct child of this measure; nothing removed."
        )

    def _adopt(self, child: BaseMeasure[Any]) -> None:
        self.add(child)

    def _release(self, child: BaseMeasure[Any]) -> None:
        self.remove(child)

    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, JSONValue]:
        """Evaluate every child on ``text`` and merge their outputs.

        Raises:
            MetricConfigError: If two children report the same key.
        """
        merged: dict[str, JSONValue] = {}
        source: dict[str, BaseMeasure[Any]] = {}
        for child in self._children:
            for key, value in child.score(text, reference=reference).items():
                if key in merged:
                    raise MetricConfigError(
                        f"Both {type(source[key]).__name__} and {type(child).__name__} reported "
                        f"{key!r}; give one of them a distinct result_key."
                    )
                merged[key] = value
                source[key] = child
        return merged
