"""The generic measure contract: ``BaseMeasure[T]``.

A measure maps one text (a model output) to ``{result_key: value}`` where the
value has the JSON type ``T`` the class declares. Everything that can be
checked before any text is scored is checked when the class is *defined*: the
value type must be JSON, ``evaluate`` must exist with the right signature and
the configuration schema is hardened. Misdeclared measures therefore fail at
import, next to their definition, instead of deep inside an evaluation run.

Measures also form trees (see :class:`~sommelier_mlflow.metrics.CompositeMeasure`)
so that several measures can be requested and evaluated as one unit. Tree nodes
are compared by identity: two measures with equal configuration are still two
nodes.

Reference-based measures: a measure that needs a gold answer per row (tool-call
measures compare a parsed call with a gold call) declares
``def evaluate(self, text: str, *, reference: Any = None) -> dict[str, T]``.
Callers that may hold a reference use :meth:`BaseMeasure.score`, which passes
``reference`` only to measures whose ``evaluate`` accepts it, so plain
per-text measures keep their one-argument contract.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections import deque
from collections.abc import Callable, Iterator
from typing import (
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeVar,
    cast,
    get_args,
    get_origin,
)

from pydantic import BaseModel, ValidationError

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.errors import MetricConfigError, MetricTypeError
from sommelier_mlflow.metrics._config import (
    NoConfig,
    describe_validation_error,
    prepare_config_schema,
    secret_fields,
)
from sommelier_mlflow.metrics._types import (
    contains_typevar,
    describe_type,
    is_serializable_type,
    matches_type,
    same_type,
)

__all__ = ["validate_measure_name", "BaseMeasure", "config_schema"]

T = TypeVar("T")
_M = TypeVar("_M", bound="BaseMeasure[Any]")
_MetricClass = TypeVar("_MetricClass", bound="type[BaseMeasure[Any]]")

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_REFERENCE = "reference"
_UNSET: Any = object()


def validate_measure_name(value: object, what: str) -> str:
    """Check a catalog name or result key.

    Both end up as a segment of MLflow metric keys, where ``/`` starts a new
    chart section and spaces are easy to mistype, so only letters, digits,
    ``_``, ``.`` and ``-`` are allowed.

    Raises:
        MetricTypeError: If ``value`` is not a string.
        MetricConfigError: If the string is empty or has other characters.
    """
    if not isinstance(value, str):
        raise MetricTypeError(f"{what} must be a string, got {type(value).__name__}.")
    if not _NAME_PATTERN.fullmatch(value):
        raise MetricConfigError(
            f"{what} {value!r} is not allowed: use letters, digits, '_', '.' and '-' only, "
            "starting with a letter, digit or '_'."
        )
    return value


class _ClassLevelName:
    """``name`` readable on the class and its instances, never set per instance.

    The name identifies the class in the catalog, so it lives on the class;
    instances read it live, which is what makes a later
    ``register_measure(name=...)`` visible on instances created before.
    """

    def __get__(self, obj: object, owner: type[Any]) -> str:
        return cast(str, owner._metric_name)

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(
            "A measure's name is class-level (it is its catalog name); set `result_key` to "
            "rename one instance's output, or use register_measure(name=...) to rename the class."
        )


def _resolve_value_type(cls: type[BaseMeasure[Any]]) -> Any:
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = get_origin(base)
        if origin is BaseMeasure:
            return get_args(base)[0]
        if isinstance(origin, type) and issubclass(origin, BaseMeasure):
            template = origin.value_type
            mapping = dict(zip(getattr(origin, "__parameters__", ()), get_args(base), strict=False))
            if isinstance(template, TypeVar):
                return mapping.get(template, template)
            params = getattr(template, "__parameters__", ())
            if params:
                return template[tuple(mapping.get(p, p) for p in params)]
            return template
    inherited = getattr(cls, "value_type", _UNSET)
    if inherited is _UNSET:
        raise MetricTypeError(
            f"Measure class {cls.__name__!r} does not bind its value type: derive from "
            "BaseMeasure[T] with a JSON type, e.g. `class MyMeasure(BaseMeasure[int])`."
        )
    return inherited


def _resolve_annotation(func: Callable[..., Any], key: str, owner: str) -> Any:
    raw = func.__annotations__.get(key, inspect.Parameter.empty)
    if not isinstance(raw, str):
        return raw
    probe = types.SimpleNamespace(__annotations__={key: raw})
    try:
        return typing.get_type_hints(probe, globalns=getattr(func, "__globals__", {}))[key]
    except Exception as exc:  # any failure to evaluate the annotation string
        raise MetricTypeError(
            f"Cannot resolve the annotation {raw!r} of {owner}.evaluate ({exc}); "
            "import the names it uses at module level."
        ) from exc


def _check_evaluate(cls: type[BaseMeasure[Any]], value_type: Any, *, abstract: bool) -> bool:
    """Validate ``cls.evaluate`` and report whether it accepts ``reference``."""
    owner = cls.__name__
    expected = f"def evaluate(self, text: str) -> dict[str, {describe_type(value_type)}]"
    static = inspect.getattr_static(cls, "evaluate", None)
    if static is BaseMeasure.__dict__["evaluate"]:
        if abstract:
            return False
        raise MetricTypeError(f"Measure class {owner!r} must implement `{expected}`.")
    if isinstance(static, (staticmethod, classmethod)) or not inspect.isfunction(static):
        raise MetricTypeError(f"{owner}.evaluate must be a plain instance method: `{expected}`.")
    params = list(inspect.signature(static).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) < 2 or any(p.kind not in positional for p in params[:2]):
        raise MetricTypeError(
            f"{owner}.evaluate must take the text as its one positional argument: `{expected}`."
        )
    accepts_reference = False
    for extra in params[2:]:
        if (
            extra.name == _REFERENCE
            and extra.kind is inspect.Parameter.KEYWORD_ONLY
            and extra.default is not inspect.Parameter.empty
        ):
            accepts_reference = True
            continue
        raise MetricTypeError(
            f"{owner}.evaluate has an unsupported parameter {extra.name!r}. Besides the text it "
            "may only take a keyword-only `reference` with a default, e.g. "
            "`def evaluate(self, text: str, *, reference: Any = None)`."
        )
    text_annotation = _resolve_annotation(static, params[1].name, owner)
    if text_annotation is not inspect.Parameter.empty and text_annotation is not str:
        raise MetricTypeError(
            f"{owner}.evaluate must take `text: str`, got {describe_type(text_annotation)}."
        )
    returned = _resolve_annotation(static, "return", owner)
    if returned is inspect.Parameter.empty:
        raise MetricTypeError(f"{owner}.evaluate must annotate its return type: `{expected}`.")
    if not same_type(returned, dict[str, value_type]):
        raise MetricTypeError(
            f"{owner}.evaluate returns {describe_type(returned)}, but the class declares "
            f"BaseMeasure[{describe_type(value_type)}]: `{expected}`."
        )
    return accepts_reference


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class BaseMeasure(Generic[T]):
    """A measure over one text whose value has the JSON type ``T``.

    Subclass it as ``class MyMeasure(BaseMeasure[int])`` and implement
    ``evaluate(self, text: str) -> dict[str, int]``, usually ending in
    ``return self.result(value)``. Give it runtime parameters with a pydantic
    schema, either as the ``config_schema`` class attribute or with the
    :func:`~sommelier_mlflow.metrics.config_schema` decorator. Pass
    ``abstract=True`` in the class statement for a shared base class that does
    not implement ``evaluate`` itself; a class whose value type is still a type
    variable is abstract too.

    Attributes:
        value_type: The bound ``T``, checked to be a JSON type.
        config_schema: The (hardened) pydantic model runtime parameters must fit.
        accepts_reference: Whether ``evaluate`` takes a keyword-only
            ``reference`` (the gold answer of the row).
        name: The class-level catalog name; also the default ``result_key``.
    """

    value_type: ClassVar[Any]
    config_schema: ClassVar[type[BaseModel]] = NoConfig
    accepts_reference: ClassVar[bool] = False
    name = _ClassLevelName()
    _metric_name: ClassVar[str] = "BaseMeasure"
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_metric_name" not in cls.__dict__:
            cls._metric_name = cls.__name__
        declared = cls.__dict__.get("config_schema")
        if declared is not None:
            cls.config_schema = prepare_config_schema(declared, cls.__name__)
        value_type = _resolve_value_type(cls)
        generic = contains_typevar(value_type)
        if not generic and not is_serializable_type(value_type):
            raise MetricTypeError(
                f"Measure class {cls.__name__!r} declares value type {describe_type(value_type)}, "
                "which is not JSON-serialisable. Use bool, int, float, str, None, list[X], "
                "dict[str, X], unions/Literal of those, or JSONValue."
            )
        cls.value_type = value_type
        cls._abstract = abstract or generic
        cls.accepts_reference = _check_evaluate(cls, value_type, abstract=cls._abstract)

    def __init__(self, **kwargs: Any) -> None:
        cls = type(self)
        if cls._abstract:
            raise MetricTypeError(
                f"{cls.__name__} is abstract; instantiate a concrete subclass that binds "
                "its value type and implements evaluate."
            )
        self._parent: BaseMeasure[Any] | None = None
        self._result_key: str | None = None
        self._settings: BaseModel = cls._validate_config(kwargs)

    @classmethod
    def _validate_config(cls, params: dict[str, Any]) -> BaseModel:
        schema = cls.config_schema
        if not schema.model_fields:
            if params:
                raise MetricConfigError(
                    f"Measure {cls.name!r} takes no runtime parameters, got {sorted(params)}. "
                    "Remove them, or give the measure a config_schema."
                )
            return schema()
        try:
            return schema.model_validate(params)
        except ValidationError as exc:
            message = describe_validation_error(exc, cls.name, schema, params=params)
            # Chaining pydantic's error would print rejected secrets in tracebacks.
            cause = None if secret_fields(schema) else exc
            raise MetricConfigError(message) from cause

    @classmethod
    def from_config(cls: type[_M], json_payload: str | None = None, **kwargs: Any) -> _M:
        """Build a measure from keyword parameters or a JSON object string.

        Args:
            json_payload: The parameters as a JSON object, e.g. read from a
                config file or a CLI flag. Strict JSON only.
            **kwargs: The parameters as Python values.

        Returns:
            A new, validated instance of this measure class.

        Raises:
            MetricConfigError: (a ``ValueError``) If both forms are given, the
                payload is not a JSON object, or the parameters do not fit
                ``config_schema``.
            MetricTypeError: (a ``TypeError``) If ``json_payload`` is not a string.
        """
        if json_payload is None:
            return cls(**kwargs)
        if kwargs:
            raise MetricConfigError(
                f"Pass the configuration of {cls.name!r} either as json_payload or as keyword "
                f"arguments, not both (got json_payload and {sorted(kwargs)})."
            )
        payload: object = json_payload  # callers outside mypy pass anything
        if not isinstance(payload, str):
            hint = ""
            if isinstance(payload, dict):
                hint = " Pass a mapping as keyword arguments: from_config(**config)."
            raise MetricTypeError(
                f"json_payload must be a JSON string or None, got {type(payload).__name__}.{hint}"
            )
        try:
            params = loads(payload)
        except JSONDecodeError as exc:
            raise MetricConfigError(
                f"json_payload for measure {cls.name!r} is not valid JSON ({exc}); "
                'pass a JSON object such as \'{"key": "value"}\'.'
            ) from exc
        if not isinstance(params, dict):
            raise MetricConfigError(
                f"json_payload for measure {cls.name!r} must be a JSON object, "
                f"got {type(params).__name__}."
            )
        return cls(**params)

    def evaluate(self, text: str) -> dict[str, T]:
        """Score one text; every concrete measure implements this.

        Args:
            text: The model output to score.

        Returns:
            ``{result_key: value}``; see :meth:`result`.

        Raises:
            MetricTypeError: Always, here: class creation already refuses a
                concrete measure without its own ``evaluate``, so reaching this
                means an abstract measure was called directly.
        """
        raise MetricTypeError(
            f"{type(self).__name__} is abstract: subclass it and implement evaluate(text)"
        )

    def score(self, text: str, *, reference: Any = None) -> dict[str, T]:
        """Evaluate ``text`` and check the output, passing ``reference`` if accepted.

        This is the entry point for callers: it forwards the row's gold answer
        only to measures that declare a ``reference`` parameter, and it refuses
        outputs that are not ``dict[str, T]`` so a faulty measure is named at
        the point of failure rather than when a report is written.

        Raises:
            MetricTypeError: If ``text`` is not a string or ``evaluate``
                returned something other than ``dict[str, T]``.
        """
        if not isinstance(text, str):
            raise MetricTypeError(
                f"Measure {self.name!r} scores text (str), got {type(text).__name__}."
            )
        evaluate = cast(Callable[..., Any], self.evaluate)
        output = evaluate(text, reference=reference) if self.accepts_reference else evaluate(text)
        if not isinstance(output, dict):
            raise MetricTypeError(
                f"{type(self).__name__}.evaluate must return a dict, got {type(output).__name__}."
            )
        for key, value in output.items():
            if not isinstance(key, str) or not matches_type(value, self.value_type):
                raise MetricTypeError(
                    f"{type(self).__name__}.evaluate returned {key!r}: {_short(value)}, which is "
                    f"not a str key with a {describe_type(self.value_type)} value."
                )
        return cast(dict[str, T], output)

    def result(self, value: T) -> dict[str, T]:
        """Wrap a computed value as this measure's output, checking its type.

        Raises:
            MetricTypeError: If ``value`` is not of the declared type ``T`` (or
                is not JSON, such as ``nan``).
        """
        if not matches_type(value, self.value_type):
            raise MetricTypeError(
                f"Measure {self.name!r} produced {_short(value)} ({type(value).__name__}), "
                f"which is not of its declared type {describe_type(self.value_type)}."
            )
        return {self.result_key: value}

    @property
    def settings(self) -> BaseModel:
        """The validated, frozen configuration model, secrets included."""
        return self._settings

    @property
    def config(self) -> dict[str, Any]:
        """The validated configuration as plain JSON data, secrets masked.

        This is the view meant for people and logs (reports, MLflow params);
        measures read their real parameters from :attr:`settings`.
        """
        return self._settings.model_dump(mode="json")

    @property
    def result_key(self) -> str:
        """Key of this instance's value in results; defaults to :attr:`name`.

        Set it to tell apart two instances of one class in the same request.
        """
        return self._result_key if self._result_key is not None else type(self).name

    @result_key.setter
    def result_key(self, value: str | None) -> None:
        if value is not None:
            validate_measure_name(value, "result_key")
        previous = self._result_key
        self._result_key = value
        if self._parent is not None and not self.is_composite:
            try:
                self.root._check_unique_keys()
            except MetricConfigError:
                self._result_key = previous
                raise

    def _check_unique_keys(self) -> None:
        seen: dict[str, BaseMeasure[Any]] = {}
        for node in self.descendants(include_self=True):
            if node.is_composite:
                continue
            other = seen.setdefault(node.result_key, node)
            if other is not node:
                raise MetricConfigError(
                    f"Two measures in one tree would both report {node.result_key!r} "
                    f"({type(other).__name__} and {type(node).__name__}); give one a distinct "
                    "result_key before adding it."
                )

    @property
    def parent(self) -> BaseMeasure[Any] | None:
        """The composite this measure belongs to, or ``None`` for a root.

        Assigning moves the measure: ``m.parent = c`` adds it to ``c`` (leaving
        its old parent) and ``m.parent = None`` detaches it.
        """
        return self._parent

    @parent.setter
    def parent(self, value: BaseMeasure[Any] | None) -> None:
        old = self._parent
        if value is old:
            return
        if value is not None and not (isinstance(value, BaseMeasure) and value.is_composite):
            raise MetricTypeError(
                f"A measure's parent must be a CompositeMeasure, got {type(value).__name__}."
            )
        if old is not None:
            old._release(self)
        if value is None:
            return
        try:
            value._adopt(self)
        except Exception:
            if old is not None:
                old._adopt(self)
            raise

    def _adopt(self, child: BaseMeasure[Any]) -> None:
        """Attach ``child``: the hook the ``parent`` setter calls on the new parent.

        Only composites hold children; they override this (and :meth:`_release`)
        with their ``add``/``remove``. Keeping the hooks here means this module
        never needs to know the composite class, so the two do not import
        each other.
        """
        raise MetricTypeError(
            f"A measure's parent must be a CompositeMeasure, got {type(self).__name__}."
        )

    def _release(self, child: BaseMeasure[Any]) -> None:
        """Detach ``child``: the hook the ``parent`` setter calls on the old parent."""
        raise MetricTypeError(f"{type(self).__name__} holds no children.")

    @property
    def children(self) -> Iterator[BaseMeasure[Any]]:
        """The direct children; always empty for a leaf metric."""
        return iter(())

    @property
    def is_composite(self) -> bool:
        """Whether this measure can hold children."""
        return False

    @property
    def is_root(self) -> bool:
        """Whether this measure has no parent."""
        return self._parent is None

    @property
    def root(self) -> BaseMeasure[Any]:
        """The top of the tree this measure belongs to (itself for a root)."""
        node: BaseMeasure[Any] = self
        seen = {id(node)}
        while node._parent is not None and id(node._parent) not in seen:
            node = node._parent
            seen.add(id(node))
        return node

    @property
    def depth(self) -> int:
        """Number of edges between this measure and its root (0 for a root)."""
        node: BaseMeasure[Any] = self
        seen = {id(node)}
        while node._parent is not None and id(node._parent) not in seen:
            node = node._parent
            seen.add(id(node))
        return len(seen) - 1

    def descendants(
        self, *, include_self: bool = False, order: Literal["dfs", "bfs"] = "dfs"
    ) -> Iterator[BaseMeasure[Any]]:
        """Walk the subtree under this measure, each node once even if linked twice.

        Args:
            include_self: Yield this measure first.
            order: ``"dfs"`` for pre-order depth-first, ``"bfs"`` for level order.
                Children are visited in insertion order either way.

        Yields:
            The nodes of the subtree.

        Raises:
            MetricConfigError: If ``order`` is neither ``"dfs"`` nor ``"bfs"``.
        """
        if order not in ("dfs", "bfs"):
            raise MetricConfigError(f"order must be 'dfs' or 'bfs', got {order!r}.")
        return self._walk(include_self=include_self, depth_first=order == "dfs")

    def _walk(self, *, include_self: bool, depth_first: bool) -> Iterator[BaseMeasure[Any]]:
        visited = {id(self)}
        if include_self:
            yield self
        pending: deque[BaseMeasure[Any]] = deque(self.children)
        while pending:
            node = pending.popleft()
            if id(node) in visited:
                continue
            visited.add(id(node))
            yield node
            if depth_first:
                pending.extendleft(reversed(list(node.children)))
            else:
                pending.extend(node.children)

    def __iter__(self) -> Iterator[BaseMeasure[Any]]:
        """Iterate over the subtree below this measure in breadth-first order."""
        return self.descendants(order="bfs")

    def __contains__(self, item: object) -> bool:
        """Membership below this measure: by name for a string, by identity otherwise."""
        if isinstance(item, str):
            return any(node.name == item for node in self.descendants())
        return any(node is item for node in self.descendants())

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return object.__hash__(self)

    def _label(self) -> str:
        cls = type(self)
        parts: list[str] = []
        if cls.name != cls.__name__:
            parts.append(f"name={cls.name!r}")
        if self._result_key is not None:
            parts.append(f"result_key={self._result_key!r}")
        parts.extend(f"{key}={_short(value)}" for key, value in self.config.items())
        return f"{cls.__name__}({', '.join(parts)})"

    def __repr__(self) -> str:
        lines = [self._label()]
        self._render_children(lines, prefix="", ancestors={id(self)})
        return "\n".join(lines)

    def _render_children(self, lines: list[str], *, prefix: str, ancestors: set[int]) -> None:
        kids = list(self.children)
        for index, child in enumerate(kids):
            last = index == len(kids) - 1
            branch = "└── " if last else "├── "
            if id(child) in ancestors:
                lines.append(f"{prefix}{branch}<cycle: {type(child).__name__}>")
                continue
            lines.append(f"{prefix}{branch}{child._label()}")
            child._render_children(
                lines,
                prefix=prefix + ("    " if last else "│   "),
                ancestors=ancestors | {id(child)},
            )


def config_schema(schema: type[BaseModel]) -> Callable[[_MetricClass], _MetricClass]:
    """Class decorator that attaches a runtime configuration schema to a metric.

    Equivalent to setting the ``config_schema`` class attribute, but keeps the
    schema visible at the top of the class definition.

    Args:
        schema: A pydantic model class describing the accepted parameters.

    Returns:
        A decorator that sets the (hardened) schema on the measure class.

    Raises:
        MetricTypeError: If ``schema`` is not a pydantic model, or the decorated
            class is not a metric.
    """

    def decorate(cls: _MetricClass) -> _MetricClass:
        if not (isinstance(cls, type) and issubclass(cls, BaseMeasure)):
            raise MetricTypeError(
                f"@config_schema decorates measure classes (BaseMeasure subclasses), got {cls!r}."
            )
        cls.config_schema = prepare_config_schema(schema, cls.__name__)
        return cls

    prepare_config_schema(schema, "<decorator>")
    return decorate
