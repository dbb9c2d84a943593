"""The one place that checks how the package's modules depend on each other.

- Layers import downward only (the design contract, DESIGN.md, kept outside
  this repository; docs/architecture.md draws these layers, and
  tests/test_docs.py holds the drawing to LAYER): a module may import its own
  layer and the layers below it, never one above.
- No module, in any package, is part of an import circle. Every import
  statement counts, including those under ``TYPE_CHECKING`` and inside
  functions: a circle hidden in a function still means two modules that
  cannot be understood (or moved) one without the other.
- The core, and the evaluator's entry module, import none of the heavy
  dependencies (proved in one clean subprocess).
- The metric framework does not depend on its built-in metrics.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sommelier_mlflow"
HEAVY = ("mlflow", "torch", "transformers", "peft")

# Each top-level module or package of sommelier_mlflow and its layer (higher may
# import lower). A new top-level module must be placed here deliberately.
LAYER = {
    "errors": 0,
    "_json": 0,
    "_redact": 0,
    "_progress": 0,
    "_gc": 0,
    "_plugins": 0,
    "_deprecation": 0,
    "data": 1,
    "toolcalls": 1,
    "metrics": 2,
    "evaluation": 3,
    "generation": 4,
    "integration": 5,
    "scorers": 5,
    "training": 6,
    "cli": 7,
}

# What must load without the heavy dependencies, and a probe that exercises a
# catalog metric on top (a lazily imported tokenizer stack would show up there).
LIGHT = (
    "sommelier_mlflow",
    "sommelier_mlflow.errors",
    "sommelier_mlflow._redact",
    "sommelier_mlflow.data",
    "sommelier_mlflow.toolcalls",
    "sommelier_mlflow.metrics",
    "sommelier_mlflow.evaluation",
    "sommelier_mlflow.generation",
    "sommelier_mlflow.integration.evaluator",
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(path: Path, modules: Collection[str]) -> set[str]:
    """The package's modules that an import statement in ``path`` names.

    ``from package import name`` counts as importing ``package.name`` when that
    is a module, and as importing ``package`` otherwise.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                found.add(target if target in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & set(modules)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(path, modules) for name, path in modules.items()}


def _layer(module: str) -> int:
    top = module.split(".")[1]
    assert top in LAYER, f"{top!r} has no layer: add it to LAYER in {__file__}"
    return LAYER[top]


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


def test_every_top_level_module_has_a_layer() -> None:
    tops = {name.split(".")[1] for name in _modules() if name.count(".") >= 1}
    assert tops <= LAYER.keys(), sorted(tops - LAYER.keys())


def test_layers_import_downward_only() -> None:
    violations = []
    for name, targets in _graph().items():
        if name == "sommelier_mlflow":
            continue  # the facade re-exports from every layer by design
        for target in targets:
            if target != "sommelier_mlflow" and _layer(target) > _layer(name):
                violations.append(f"{name} imports {target}")
    assert sorted(violations) == []


def test_no_module_is_part_of_an_import_circle() -> None:
    graph = _graph()
    circles = [
        " -> ".join(cycle) for name in sorted(graph) if (cycle := _cycle_through(name, graph))
    ]
    assert circles == []


def test_the_metric_framework_does_not_import_its_built_in_metrics() -> None:
    graph = _graph()
    framework = [name for name in graph if name.startswith("sommelier_mlflow.metrics._")]
    assert framework
    for name in framework:
        assert not any(t.startswith("sommelier_mlflow.metrics.builtin") for t in graph[name]), name


def test_the_light_modules_load_none_of_the_heavy_dependencies() -> None:
    probe = (
        "import sys\n"
        f"for name in {LIGHT!r}:\n"
        "    __import__(name)\n"
        "from sommelier_mlflow.metrics import CountsMeasure, get_measure\n"
        "CountsMeasure(segments='tokens').evaluate('a b')\n"
        "for name in ('CountsMetric', 'JsonFormatMetric', 'full_call_exact_match'):\n"
        "    get_measure(name)\n"
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)) or 'none')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
        check=False, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "none"


def test_the_catalog_is_complete_whichever_metrics_module_is_imported_first() -> None:
    probe = (
        "from sommelier_mlflow.metrics._catalog import get_measure\n"
        "for name in ('CountsMetric', 'JsonFormatMetric', 'full_call_exact_match'):\n"
        "    get_measure(name)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
