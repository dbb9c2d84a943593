from __future__ import annotations

import pytest

from sommelier_mlflow.errors import (
    ConfigError,
    MetricConfigError,
    MetricTypeError,
    UnknownMetricError,
)
from sommelier_mlflow.metrics import (
    BaseMetric,
    CountsMetric,
    JsonFormatMetric,
    get_metric,
    list_metrics,
    register_metric,
    unregister_metric,
)


def test_builtins_are_registered() -> None:
    assert {"CountsMetric", "JsonFormatMetric"} <= set(list_metrics())
    assert get_metric("CountsMetric") is CountsMetric
    assert get_metric("JsonFormatMetric") is JsonFormatMetric
    assert list_metrics() == sorted(list_metrics())


def test_bare_decorator_registers_under_class_name() -> None:
    @register_metric
    class Shouting(BaseMetric[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.isupper())

    assert get_metric("Shouting") is Shouting
    assert Shouting.name == "Shouting"


def test_named_decorator_sets_class_level_name() -> None:
    @register_metric(name="shouting")
    class Shouting(BaseMetric[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.isupper())

    assert get_metric("shouting") is Shouting
    assert Shouting.name == "shouting"
    assert Shouting().evaluate("HEY") == {"shouting": True}


def test_renaming_updates_existing_instances_and_frees_old_name() -> None:
    class Quiet(BaseMetric[bool]):
        def evaluate(self, text: str) -> dict[str, bool]:
            return self.result(text.islower())

    register_metric(Quiet)
    before = Quiet()
    assert before.name == "Quiet"
    assert register_metric(Quiet, name="quiet.v2") is Quiet
    assert before.name == "quiet.v2"
    assert before.result_key == "quiet.v2"
    assert get_metric("quiet.v2") is Quiet
    with pytest.raises(UnknownMetricError):
        get_metric("Quiet")


def test_registering_same_class_twice_is_idempotent() -> None:
    assert register_metric(CountsMetric) is CountsMetric
    assert list_metrics().count("CountsMetric") == 1


def test_duplicate_names_are_refused() -> None:
    class Impostor(BaseMetric[int]):
        def evaluate(self, text: str) -> dict[str, int]:
            return self.result(0)

    with pytest.raises(MetricConfigError, match="already registered") as info:
        register_metric(Impostor, name="CountsMetric")
    assert isinstance(info.value, ConfigError)
    assert get_metric("CountsMetric") is CountsMetric
    assert Impostor.name == "Impostor"


def test_only_concrete_metric_classes_can_be_registered() -> None:
    with pytest.raises(MetricTypeError, match="BaseMetric subclass"):
        register_metric(int)  # type: ignore[type-var]

    class Abstract(BaseMetric[int], abstract=True):
        pass

    with pytest.raises(MetricTypeError, match="abstract"):
        register_metric(Abstract)


def test_malformed_names_are_refused() -> None:
    with pytest.raises(MetricConfigError, match="not allowed"):
        register_metric(name="has/slash")(CountsMetric)
    assert CountsMetric.name == "CountsMetric"


def test_unknown_name_suggests_close_matches() -> None:
    with pytest.raises(UnknownMetricError) as info:
        get_metric("countsmetric")
    error = info.value
    assert isinstance(error, KeyError)
    assert "Unknown metric 'countsmetric'" in str(error)
    assert "Did you mean 'CountsMetric'" in str(error)
    assert "Registered metrics:" in str(error)
    with pytest.raises(UnknownMetricError, match="JsonFormatMetric"):
        get_metric("JsonFormat")


def test_unknown_name_without_close_match_lists_catalog() -> None:
    with pytest.raises(UnknownMetricError) as info:
        get_metric("zzzz")
    assert "Did you mean" not in str(info.value)
    assert "CountsMetric" in str(info.value)


def test_get_metric_needs_a_string() -> None:
    with pytest.raises(MetricTypeError):
        get_metric(CountsMetric)  # type: ignore[arg-type]


def test_unregister_removes_name() -> None:
    assert unregister_metric("JsonFormatMetric") is JsonFormatMetric
    assert "JsonFormatMetric" not in list_metrics()
    with pytest.raises(UnknownMetricError, match="Unknown metric"):
        unregister_metric("JsonFormatMetric")
