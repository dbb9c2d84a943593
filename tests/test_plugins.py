"""The one registry type: names, refusals, and plugins loaded from entry points."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sommelier_mlflow._plugins import (
    METRIC_PLUGINS,
    METRICS_GROUP,
    SCORING_METRICS_GROUP,
    PluginWarning,
    Registry,
)
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.metrics import list_measures
from sommelier_mlflow.toolcalls import (
    METRIC_NAMES,
    mcnemar_metric,
    scoring_metric_names,
    scoring_metrics,
    scoring_mode,
    unregister_scoring_metric,
)
from sommelier_mlflow.toolcalls import _registry as scoring_registry

GROUP = "sommelier_mlflow_test.toys"


def test_register_as_decorator_and_call_then_get_and_sorted_names() -> None:
    registry: Registry[object] = Registry("toy")

    @registry.register("zeta")
    def zeta() -> None: ...

    alpha = object()
    assert registry.register("alpha", alpha) is alpha
    assert registry.get("zeta") is zeta
    assert registry.names() == ("alpha", "zeta")
    assert "alpha" in registry and "beta" not in registry
    registry.register("alpha", alpha)  # the same object again is harmless
    registry.unregister("alpha")
    assert registry.names() == ("zeta",)


def test_setdefault_keeps_the_first_object_and_order_is_registration_order() -> None:
    registry: Registry[object] = Registry("toy")
    first, second = object(), object()
    assert registry.setdefault("zeta", first) is first
    assert registry.setdefault("zeta", second) is first
    registry.register("alpha", second)
    assert registry.in_registration_order() == (("zeta", first), ("alpha", second))
    assert registry.names() == ("alpha", "zeta")


def test_unknown_name_is_a_config_error_listing_the_names() -> None:
    registry: Registry[object] = Registry("toy")
    registry.register("one", 1)
    registry.register("two", 2)
    with pytest.raises(ConfigError, match=r"unknown toy 'three'; registered: one, two") as info:
        registry.get("three")
    assert info.value.exit_code == 2


def test_a_typed_registry_refuses_other_objects_before_their_name() -> None:
    registry: Registry[int] = Registry("number", item_type=int)
    with pytest.raises(ConfigError, match="a number must be a int, got str"):
        registry.register("", "one")
    assert registry.register("one", 1) == 1


def test_taken_and_malformed_names_are_refused() -> None:
    registry: Registry[object] = Registry("toy")
    registry.register("one", 1)
    with pytest.raises(ConfigError, match="already registered"):
        registry.register("one", 2)
    with pytest.raises(ConfigError, match="lower-case"):
        registry.register("Bad-Name", 3)
    with pytest.raises(ConfigError, match="no toy named 'two'"):
        registry.unregister("two")


def _install_plugin(root: Path, module_source: str, entry_value: str, group: str = GROUP) -> None:
    """Lay out a plugin distribution as pip would: a module and its dist-info."""
    (root / "toy_plugin_module.py").write_text(module_source, encoding="utf-8")
    info = root / "toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\ntoy = {entry_value}\n")


@pytest.fixture
def plugin_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_plugin_module", raising=False)
    return tmp_path


def test_plugin_module_registers_itself_on_first_lookup(plugin_root: Path) -> None:
    registry: Registry[str] = Registry("toy", GROUP)
    sys.modules[__name__].REGISTRY = registry  # type: ignore[attr-defined]
    _install_plugin(
        plugin_root,
        f"import {__name__} as host\nhost.REGISTRY.register('from_plugin', 'plugged in')\n",
        "toy_plugin_module",
    )
    assert "toy_plugin_module" not in sys.modules  # lazily: nothing loaded yet
    assert registry.get("from_plugin") == "plugged in"
    assert registry.names() == ("from_plugin",)


def test_plugin_entry_point_may_name_a_register_function(plugin_root: Path) -> None:
    registry: Registry[str] = Registry("toy", GROUP)
    sys.modules[__name__].REGISTRY = registry  # type: ignore[attr-defined]
    _install_plugin(
        plugin_root,
        f"def register():\n    import {__name__} as host\n"
        "    host.REGISTRY.register('called', 'yes')\n",
        "toy_plugin_module:register",
    )
    assert registry.names() == ("called",)


def test_broken_plugin_is_a_warning_naming_it_not_a_crash(plugin_root: Path) -> None:
    registry: Registry[str] = Registry("toy", GROUP)
    registry.register("builtin", "still here")
    _install_plugin(plugin_root, "raise RuntimeError('plugin bug')\n", "toy_plugin_module")
    with pytest.warns(PluginWarning, match=r"toy plugin 'toy' .*RuntimeError: plugin bug"):
        assert registry.names() == ("builtin",)
    with pytest.raises(ConfigError, match="registered: builtin"):
        registry.get("missing")


# A yes/no metric McNemar may use, so every way of reading metrics can see it.
_SCORING_PLUGIN = """
from sommelier_mlflow import ScoringMetric, register_scoring_metric


def register():
    register_scoring_metric(
        ScoringMetric("toy_metric", "Always right.", lambda c: (1, 1), binary=True, mcnemar=True)
    )
"""

_READERS: dict[str, Callable[[], object]] = {
    "scoring_metrics": lambda: [metric.name for metric in scoring_metrics()],
    "scoring_metric_names": scoring_metric_names,
    "mode.metrics": lambda: [metric.name for metric in scoring_mode("single").metrics()],
    "mcnemar_metric": lambda: [mcnemar_metric(["toy_metric"])],
}


@pytest.fixture
def unloaded_scoring_plugins(plugin_root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The scoring-metric groups as if this process had not loaded them yet; the plugin root."""
    monkeypatch.setattr(scoring_registry._METRIC_SETS, "_plugins_loaded", False)
    monkeypatch.setattr(METRIC_PLUGINS, "_plugins_loaded", False)
    yield plugin_root
    if "toy_metric" in scoring_registry._registered_set("single"):
        unregister_scoring_metric("toy_metric")


@pytest.mark.parametrize("group", [SCORING_METRICS_GROUP, METRICS_GROUP])
@pytest.mark.parametrize("reader", sorted(_READERS))
def test_every_reader_of_scoring_metrics_loads_their_plugins(
    unloaded_scoring_plugins: Path, group: str, reader: str
) -> None:
    _install_plugin(unloaded_scoring_plugins, _SCORING_PLUGIN, "toy_plugin_module:register", group)
    assert "toy_metric" in _READERS[reader]()


def test_the_metrics_group_loads_once_for_the_catalog_and_the_scoring_metrics(
    unloaded_scoring_plugins: Path,
) -> None:
    # Registering the same name twice would be a PluginWarning, an error here.
    _install_plugin(
        unloaded_scoring_plugins, _SCORING_PLUGIN, "toy_plugin_module:register", METRICS_GROUP
    )
    list_measures()
    assert scoring_metric_names()[-1] == "toy_metric"


def test_a_broken_scoring_metric_plugin_is_a_warning_naming_it(
    unloaded_scoring_plugins: Path,
) -> None:
    _install_plugin(
        unloaded_scoring_plugins,
        "raise RuntimeError('metric bug')\n",
        "toy_plugin_module",
        SCORING_METRICS_GROUP,
    )
    with pytest.warns(
        PluginWarning, match=r"scoring metric plugin 'toy' .*RuntimeError: metric bug"
    ):
        names = scoring_metric_names()
    assert names[: len(METRIC_NAMES)] == METRIC_NAMES
