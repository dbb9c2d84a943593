"""tests/support/programs.py: a missing outside program skips locally and fails in CI."""

from __future__ import annotations

import pytest

from tests.support.programs import require


def test_a_missing_program_fails_under_ci_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true and PostgreSQL \(apt\) is missing"):
        require(False, "PostgreSQL (apt)")


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_a_missing_program_skips_with_the_reason_outside_ci(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match=r"^Chromium is missing$"):
        require(False, "Chromium")


def test_a_present_program_neither_skips_nor_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    require(True, "Chromium")
