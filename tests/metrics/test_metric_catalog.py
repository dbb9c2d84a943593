from __future__ import annotations

import pytest

from sommelier_mlflow.errors import (
    ConfigError,
    MetricConfigError,
    MetricTypeError,
    UnknownMetricError,
)
from sommelier_mlflow.metrics import (
    BaseMeasure,
    CountsMeasure,
    JsonFormatMeasure,
    get_measure,
    list_measures,
    register_measure,
    unregister_measure,
)


def test_builtins_are_registered() -> None:
    assert {"CountsMetric", "JsonFormatMetric"} <= set(list_measures())
    assert get_measure("CountsMetric") is CountsMeasure
    assert get_measure("JsonFormatMetric") is JsonFormatMeasure
    assert list_measures() == sorted(list_measures())


def test_bare_decorator_registers_under_class_name() -> None:
    @register_measure
    class Shouting(BaseMeasure[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.isupper())

    assert get_measure("Shouting") is Shouting
    assert Shouting.name == "Shouting"


def test_named_decorator_sets_class_level_name() -> None:
    @register_measure(name="shouting")
    class Shouting(BaseMeasure[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.isupper())

    assert get_measure("shouting") is Shouting
    assert Shouting.name == "shouting"
    assert Shouting().evaluate("HEY") == {"shouting": True}


def test_renaming_updates_existing_instances_and_frees_old_name() -> None:
    class Quiet(BaseMeasure[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.islower())

    register_measure(Quiet)
    before = Quiet()
    assert before.name == "Quiet"
    assert register_measure(Quiet, name="quiet.v2") is Quiet
    assert before.name == "quiet.v2"
    assert before.result_key == "quiet.v2"
    assert get_measure("quiet.v2") is Quiet
    with pytest.raises(UnknownMetricError):
        get_measure("Quiet")


def test_registering_same_class_twice_is_idempotent() -> None:
    assert register_measure(CountsMeasure) is CountsMeasure
    assert list_measures().count("CountsMetric") == 1


def test_duplicate_names_are_refused() -> None:
    class Impostor(BaseMeasure[int]):
        def evaluate(self, text: str) -> dict[str, int]:
            return self.result(0)

    with pytest.raises(MetricConfigError, match="already registered") as info:
        register_measure(Impostor, name="CountsMetric")
    assert isinstance(info.value, ConfigError)
    assert get_measure("CountsMetric") is CountsMeasure
    assert Impostor.name == "Impostor"


def test_only_concrete_metric_classes_can_be_registered() -> None:
    with pytest.raises(MetricTypeError, match="BaseMeasure subclass"):
        register_measure(int)  # type: ignore[type-var]

    class Abstract(BaseMeasure[int], abstract=True):
        pass

    with pytest.raises(MetricTypeError, match="abstract"):
        register_measure(Abstract)


def test_malformed_names_are_refused() -> None:
    with pytest.raises(MetricConfigError, match="not allowed"):
        register_measure(name="has/slash")(CountsMeasure)
    assert CountsMeasure.name == "CountsMetric"


def test_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(UnknownMetricError) as info:
        get_measure("countsmetric")
    error = info.value
    assert isinstance(error, KeyError)
    assert "Unknown measure 'countsmetric'" in str(error)
    assert "Did you mean 'CountsMetric'" in str(error)
    assert "Registered measures:" in str(error)
    with pytest.raises(UnknownMetricError, match="JsonFormatMetric"):
        get_measure("JsonFormat")


def test_unknown_name_without_close_match_lists_catalog() -> None:
    with pytest.raises(UnknownMetricError) as info:
        get_measure("zzzz")
    assert "Did you mean" not in str(info.value)
    assert "CountsMetric" in str(info.value)


def test_get_metric_needs_a_string() -> None:
    with pytest.raises(MetricTypeError):
        get_measure(CountsMeasure)  # type: ignore[arg-type]


def test_unregister_removes_name() -> None:
    assert unregister_measure("JsonFormatMetric") is JsonFormatMeasure
    assert "JsonFormatMetric" not in list_measures()
    with pytest.raises(UnknownMetricError, match="Unknown measure"):
        unregister_measure("JsonFormatMetric")
