"""Skip locally, fail in CI: the one rule for tests that need a real outside program.

A test that needs vLLM's venv, PostgreSQL or Chromium skips, saying what is
missing, on a developer's machine that lacks it. Under ``CI=true`` the same
absence fails the test instead: ``.ci/run`` installs every such program, so a
missing one means the install broke, and a green run that skipped the
served-generation, team-server or browser tests would prove nothing.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["in_ci", "require"]


def in_ci() -> bool:
    """Whether ``CI`` is set to a true value, as CI services and ``.ci/run`` do."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require(program_present: bool, what: str) -> None:
    """Return if ``program_present``; otherwise fail under CI, skip elsewhere.

    Args:
        program_present: Whether the program was found.
        what: What is missing and how to get it, e.g. "PostgreSQL
            (`apt-get install postgresql`)"; it is the whole reason shown.
    """
    if program_present:
        return
    if in_ci():
        pytest.fail(f"CI=true and {what} is missing: .ci/run should have installed it", False)
    pytest.skip(f"{what} is missing")
