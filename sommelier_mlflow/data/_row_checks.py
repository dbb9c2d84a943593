"""One input row and the checks every reader applies to it.

A reader that fails closed must say where: every row is wrapped with its file
and 1-based line (:class:`_Line`), and every field check builds its
:class:`~sommelier_mlflow.errors.DataError` from that place. The test-split,
generation and precomputed readers, and the evaluation-dataset records that
pose as rows, all check through this one class, so a field is refused in the
same words wherever it is read.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sommelier_mlflow.data._schemas import validate_language
from sommelier_mlflow.errors import DataError, InputError, InvariantViolationError

__all__ = ["_HEX64", "_Line", "_kind", "_schema_of"]

_HEX64: Final = re.compile(r"[0-9a-f]{64}")


class _Line:
    """Where a row came from, so every check can build a precise error."""

    __slots__ = ("line", "path", "row")

    def __init__(self, path: str, line: int, row: dict[str, Any]) -> None:
        self.path = path
        self.line = line
        self.row = row

    @property
    def where(self) -> str:
        """The row's place in its source, as messages about another row cite it."""
        return f"line {self.line}"

    def error(self, message: str) -> DataError:
        return DataError(message, path=self.path, line=self.line)

    def invariant(self, message: str) -> InvariantViolationError:
        return InvariantViolationError(f"{self.path}:{self.line}: {message}")

    def require(self, key: str) -> Any:
        if key not in self.row:
            raise self.error(f"missing field {key!r}")
        return self.row[key]

    def string(self, key: str, *, non_empty: bool = True) -> str:
        value = self.require(key)
        if not isinstance(value, str):
            raise self.error(f"field {key!r} must be a string, got {_kind(value)}")
        if non_empty and not value.strip():
            raise self.error(f"field {key!r} is empty")
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.row.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(f"field {key!r} must be a non-empty string or null, got {value!r}")
        return value

    def language(self, *, default: str | None) -> str:
        if default is not None and "language" not in self.row:
            return default
        value = self.require("language")
        try:
            return validate_language(value)
        except InputError as exc:
            raise self.error(str(exc)) from exc

    def exact_fields(self, required: frozenset[str], optional: frozenset[str]) -> None:
        missing = sorted(required - self.row.keys())
        if missing:
            raise self.error(f"missing field {missing[0]!r}")
        unknown = sorted(self.row.keys() - required - optional)
        if unknown:
            allowed = ", ".join(sorted(required | optional))
            raise self.error(f"unknown field {unknown[0]!r}; allowed fields: {allowed}")


def _kind(value: object) -> str:
    """Name a JSON value's type the way a user writing JSON thinks of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _schema_of(src: _Line, accepted: tuple[str, ...]) -> str:
    if "schema_version" not in src.row:
        raise src.error(f"missing schema_version; expected one of {', '.join(accepted)}")
    version = src.row["schema_version"]
    if not isinstance(version, str) or version not in accepted:
        raise src.error(
            f"unknown schema_version {version!r}; this reader accepts {', '.join(accepted)}"
        )
    return version
