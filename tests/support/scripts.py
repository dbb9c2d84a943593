"""Load the project's scripts (examples, benchmarks, docs tools) as modules.

They are plain files, not package modules, so tests load them by path. Each
is loaded once per test session and registered in ``sys.modules`` (dataclasses
and pickling look a module up there by name).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@cache
def load_script(relative: str) -> ModuleType:
    """The script at ``relative`` (to the repository root), executed as a module."""
    path = ROOT / relative
    name = "script_" + "_".join(Path(relative).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
