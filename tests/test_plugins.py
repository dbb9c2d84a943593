"""The one registry type: names, refusals, and plugins loaded from entry points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sommelier_mlflow._plugins import PluginWarning, Registry
from sommelier_mlflow.errors import ConfigError

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


def _install_plugin(root: Path, module_source: str, entry_value: str) -> None:
    """Lay out a plugin distribution as pip would: a module and its dist-info."""
    (root / "toy_plugin_module.py").write_text(module_source, encoding="utf-8")
    info = root / "toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\ntoy = {entry_value}\n")


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
