"""Scoring's progress bar: drawn for long runs when allowed, silent otherwise."""

from __future__ import annotations

import json

import pytest

from sommelier_mlflow._progress import SCORING_PROGRESS_MIN
from sommelier_mlflow.evaluation import AnsweredExample, BootstrapSettings, score_completions

_SETTINGS = BootstrapSettings(seed=7, resamples=20, confidence=0.95)


def _completions(n: int) -> list[AnsweredExample]:
    rows = []
    for index in range(n):
        gold = {"name": "get_weather", "arguments": {"city": f"c{index % 50}"}}
        said = gold if index % 4 else {"name": "get_time", "arguments": {}}
        rows.append(
            AnsweredExample(
                example_id=f"ex-{index:06d}",
                language="en" if index % 2 else "fr",
                source_example_id=None,
                gold_call=gold,
                raw_text=json.dumps(said),
            )
        )
    return rows


@pytest.fixture(scope="module")
def many() -> list[AnsweredExample]:
    return _completions(SCORING_PROGRESS_MIN + 1)


def test_long_scoring_draws_a_bar_with_rate_when_progress_is_on(
    many: list[AnsweredExample], capsys: pytest.CaptureFixture[str]
) -> None:
    scored = score_completions(many, bootstrap=_SETTINGS, gap_scope="base", progress=True)
    err = capsys.readouterr().err
    assert len(scored.examples) == len(many)
    assert "score" in err
    assert f"{len(many)}/{len(many)}" in err  # it reached the end
    assert "ex/s" in err  # the rate (tqdm shows the ETA next to it)


def test_scoring_is_silent_without_progress_off_a_terminal(
    many: list[AnsweredExample], capsys: pytest.CaptureFixture[str]
) -> None:
    # Under pytest stderr is captured, not a terminal: the CLI's rule passes
    # progress=False there unless --progress is given.
    score_completions(many, bootstrap=_SETTINGS, gap_scope="base", progress=False)
    assert capsys.readouterr().err == ""


def test_short_scoring_stays_quiet_even_with_progress_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    score_completions(_completions(200), bootstrap=_SETTINGS, gap_scope="base", progress=True)
    assert capsys.readouterr().err == ""
