"""Field checks shared by the report readers: each failure names the file and the dotted field.

A malformed field is a data error (exit 2); a field that disagrees with what
the same file's rows or counts imply is an invariant violation (exit 5),
because it means the file was edited or corrupted after it was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from sommelier_mlflow.data import validate_language
from sommelier_mlflow.errors import DataError, InputError, InvariantViolationError
from sommelier_mlflow.toolcalls import MetricValue

__all__ = ["ReportChecker"]


class ReportChecker:
    """Field checks that name the report and the dotted field that failed."""

    def __init__(self, source: str, regenerate: str) -> None:
        self.source = source
        self.regenerate = regenerate

    def fail(self, where: str, message: str) -> NoReturn:
        raise DataError(f"{where}: {message}", path=self.source)

    def broken(self, where: str, message: str) -> NoReturn:
        raise InvariantViolationError(
            f"{self.source}: {where}: {message}; the report was edited or corrupted, "
            f"regenerate it with `{self.regenerate}`"
        )

    def mapping(
        self, value: object, where: str, keys: frozenset[str] | None = None
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"must be an object, got {type(value).__name__}")
        if keys is not None and set(value) != keys:
            missing = sorted(keys - set(value))
            extra = sorted(set(value) - keys)
            self.fail(where, f"fields wrong: missing {missing}, unexpected {extra}")
        return value

    def text(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(where, f"must be a non-empty string, got {value!r}")
        return value

    def optional_text(self, value: object, where: str) -> str | None:
        return None if value is None else self.text(value, where)

    def count(self, value: object, where: str) -> int:
        if type(value) is not int or value < 0:
            self.fail(where, f"must be a non-negative integer, got {value!r}")
        return value

    def number(self, value: object, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number, got {value!r}")
        return float(value)

    def array(self, value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, f"must be an array, got {type(value).__name__}")
        return value

    def language(self, value: object, where: str) -> str:
        try:
            return validate_language(value)
        except InputError as exc:
            self.fail(where, str(exc))

    def metrics(self, value: object, where: str, names: Sequence[str]) -> dict[str, MetricValue]:
        entries = self.mapping(value, where, frozenset(names))
        parsed: dict[str, MetricValue] = {}
        for name in names:
            entry = self.mapping(
                entries[name], f"{where}.{name}", frozenset({"value", "numerator", "denominator"})
            )
            try:
                parsed[name] = MetricValue.from_dict(entry)
            except InputError as exc:
                self.fail(f"{where}.{name}", str(exc))
        return parsed

    def same_metrics(
        self, stored: Mapping[str, MetricValue], actual: Mapping[str, MetricValue], where: str
    ) -> None:
        for name, metric in actual.items():
            if stored[name] != metric:
                self.broken(
                    f"{where}.{name}",
                    f"stores {stored[name].numerator}/{stored[name].denominator} but its "
                    f"per-example rows sum to {metric.numerator}/{metric.denominator}",
                )
