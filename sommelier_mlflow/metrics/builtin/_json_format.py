"""JsonFormatMeasure (catalog ``JsonFormatMetric``): a JSON object of the expected shape?

A single pass/fail verdict hides *which* part of a structured output a model
gets wrong; reporting one boolean per expected field shows it. The expected
shape is a JSON Schema (draft 2020-12) whose top level is an object with
``properties``; each property becomes one boolean in the result.

The input is parsed with strict RFC 8259 JSON (no ``NaN``, comments or
trailing commas), in line with the rest of the product.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BeforeValidator, field_validator

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.metrics._base import BaseMeasure
from sommelier_mlflow.metrics._catalog import register_measure
from sommelier_mlflow.metrics._config import MeasureConfig

__all__ = ["JsonFormatConfig", "JsonFormatMeasure"]


def _decode_schema(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return loads(value)
        except JSONDecodeError as exc:
            raise ValueError(f"expected_schema is a string but not valid JSON ({exc})") from exc
    return value


class JsonFormatConfig(MeasureConfig):
    """Runtime parameters of :class:`JsonFormatMeasure`.

    Attributes:
        expected_schema: A draft 2020-12 JSON Schema, as a dict or a JSON
            string, whose top level is ``{"type": "object", "properties":
            {...}}``. Properties not listed in ``required`` are optional.
        check_formats: Also enforce ``format`` annotations (``date``,
            ``email``, ``ipv4``, ``uuid``, ...). Off by default, as in JSON
            Schema itself; formats whose checker needs a package that is not
            installed are not enforced. ``pattern`` uses Python regexes.
    """

    expected_schema: Annotated[dict[str, Any], BeforeValidator(_decode_schema)]
    check_formats: bool = False

    @field_validator("expected_schema")
    @classmethod
    def _check_expected_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(part) for part in exc.absolute_path) or "<root>"
            raise ValueError(
                f"expected_schema is not a valid draft 2020-12 JSON Schema at {where}: "
                f"{exc.message}"
            ) from exc
        if schema.get("type") != "object":
            raise ValueError('expected_schema must have "type": "object" at the top level')
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            raise ValueError('expected_schema must list the expected fields under "properties"')
        return schema


# Its catalog name predates the measure vocabulary (issue 31) and stays: configs,
# result keys and MLflow keys name it.
@register_measure(name="JsonFormatMetric")
class JsonFormatMeasure(BaseMeasure[dict[str, bool]]):
    """Check, per expected field, whether a text's JSON object satisfies the schema.

    Each property of ``expected_schema`` maps to ``True`` when:

    * it is present and its value satisfies its schema;
    * it is optional and absent; or
    * it is optional and ``null`` (null stands for "not given").

    A required field that is absent is ``False``. If the text is empty, not
    strict JSON, or JSON but not an object, every field is ``False``.
    Constraints are checked against the whole schema, so ``$ref`` into
    ``$defs`` resolves; only errors located inside a field count against it.
    """

    config_schema = JsonFormatConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = cast(JsonFormatConfig, self.settings)
        schema = copy.deepcopy(config.expected_schema)
        self._fields: tuple[str, ...] = tuple(schema["properties"])
        self._required = frozenset(schema.get("required", ()))
        checker = Draft202012Validator.FORMAT_CHECKER if config.check_formats else None
        self._validator = Draft202012Validator(schema, format_checker=checker)

    def evaluate(self, text: str) -> dict[str, dict[str, bool]]:
        """Return one validity flag per expected field."""
        verdict = dict.fromkeys(self._fields, False)
        if not text.strip():
            return self.result(verdict)
        try:
            document = loads(text)
        except JSONDecodeError:
            return self.result(verdict)
        if not isinstance(document, dict):
            return self.result(verdict)
        broken = {
            error.absolute_path[0]
            for error in self._validator.iter_errors(document)
            if error.absolute_path
        }
        for field in self._fields:
            optional = field not in self._required
            if field not in document:
                verdict[field] = optional
            elif document[field] is None and optional:
                verdict[field] = True
            else:
                verdict[field] = field not in broken
        return self.result(verdict)
