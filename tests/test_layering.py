"""The scoring core must stay importable without MLflow or the torch stack."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sommelier_mlflow"
HEAVY = ("mlflow", "torch", "transformers", "peft")
CORE = (
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


def test_core_imports_none_of_the_heavy_dependencies() -> None:
    code = (
        "import sys\n"
        f"for name in {CORE!r}:\n"
        "    __import__(name)\n"
        f"loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    )
    assert result.stdout.strip() == ""


# Lower layers may not import higher ones (DESIGN.md: dependencies point down).
_LAYER = {
    "errors": 0,
    "_json": 0,
    "_redact": 0,
    "_progress": 0,
    "_gc": 0,
    "data": 1,
    "toolcalls": 1,
    "metrics": 2,
    "evaluation": 3,
    "generation": 4,
    "integration": 5,
    "scorers": 5,
    "cli": 6,
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_layers_import_downward_only() -> None:
    violations = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts == ("__init__.py",):
            continue  # the facade re-exports from every layer by design
        own = _LAYER[rel.parts[0].removesuffix(".py")]
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] != "sommelier_mlflow" or len(parts) < 2:
                continue
            other = _LAYER[parts[1]]
            if other > own:
                violations.append(f"{rel} imports {module}")
    assert violations == []
