from __future__ import annotations

import types
from typing import Any, Optional, TypeVar, cast

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from sommelier_mlflow.errors import ConfigError, MetricConfigError, MetricTypeError
from sommelier_mlflow.metrics import (
    BaseMeasure,
    CompositeMeasure,
    CountsMeasure,
    JSONValue,
    MeasureConfig,
    NoConfig,
    config_schema,
)

T = TypeVar("T")


class Length(BaseMeasure[int]):
    def evaluate(self, text: str) -> dict[str, int]:
        return self.result(len(text))


class ScaleConfig(MeasureConfig):
    factor: float
    label: Optional[str]  # noqa: UP045 - Optional without default must become optional
    secret: SecretStr | None = None


class Scaled(BaseMeasure[float]):
    config_schema = ScaleConfig

    def evaluate(self, text: str) -> dict[str, float]:
        return self.result(len(text) * cast(ScaleConfig, self.settings).factor)


class PlainModel(BaseModel):
    """A schema written without the metric rules; the framework hardens it."""

    count: int
    note: str | None


@config_schema(PlainModel)
class Decorated(BaseMeasure[list[int]]):
    def evaluate(self, text: str) -> dict[str, list[int]]:
        return self.result([cast(PlainModel, self.settings).count] * 2)


class MatchesReference(BaseMeasure[bool]):
    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, bool]:
        return self.result(reference is not None and text == reference)


class Lying(BaseMeasure[int]):
    def evaluate(self, text: str) -> dict[str, int]:
        return {"Lying": cast(int, "not an int")}


class GenericLength(BaseMeasure[T]):
    """Generic intermediate: abstract until T is bound."""

    def evaluate(self, text: str) -> dict[str, T]:
        return self.result(cast(T, self.convert(len(text))))

    def convert(self, n: int) -> object:
        return n


class IntLength(GenericLength[int]):
    pass


class ListOf(BaseMeasure[list[T]]):
    def evaluate(self, text: str) -> dict[str, list[T]]:
        return self.result(cast(list[T], list(text)))


class Letters(ListOf[str]):
    pass


class SharedBase(BaseMeasure[int], abstract=True):
    """Abstract base with a bound type and no evaluate."""


class Concrete(SharedBase):
    def evaluate(self, text: str) -> dict[str, int]:
        return self.result(1)


# --- class creation --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["bytes", "tuple[int, int]", "Any", "set[str]", "dict[int, int]"])
def test_unserialisable_value_type_is_refused_at_class_creation(bad: str) -> None:
    tp = eval(bad, {"Any": Any})
    with pytest.raises(MetricTypeError, match="not JSON-serialisable") as info:

        class Bad(BaseMeasure[tp]):  # type: ignore[valid-type]
            def evaluate(self, text: str) -> dict[str, Any]:
                return {}

    assert isinstance(info.value, TypeError)


def test_value_type_is_recorded() -> None:
    assert Length.value_type is int
    assert Decorated.value_type == list[int]
    assert CompositeMeasure.value_type is JSONValue
    assert IntLength.value_type is int
    assert Letters.value_type == list[str]


def test_unparametrised_base_is_refused() -> None:
    with pytest.raises(MetricTypeError, match="does not bind its value type"):

        class Bare(BaseMeasure):  # type: ignore[type-arg]
            def evaluate(self, text: str) -> dict[str, int]:
                return {}


def test_missing_evaluate_is_refused() -> None:
    with pytest.raises(MetricTypeError, match="must implement"):

        class NoEvaluate(BaseMeasure[int]):
            pass


def test_wrong_return_annotation_is_refused() -> None:
    with pytest.raises(MetricTypeError, match=r"returns dict\[str, float\]"):

        class WrongReturn(BaseMeasure[int]):
            def evaluate(self, text: str) -> dict[str, float]:
                return {}


def test_missing_return_annotation_is_refused() -> None:
    with pytest.raises(MetricTypeError, match="annotate its return type"):

        class NoReturn(BaseMeasure[int]):
            def evaluate(self, text: str):  # type: ignore[no-untyped-def]
                return {}


def test_text_must_be_str() -> None:
    with pytest.raises(MetricTypeError, match="text: str"):

        class IntText(BaseMeasure[int]):
            def evaluate(self, text: int) -> dict[str, int]:  # type: ignore[override]
                return {}


@pytest.mark.parametrize(
    "signature",
    [
        "self",
        "self, text, extra",
        "self, text, *, extra=None",
        "self, text, *, reference",
        "self, text, reference=None",
        "self, text, *args",
        "self, text, **kwargs",
        "self, *, text",
    ],
)
def test_unsupported_evaluate_signatures_are_refused(signature: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def evaluate({signature}) -> 'dict[str, int]':\n    return {{}}", {}, namespace)
    with pytest.raises(MetricTypeError, match="evaluate"):
        types.new_class("Odd", (BaseMeasure[int],), exec_body=lambda ns: ns.update(namespace))


def test_static_evaluate_is_refused() -> None:
    with pytest.raises(MetricTypeError, match="plain instance method"):

        class Static(BaseMeasure[int]):
            @staticmethod
            def evaluate(text: str) -> dict[str, int]:  # type: ignore[override]
                return {}


def test_unresolvable_annotation_is_reported() -> None:
    with pytest.raises(MetricTypeError, match="Cannot resolve"):

        class Unresolved(BaseMeasure[int]):
            def evaluate(self, text: str) -> dict[str, NotDefinedAnywhere]:  # type: ignore[name-defined]  # noqa: F821
                return {}


def test_reference_parameter_is_detected() -> None:
    assert MatchesReference.accepts_reference is True
    assert Length.accepts_reference is False
    assert CompositeMeasure.accepts_reference is True


def test_abstract_and_generic_classes_cannot_be_instantiated() -> None:
    with pytest.raises(MetricTypeError, match="abstract"):
        SharedBase()
    with pytest.raises(MetricTypeError, match="abstract"):
        GenericLength()
    with pytest.raises(MetricTypeError, match="abstract"):
        BaseMeasure()
    assert Concrete().evaluate("x") == {"Concrete": 1}
    assert IntLength().evaluate("abc") == {"IntLength": 3}
    assert Letters().evaluate("ab") == {"Letters": ["a", "b"]}


def test_generic_subclass_binding_a_bad_type_is_refused() -> None:
    with pytest.raises(MetricTypeError, match="not JSON-serialisable"):

        class BytesLength(GenericLength[bytes]):
            pass


def test_subclass_of_concrete_metric_inherits_type_but_not_name() -> None:
    class LongerCounts(CountsMeasure):
        pass

    assert LongerCounts.value_type is int
    assert LongerCounts.name == "LongerCounts"
    assert LongerCounts(segments="tokens").evaluate("a b") == {"LongerCounts": 2}


# --- name and result key ---------------------------------------------------------------------


def test_name_is_class_level_and_read_only_on_instances() -> None:
    metric = Length()
    assert Length.name == "Length"
    assert metric.name == "Length"
    with pytest.raises(AttributeError, match="class-level"):
        metric.name = "other"  # type: ignore[misc]


def test_result_key_defaults_to_name_and_is_settable() -> None:
    metric = Length()
    assert metric.result_key == "Length"
    metric.result_key = "chars.v1"
    assert metric.result_key == "chars.v1"
    assert metric.evaluate("abc") == {"chars.v1": 3}
    assert Length().result_key == "Length"  # per instance
    metric.result_key = None  # type: ignore[assignment]
    assert metric.result_key == "Length"


@pytest.mark.parametrize("bad", ["", "a/b", "has space", "-lead"])
def test_invalid_result_keys_are_refused(bad: str) -> None:
    metric = Length()
    with pytest.raises(MetricConfigError, match="not allowed"):
        metric.result_key = bad
    assert metric.result_key == "Length"


def test_non_string_result_key_is_a_type_error() -> None:
    with pytest.raises(MetricTypeError):
        Length().result_key = 3  # type: ignore[assignment]


# --- configuration ---------------------------------------------------------------------------


def test_metric_without_schema_refuses_parameters() -> None:
    assert Length.config_schema is NoConfig
    with pytest.raises(MetricConfigError, match="takes no runtime parameters") as info:
        Length(size=3)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ConfigError)
    assert Length().config == {}


def test_schema_fields_are_required_unless_optional() -> None:
    metric = Scaled(factor=2.0)
    assert metric.config == {"factor": 2.0, "label": None, "secret": None}
    with pytest.raises(MetricConfigError, match=r"factor: Field required"):
        Scaled()


def test_schema_forbids_extra_keys() -> None:
    with pytest.raises(MetricConfigError, match="extra_key: Extra inputs are not permitted"):
        Scaled(factor=1.0, extra_key=True)


def test_schema_validates_strictly() -> None:
    with pytest.raises(MetricConfigError, match="factor: Input should be a valid number") as info:
        Scaled(factor="2.0")
    assert "got '2.0'" in str(info.value)
    with pytest.raises(MetricConfigError):
        Decorated(count=True, note=None)  # a bool is not an int


def test_validated_config_is_frozen() -> None:
    metric = Scaled(factor=1.5, label="x")
    with pytest.raises(ValidationError):
        metric.settings.factor = 3.0  # type: ignore[attr-defined]
    view = metric.config
    view["factor"] = 99.0
    assert metric.config["factor"] == 1.5


def test_plain_pydantic_schema_is_hardened() -> None:
    schema = Decorated.config_schema
    assert schema is not PlainModel and issubclass(schema, PlainModel)
    assert schema.__name__ == "PlainModel"
    assert schema.model_config.get("extra") == "forbid"
    assert schema.model_config.get("frozen") is True
    assert schema.model_config.get("strict") is True
    metric = Decorated(count=2)
    assert metric.config == {"count": 2, "note": None}
    assert metric.evaluate("") == {"Decorated": [2, 2]}
    with pytest.raises(MetricConfigError):
        Decorated(count=2, surplus=1)


def test_compliant_schema_is_used_as_is() -> None:
    class Compliant(MeasureConfig):
        size: int = 1

    class Sized(BaseMeasure[int]):
        config_schema = Compliant

        def evaluate(self, text: str) -> dict[str, int]:
            return self.result(cast(Compliant, self.settings).size)

    assert Sized.config_schema is Compliant
    assert Sized().evaluate("") == {"Sized": 1}


def test_class_attribute_schema_must_be_a_model() -> None:
    with pytest.raises(MetricTypeError, match="pydantic BaseModel"):

        class NotASchema(BaseMeasure[int]):
            config_schema = dict  # type: ignore[assignment]

            def evaluate(self, text: str) -> dict[str, int]:
                return {}


def test_config_schema_decorator_checks_its_arguments() -> None:
    with pytest.raises(MetricTypeError, match="pydantic BaseModel"):
        config_schema(dict)  # type: ignore[arg-type]
    with pytest.raises(MetricTypeError, match="decorates measure classes"):
        config_schema(PlainModel)(int)  # type: ignore[type-var]


def test_validation_error_never_echoes_secrets() -> None:
    with pytest.raises(MetricConfigError) as info:
        Scaled(factor=1.0, secret=12345678)
    assert "12345678" not in str(info.value)
    assert info.value.__cause__ is None
    assert "secret (default None)" in str(info.value)


def test_secret_is_masked_in_config_and_repr_but_usable() -> None:
    metric = Scaled(factor=1.0, secret="s3cr3t-value")
    assert metric.config["secret"] == "**********"
    assert "s3cr3t-value" not in repr(metric)
    settings = cast(ScaleConfig, metric.settings)
    assert settings.secret is not None
    assert settings.secret.get_secret_value() == "s3cr3t-value"


def test_pydantic_error_is_chained_when_no_secret_is_involved() -> None:
    with pytest.raises(MetricConfigError) as info:
        Decorated(count="x")
    assert isinstance(info.value.__cause__, ValidationError)


# --- from_config -----------------------------------------------------------------------------


def test_from_config_with_kwargs_and_json() -> None:
    by_kwargs = Scaled.from_config(factor=2.0, label="a")
    by_json = Scaled.from_config(json_payload='{"factor": 2.0, "label": "a"}')
    positional = Scaled.from_config('{"factor": 2.0}')
    assert by_kwargs.config == by_json.config == {"factor": 2.0, "label": "a", "secret": None}
    assert positional.config["factor"] == 2.0
    assert isinstance(by_json, Scaled)
    assert isinstance(Length.from_config(), Length)


def test_from_config_refuses_mixing_payload_and_kwargs() -> None:
    with pytest.raises(MetricConfigError, match="not both") as info:
        Scaled.from_config(json_payload='{"factor": 1.0}', label="x")
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("payload", [b'{"factor": 1.0}', 3, {"factor": 1.0}])
def test_from_config_refuses_non_string_payload(payload: object) -> None:
    with pytest.raises(MetricTypeError, match="json_payload must be a JSON string") as info:
        Scaled.from_config(json_payload=payload)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    if isinstance(payload, dict):
        assert "from_config(**config)" in str(info.value)


@pytest.mark.parametrize("payload", ["{factor: 1}", '{"factor": NaN}', '{"factor": 1.0,}', ""])
def test_from_config_refuses_invalid_json(payload: str) -> None:
    with pytest.raises(MetricConfigError, match="not valid JSON") as info:
        Scaled.from_config(json_payload=payload)
    assert isinstance(info.value, ValueError)


def test_from_config_refuses_non_object_json() -> None:
    with pytest.raises(MetricConfigError, match="must be a JSON object"):
        Scaled.from_config(json_payload="[1.0]")


def test_from_config_validates_payload_against_schema() -> None:
    with pytest.raises(MetricConfigError, match="factor"):
        Scaled.from_config(json_payload='{"factor": "2"}')
    with pytest.raises(MetricConfigError, match="takes no runtime parameters"):
        Length.from_config(json_payload='{"x": 1}')
    assert isinstance(Length.from_config(json_payload="{}"), Length)


# --- result and score ------------------------------------------------------------------------


def test_result_checks_the_declared_type() -> None:
    metric = Scaled(factor=1.0)
    assert metric.result(1.5) == {"Scaled": 1.5}
    with pytest.raises(MetricTypeError, match="declared type float") as info:
        metric.result(1)  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    with pytest.raises(MetricTypeError):
        metric.result(float("nan"))
    with pytest.raises(MetricTypeError):
        Decorated(count=1).result([1, "2"])  # type: ignore[list-item]


def test_score_checks_text_and_output() -> None:
    assert Length().score("abcd") == {"Length": 4}
    with pytest.raises(MetricTypeError, match="scores text"):
        Length().score(None)  # type: ignore[arg-type]
    with pytest.raises(MetricTypeError, match="not a str key with a int value"):
        Lying().score("x")


def test_score_passes_reference_only_where_accepted() -> None:
    assert MatchesReference().score("gold", reference="gold") == {"MatchesReference": True}
    assert MatchesReference().score("gold") == {"MatchesReference": False}
    assert Length().score("gold", reference="ignored") == {"Length": 4}


# --- tree ------------------------------------------------------------------------------------


def _tree() -> tuple[CompositeMeasure, dict[str, BaseMeasure[Any]]]:
    a, b, c, d = Length(), Scaled(factor=1.0), IntLength(), Letters()
    inner = CompositeMeasure(c, d)
    root = CompositeMeasure(a, inner, b)
    return root, {"a": a, "b": b, "c": c, "d": d, "inner": inner}


def test_tree_navigation() -> None:
    root, n = _tree()
    assert root.is_root and root.is_composite and root.parent is None and root.depth == 0
    assert n["a"].parent is root and not n["a"].is_root and not n["a"].is_composite
    assert n["c"].parent is n["inner"] and n["c"].depth == 2 and n["c"].root is root
    assert list(root.children) == [n["a"], n["inner"], n["b"]]
    assert list(n["a"].children) == []
    assert n["a"].root is root


def test_descendants_orders() -> None:
    root, n = _tree()
    dfs = [n["a"], n["inner"], n["c"], n["d"], n["b"]]
    bfs = [n["a"], n["inner"], n["b"], n["c"], n["d"]]
    assert list(root.descendants()) == dfs
    assert list(root.descendants(order="bfs")) == bfs
    assert list(root.descendants(include_self=True)) == [root, *dfs]
    assert list(root.descendants(include_self=True, order="bfs"))[1:] == bfs
    assert list(root) == bfs
    assert list(n["a"].descendants(include_self=True)) == [n["a"]]
    with pytest.raises(MetricConfigError, match="'dfs' or 'bfs'"):
        root.descendants(order="random")  # type: ignore[arg-type]


def test_descendants_are_cycle_safe() -> None:
    root, n = _tree()
    inner = cast(CompositeMeasure, n["inner"])
    inner._children.append(root)  # forge a cycle that add() would refuse
    inner._children.append(n["c"])  # and a node reachable twice
    nodes = list(root.descendants())
    assert len(nodes) == 5 and len({id(node) for node in nodes}) == 5
    assert len(list(root.descendants(order="bfs"))) == 5
    assert "<cycle: CompositeMeasure>" in repr(root)


def test_contains_by_name_and_identity() -> None:
    root, n = _tree()
    assert n["c"] in root
    assert IntLength() not in root
    assert "IntLength" in root
    assert "Missing" not in root
    assert root not in root  # only strict descendants
    assert 42 not in root


def test_identity_equality_and_hashing() -> None:
    first, second = Scaled(factor=1.0), Scaled(factor=1.0)
    assert first == first
    assert first != second
    assert len({first, second, first}) == 2
    assert {first: 1}[first] == 1


def test_repr_draws_the_tree() -> None:
    a = Length()
    a.result_key = "chars"
    b = Scaled(factor=2.0)
    inner = CompositeMeasure(b)
    root = CompositeMeasure(a, inner, Letters())
    assert repr(root) == (
        "CompositeMeasure()\n"
        "├── Length(result_key='chars')\n"
        "├── CompositeMeasure()\n"
        "│   └── Scaled(factor=2.0, label=None, secret=None)\n"
        "└── Letters()"
    )
    assert repr(b) == "Scaled(factor=2.0, label=None, secret=None)"
