"""No import circles, and the metric framework does not depend on its plug-ins.

Every import statement counts, including those under ``TYPE_CHECKING`` and
inside functions: a circle hidden in a function still means two modules that
cannot be understood (or moved) one without the other.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sommelier_mlflow"
CHECKED = ("sommelier_mlflow.metrics", "sommelier_mlflow.generation", "sommelier_mlflow.cli")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    if target in modules:
                        graph[name].add(target)
                    elif node.module in modules:
                        graph[name].add(node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules)
    return graph


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, if there is one (depth-first)."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for target in sorted(graph[node]):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


@pytest.mark.parametrize("package", CHECKED)
def test_no_module_is_part_of_an_import_circle(package: str) -> None:
    graph = _graph()
    for name in sorted(graph):
        if name == package or name.startswith(f"{package}."):
            cycle = _cycle_through(name, graph)
            assert cycle is None, " -> ".join(cycle or [])


def test_the_metric_framework_does_not_import_its_built_in_metrics() -> None:
    graph = _graph()
    framework = [
        name
        for name in graph
        if name.startswith("sommelier_mlflow.metrics._")  # not the facade, not builtin
    ]
    assert framework
    for name in framework:
        assert not any(
            target.startswith("sommelier_mlflow.metrics.builtin") for target in graph[name]
        ), name


def test_the_catalog_is_complete_whichever_metrics_module_is_imported_first() -> None:
    probe = (
        "from sommelier_mlflow.metrics._catalog import get_metric\n"
        "for name in ('CountsMetric', 'JsonFormatMetric', 'full_call_exact_match'):\n"
        "    get_metric(name)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
