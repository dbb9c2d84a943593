"""Which value types a measure may produce, and checking values against them.

Measure results end up in JSON reports and MLflow, so a measure's value type
``T`` must describe JSON and nothing else: ``bool``, ``int``, ``float``,
``str``, ``None``, ``list[X]``, ``dict[str, X]``, unions and ``Literal`` of
those, nested freely. Checking the annotation once, when the measure class is
created, turns a late serialisation failure into an immediate, local error.

Values are checked with the same strictness as canonical JSON: ``True`` is not
an ``int``, ``1`` is not a ``float`` and non-finite floats are not JSON at all.
"""

from __future__ import annotations

import math
import types
import typing
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

__all__ = [
    "JSONValue",
    "contains_typevar",
    "is_serializable_type",
    "is_json_value",
    "matches_type",
    "same_type",
    "describe_type",
]

if TYPE_CHECKING:
    # For the type checker: the real recursive shape of a JSON value.
    JSONValue = Union[  # noqa: UP007 - recursive alias needs the Union spelling on 3.10
        bool, int, float, str, None, list["JSONValue"], dict[str, "JSONValue"]
    ]
else:

    class JSONValue:
        """Runtime marker for "any JSON value".

        A recursive ``Union`` alias turns into a tangle of forward references at
        runtime; a unique marker class keeps annotations such as
        ``dict[str, JSONValue]`` comparable by identity.
        """

        def __new__(cls, *args: object, **kwargs: object) -> JSONValue:
            raise TypeError("JSONValue is an annotation marker and cannot be instantiated.")


_PRIMITIVES: tuple[type, ...] = (bool, int, float, str, type(None))
_UNION_ORIGINS: tuple[object, ...] = (Union, types.UnionType)
_LITERAL_TYPES: tuple[type, ...] = (bool, int, str, type(None))


def _is_json_marker(tp: object) -> bool:
    return tp is JSONValue or (
        isinstance(tp, typing.ForwardRef) and tp.__forward_arg__ == "JSONValue"
    )


def contains_typevar(tp: object) -> bool:
    """Whether an annotation still has an unbound type parameter in it."""
    if isinstance(tp, TypeVar):
        return True
    return any(contains_typevar(arg) for arg in get_args(tp))


def is_serializable_type(tp: object) -> bool:
    """Whether ``tp`` describes only JSON values.

    Bare ``list``/``dict``, ``tuple``, ``Any`` and non-string dict keys are
    refused because a value of that type cannot be checked or may not survive a
    JSON round trip unchanged.
    """
    if _is_json_marker(tp) or tp is None:
        return True
    if isinstance(tp, type) and tp in _PRIMITIVES:
        return True
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return is_serializable_type(args[0])
    if origin in _UNION_ORIGINS:
        return all(is_serializable_type(arg) for arg in args)
    if origin is Literal:
        return all(type(arg) in _LITERAL_TYPES for arg in args)
    if origin is list:
        return len(args) == 1 and is_serializable_type(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and is_serializable_type(args[1])
    return False


def is_json_value(value: object) -> bool:
    """Whether ``value`` is a strict JSON value (finite floats, string keys)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_json_value(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json_value(v) for k, v in value.items())
    return False


def matches_type(value: object, tp: object) -> bool:
    """Whether ``value`` is an instance of the serialisable annotation ``tp``.

    ``tp`` must satisfy :func:`is_serializable_type`; anything else never
    matches.
    """
    if _is_json_marker(tp):
        return is_json_value(value)
    if tp is None or tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, float) and math.isfinite(value)
    if tp is str:
        return isinstance(value, str)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return matches_type(value, args[0])
    if origin in _UNION_ORIGINS:
        return any(matches_type(value, arg) for arg in args)
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin is list:
        return isinstance(value, list) and all(matches_type(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and matches_type(v, args[1]) for k, v in value.items()
        )
    return False


def _normalise(tp: object) -> Any:
    if _is_json_marker(tp):
        return ("json",)
    if tp is None or tp is type(None):
        return type(None)
    if isinstance(tp, TypeVar):
        return ("typevar",)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return _normalise(args[0])
    if origin in _UNION_ORIGINS:
        return ("union", frozenset(_normalise(arg) for arg in args))
    if origin is Literal:
        return ("literal", frozenset((type(arg), arg) for arg in args))
    if origin is not None:
        return (origin, tuple(_normalise(arg) for arg in args))
    return tp


def _equal(left: Any, right: Any) -> bool:
    if left == ("typevar",) or right == ("typevar",):
        return True
    if (
        isinstance(left, tuple)
        and isinstance(right, tuple)
        and len(left) == len(right) == 2
        and isinstance(left[1], tuple)
        and isinstance(right[1], tuple)
    ):
        return (
            left[0] == right[0]
            and len(left[1]) == len(right[1])
            and all(_equal(a, b) for a, b in zip(left[1], right[1], strict=True))
        )
    return bool(left == right)


def same_type(left: object, right: object) -> bool:
    """Whether two annotations mean the same type.

    ``Optional[int]`` equals ``int | None``, ``Annotated`` metadata is ignored
    and an unbound type variable matches anything, so a generic base class's
    ``evaluate`` is accepted for each concrete subclass.
    """
    return _equal(_normalise(left), _normalise(right))


def describe_type(tp: object) -> str:
    """Readable spelling of an annotation for error messages."""
    if _is_json_marker(tp):
        return "JSONValue"
    if isinstance(tp, type) and not get_args(tp):
        return "None" if tp is type(None) else tp.__name__
    return repr(tp).replace("typing.", "").replace(f"{__name__}.", "")
