"""Old public names kept for one release after a rename, each warning when used.

Issue 31 gave every concept one word (the glossary at the top of
``docs/architecture.md``); the names it replaced keep working until the next
release so that users' code has time to move. One rule serves every kind of
old name: a module attribute (through the module's ``__getattr__``, so the
warning fires on use, not on importing the package), a method or attribute
(through a property) and a keyword argument.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["warn_renamed", "deprecated_aliases"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (``DeprecationWarning``, at the caller's line) that ``old`` is now ``new``.

    Args:
        old: The old spelling, as the user wrote it (``"CallComparison"``).
        new: What to write instead.
        stacklevel: Frames between this call and the user's code; the default
            suits a helper called directly by the deprecated entry point.
    """
    warnings.warn(
        f"{old} is renamed {new} (one word per concept: see the glossary in "
        f"docs/architecture.md); {old} works until the next release",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated_aliases(
    module: str, renamed: Mapping[str, str], namespace: Mapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that resolves each old name to its new one, warning.

    Use it as ``__getattr__ = deprecated_aliases(__name__, {"Old": "New"},
    globals())``; ``from module import Old`` then works and warns, while
    ``__all__`` and ``dir()`` list only the new names.

    Args:
        module: The module's ``__name__``, for the warning and the AttributeError.
        renamed: Old name to new name; every new name must be in ``namespace``.
        namespace: The module's globals, read when an old name is used.
    """

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{module}.{new}")
        return namespace[new]

    return __getattr__
