"""The README and the pages under docs/ stay true to the tree they describe.

- Every relative link resolves: the file exists and, for ``page.md#anchor``,
  the page has a heading with that anchor (GitHub's slug rule).
- ``docs/architecture.md`` names only modules that exist and names every
  package of ``sommelier_mlflow``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
        str(init.parent.relative_to(PACKAGE)) for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    )
    assert packages
    unnamed = [name for name in packages if f"{name}/" not in text]
    assert unnamed == []
