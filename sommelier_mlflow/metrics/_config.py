"""Runtime configuration schemas for metrics.

A measure's runtime parameters arrive from JSON, CLI flags or an MLflow
evaluator config, so they are validated against a pydantic model that is
deliberately unforgiving: unknown keys are refused (a typo must not silently
fall back to a default), values are not coerced (``"1"`` is not ``1``), the
validated configuration is frozen (a measure's behaviour cannot drift after it
was built) and every field without a default is required unless its type
admits ``None``.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, SecretBytes, SecretStr, ValidationError

from sommelier_mlflow._redact import REDACTED
from sommelier_mlflow.errors import MetricTypeError

__all__ = [
    "MASK",
    "MeasureConfig",
    "NoConfig",
    "prepare_config_schema",
    "secret_fields",
    "describe_validation_error",
]

MASK = REDACTED
"""What a secret looks like wherever a configuration is shown to a person."""

_STRICT: dict[str, Any] = {"extra": "forbid", "frozen": True, "strict": True}


class MeasureConfig(BaseModel):
    """Convenient base for measure config schemas: already strict, closed and frozen.

    Deriving from it is optional; any pydantic model passed as a schema is
    hardened to the same rules.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class NoConfig(MeasureConfig):
    """Schema of a measure that takes no runtime parameters."""


def _admits_none(annotation: object) -> bool:
    if annotation is None or annotation is type(None):
        return True
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _admits_none(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(_admits_none(arg) for arg in get_args(annotation))
    return False


def _mentions_secret(annotation: object) -> bool:
    if annotation in (SecretStr, SecretBytes):
        return True
    return any(_mentions_secret(arg) for arg in get_args(annotation))


def prepare_config_schema(schema: object, owner: str) -> type[BaseModel]:
    """Return ``schema`` hardened to the measure config rules.

    A schema that already follows the rules is returned unchanged; otherwise a
    subclass with the same name is derived that forbids extra keys, is frozen,
    validates strictly and gives optional (``None``-admitting) fields without a
    default the default ``None``.

    Args:
        schema: The candidate schema, which must be a pydantic model class.
        owner: Name of the measure class, for error messages.

    Raises:
        MetricTypeError: If ``schema`` is not a pydantic model class.
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise MetricTypeError(
            f"config_schema of measure {owner!r} must be a pydantic BaseModel subclass, "
            f"got {schema!r}. Declare a class deriving from MeasureConfig (or BaseModel)."
        )
    config_ok = all(schema.model_config.get(key) == value for key, value in _STRICT.items())
    optional_required = {
        name: field
        for name, field in schema.model_fields.items()
        if field.is_required() and _admits_none(field.annotation)
    }
    if config_ok and not optional_required:
        return schema

    namespace: dict[str, Any] = {
        "__module__": schema.__module__,
        "__qualname__": schema.__qualname__,
        "__doc__": schema.__doc__,
        "model_config": ConfigDict(**{**schema.model_config, **_STRICT}),  # type: ignore[typeddict-item]
        "__annotations__": {},
    }
    for name, field in optional_required.items():
        relaxed = copy.copy(field)
        relaxed.default = None
        namespace["__annotations__"][name] = field.annotation
        namespace[name] = relaxed
    derived: type[BaseModel] = type(schema.__name__, (schema,), namespace)
    return derived


def secret_fields(schema: type[BaseModel]) -> frozenset[str]:
    """Names of the fields that hold secrets and must never be shown."""
    return frozenset(
        name for name, field in schema.model_fields.items() if _mentions_secret(field.annotation)
    )


def describe_validation_error(
    exc: ValidationError, owner: str, schema: type[BaseModel], *, params: dict[str, Any]
) -> str:
    """Turn a pydantic error into one readable sentence that leaks no secret.

    Pydantic's own message echoes every rejected input, which would print an
    access token; this one shows inputs only for non-secret fields.
    """
    secrets = secret_fields(schema)
    problems: list[str] = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        loc = ".".join(str(part) for part in error["loc"])
        message = error["msg"]
        field = str(error["loc"][0]) if error["loc"] else ""
        if loc and field not in secrets and field in params and error["type"] != "missing":
            shown = repr(params[field])
            if len(shown) > 80:
                shown = shown[:77] + "..."
            message = f"{message} (got {shown})"
        problems.append(f"{loc}: {message}" if loc else message)
    accepted = ", ".join(_describe_field(name, schema) for name in schema.model_fields) or "none"
    return (
        f"Invalid configuration for measure {owner!r}: {'; '.join(problems)}. "
        f"Accepted parameters: {accepted}."
    )


def _describe_field(name: str, schema: type[BaseModel]) -> str:
    field = schema.model_fields[name]
    if field.is_required():
        return f"{name} (required)"
    default = MASK if name in secret_fields(schema) and field.default is not None else field.default
    return f"{name} (default {default!r})"
