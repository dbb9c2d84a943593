"""The README and the pages under docs/ stay true to the tree they describe.

- Every relative link resolves: the file exists and, for ``page.md#anchor``,
  the page has a heading with that anchor (GitHub's slug rule).
- ``docs/architecture.md`` names only modules that exist and names every
  package of ``sommelier_mlflow``; its layer diagram draws the layers of
  ``tests/test_import_graph.py``, one line per layer; it names every plugin
  entry-point group, and each group is loaded by a ``Registry``; every name
  its glossary gives in code exists as named, and every old name it says
  a word replaces has left the public surface (it resolves only as an alias).
- The README's entry-point table names exactly the MLproject's entry points
  and each one's parameters, and its command list every command.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import warnings
from pathlib import Path

import pytest
import yaml

from sommelier_mlflow._deprecation import DOCUMENTED, RENAMED
from tests.test_import_graph import LAYER
from tests.test_public_api import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sommelier_mlflow"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto: — not a file of this tree
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor})")
    assert broken == []


def _inline_code(page: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", _FENCE.sub("", page.read_text(encoding="utf-8")))


def test_architecture_names_only_modules_that_exist() -> None:
    missing = []
    for token in _inline_code(ROOT / "docs" / "architecture.md"):
        if not re.fullmatch(r"[\w./]+\.py", token):
            continue
        candidates = [ROOT / token, PACKAGE / token]
        if "/" not in token:  # a bare module name: anywhere in the package
            candidates += list(PACKAGE.rglob(token))
        if not any(c.is_file() for c in candidates):
            missing.append(token)
    assert missing == []


def test_architecture_names_every_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(
        str(init.parent.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    )
    assert packages
    unnamed = [name for name in packages if f"{name}/" not in text]
    assert unnamed == []


def _layer_diagram() -> list[list[str]]:
    """The modules on each line of architecture.md's layer diagram, top line first."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1]
    fence = re.search(r"^```\n(.*?)^```", section, re.S | re.M)
    assert fence, "docs/architecture.md: no diagram under '## Layers'"
    rows = []
    for line in fence.group(1).splitlines():
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
        rows.append([re.sub(r"(/|\.py)$", "", name) for name in names])
    return rows


def test_the_layer_diagram_draws_the_import_graph_layers() -> None:
    rows = _layer_diagram()
    drawn = [name for row in rows for name in row]
    assert sorted(drawn) == sorted(LAYER), "the diagram and LAYER name different modules"
    layers = [{LAYER[name] for name in row} for row in rows]
    mixed = [row for row, found in zip(rows, layers, strict=True) if len(found) != 1]
    assert mixed == [], "one line of the diagram, one layer"
    order = [found.pop() for found in layers]
    # Highest layer first, and each layer on one line only.
    assert order == sorted(set(order), reverse=True), f"lines by layer: {order}"


def _plugin_groups() -> dict[str, str]:
    """Each entry-point group constant of ``_plugins.py`` (``*_GROUP``) and its group name."""
    groups = {}
    for node in ast.parse((PACKAGE / "_plugins.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0], node.value
        else:
            continue
        if target.id.endswith("_GROUP") and isinstance(value, ast.Constant):
            groups[target.id] = str(value.value)
    return groups


def test_every_plugin_group_is_documented_and_loaded_by_a_registry() -> None:
    groups = _plugin_groups()
    assert len(groups) >= 5
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert [name for name in groups.values() if name not in text] == []
    passed = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registry":
                given = [*node.args, *(keyword.value for keyword in node.keywords)]
                passed |= {arg.id for arg in given if isinstance(arg, ast.Name)}
    assert sorted(set(groups) - passed) == []


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _entry_point_table() -> dict[str, set[str]]:
    """The README's entry-point table: entry point -> the parameters its row names.

    A row names a parameter in backticks outside parentheses; what stands in
    parentheses (defaults, values, links) is commentary.
    """
    lines = _readme().splitlines()
    start = lines.index("| entry point | parameters |") + 2
    table = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        entry, parameters = line.strip("|").split("|", 1)
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", parameters)  # a link: its text
        while re.search(r"\([^()]*\)", text):
            text = re.sub(r"\([^()]*\)", "", text)
        table[re.findall(r"`([^`]+)`", entry)[0]] = set(re.findall(r"`([^`]+)`", text))
    return table


def test_the_readme_entry_point_table_is_the_mlproject() -> None:
    declared = yaml.safe_load((ROOT / "MLproject").read_text(encoding="utf-8"))["entry_points"]
    table = _entry_point_table()
    assert sorted(table) == sorted(declared)
    wrong = {
        entry: {
            "not in MLproject": sorted(table[entry] - set(spec.get("parameters") or {})),
            "not in the README": sorted(set(spec.get("parameters") or {}) - table[entry]),
        }
        for entry, spec in declared.items()
        if table[entry] != set(spec.get("parameters") or {})
    }
    assert wrong == {}


def test_the_readme_lists_every_command() -> None:
    import argparse

    from sommelier_mlflow.cli import build_parser

    commands = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, parser in action.choices.items():
                nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
                commands |= {f"{name} {sub}" for a in nested for sub in a.choices} or {name}
    listed = re.search(r"`sommelier-mlflow \{([^}]*)\} --help`", _readme())
    assert listed, "README.md: no `sommelier-mlflow {command,...} --help` list"
    assert {" ".join(name.split()) for name in listed.group(1).split(",")} == commands


_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?")


def _glossary() -> list[list[str]]:
    """The glossary's rows (word, meaning, in code, replaces), header excluded."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| word")
    ]
    assert len(rows) >= 12, "the glossary should define a dozen words or so"
    assert all(len(row) == 4 for row in rows), rows
    return rows


def _names(cell: str) -> list[str]:
    return [name for name in re.findall(r"`([^`]+)`", cell) if _NAME.fullmatch(name)]


def _resolves(name: str) -> bool:
    """``Name`` or ``Name.member`` in a public package, or ``_module.Name`` in the package."""
    head, _, member = name.partition(".")
    for package in PACKAGES:
        module = importlib.import_module(package)
        if head in module.__all__:
            owner = getattr(module, head)
            if not member:
                return True
            fields = (
                {f.name for f in dataclasses.fields(owner)}
                if dataclasses.is_dataclass(owner)
                else set()
            )
            return member in fields or member in vars(owner)
    try:
        module = importlib.import_module(f"sommelier_mlflow.{head}")
    except ImportError:
        return False
    return bool(member) and hasattr(module, member)


def test_the_glossarys_names_exist_as_named() -> None:
    missing = [name for row in _glossary() for name in _names(row[2]) if not _resolves(name)]
    assert missing == []
    words = [row[0] for row in _glossary()]
    assert len(words) == len(set(words)), "a word is defined twice"


def test_the_names_the_glossary_replaced_are_aliases_only() -> None:
    replaced = [name for row in _glossary() for name in _names(row[3]) if "." not in name]
    assert replaced, "the glossary names no replaced Python name"
    exported = {name for package in PACKAGES for name in importlib.import_module(package).__all__}
    assert sorted(set(replaced) & exported) == []
    assert [name for name in replaced if name not in RENAMED and name not in DOCUMENTED] == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in replaced:
            new = RENAMED.get(name) or DOCUMENTED[name]
            owners = [
                module for module in map(importlib.import_module, PACKAGES) if new in module.__all__
            ]
            assert owners and all(getattr(m, name) is getattr(m, new) for m in owners), name
