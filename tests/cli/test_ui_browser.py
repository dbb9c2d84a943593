"""The MLflow UI, checked in a real headless Chromium against a real `mlflow server`.

Deselect with ``-m 'not browser'``; skipped when Chromium is not installed
(``.ci/run`` installs Debian's chromium, and under ``CI=true`` its absence fails).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import CITIES, write_fixture
from tests.support.programs import require

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The README's pictures come from the real demo (docs/screenshots.py); the test's own
# shots of its reduced fixture go to a scratch folder for inspecting a failure.
SHOTS = Path(tempfile.gettempdir()) / "sommelier-ui-test-shots"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    require(os.path.exists(CHROMIUM), "Chromium (`apt-get install chromium`)")


@pytest.fixture(scope="module")
def demo_runs(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A reduced demo in the store: a parent comparison run with base and adapter children."""
    import mlflow

    from sommelier_mlflow.cli._options import DeclaredModel, ScoringOptions
    from sommelier_mlflow.cli._pipeline import score_generations
    from sommelier_mlflow.cli._runs import child_run, log_arm, top_run
    from sommelier_mlflow.evaluation import run_comparison
    from sommelier_mlflow.generation import BackendRequest
    from sommelier_mlflow.integration import log_comparison_run

    root = tmp_path_factory.mktemp("ui")
    files = write_fixture(root / "in")
    mlflow.set_tracking_uri(server)
    os.environ["MLFLOW_TRACKING_URI"] = server
    ids: dict[str, str] = {}
    scoring = ScoringOptions(resamples=500)
    split = scoring.read(files["split"])
    try:
        with top_run("sommelier-main") as parent:
            ids["parent"] = parent
            arms = {}
            for kind in ("base", "adapter"):
                with child_run(parent, kind) as run_id:
                    ids[kind] = run_id
                    adapter = str(files["adapter_dir"]) if kind == "adapter" else None
                    request = BackendRequest("demo/tiny-llama", "demo", adapter=adapter)
                    declared = DeclaredModel(kind, request)
                    arms[kind] = score_generations(
                        split, files[kind], declared, root / kind, scoring
                    )
                    log_arm(arms[kind], run_id, {})
            comparison = run_comparison(
                arms["base"].report_path,
                arms["adapter"].report_path,
                root / "cmp",
                resamples=500,
            )
            log_comparison_run(comparison.report, run_id=parent)
        ids["experiment"] = mlflow.get_run(ids["parent"]).info.experiment_id
    finally:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        mlflow.set_tracking_uri(None)  # unset: later tests read the environment
    return ids


@pytest.fixture(scope="module")
def browser(demo_runs: dict[str, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page per test: the UI is a single-page app that keeps state across hashes."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    yield context.new_page()
    context.close()


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=False)


def test_experiment_page_lists_the_runs(
    server: str,
    demo_runs: dict[str, str],
    page: Any,
) -> None:
    page.goto(f"{server}/#/experiments/{demo_runs['experiment']}/runs")
    page.get_by_text("sommelier-main").first.wait_for(timeout=60_000)
    _shot(page, "ui-experiment.png")
    assert "3 matching runs" in page.inner_text("body")


def _metric_window(page: Any) -> tuple[list[str], str]:
    """Metric names rendered in the compare page's (virtualised) metrics table, and its text."""
    text = page.inner_text("body")
    section = text.split("Metrics\nShow diff only\n", 1)[1].split("\nArtifacts", 1)[0]
    lines = [line.strip() for line in section.splitlines() if line.strip()]
    return [line for line in lines if "/" in line], section


def test_compare_page_lists_both_runs_and_the_slice_metrics(
    server: str,
    demo_runs: dict[str, str],
    page: Any,
) -> None:
    runs = json.dumps([demo_runs["base"], demo_runs["adapter"]])
    experiments = json.dumps([demo_runs["experiment"]])
    page.goto(f"{server}/#/compare-runs?runs={runs}&experiments={experiments}")
    anchor = page.locator("a", has_text="en/argument_exact_match").first
    anchor.wait_for(timeout=60_000)
    anchor.scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    _shot(page, "ui-compare-runs.png")
    # The table renders only the rows in view and overall/* sort last: scroll it
    # as a user would, with the wheel over the values.
    cell = anchor.bounding_box()
    assert cell is not None
    page.mouse.move(cell["x"] + 500, cell["y"] + cell["height"] / 2)
    seen: set[str] = set()
    for _ in range(200):
        seen.update(_metric_window(page)[0])
        if "overall/full_call_exact_match" in seen:
            break
        page.mouse.wheel(0, 60)
        page.wait_for_timeout(60)
    assert {"overall/full_call_exact_match", "fr/full_call_exact_match"} <= seen
    body = page.inner_text("body")
    assert demo_runs["base"] in body and demo_runs["adapter"] in body


def _run_metrics(page: Any, server: str, experiment: str, run_id: str) -> dict[str, str]:
    """The metric table of a run's overview page, as the user reads it."""
    page.goto(f"{server}/#/experiments/{experiment}/runs/{run_id}")
    page.get_by_text("overall/full_call_exact_match").first.wait_for(timeout=60_000)
    text = page.inner_text("body")
    lines = [line.strip() for line in text.split("Metric\nValue\n", 1)[1].splitlines()]
    return dict(zip(lines[0::2], lines[1::2], strict=False))


def test_run_pages_show_both_runs_values(
    server: str,
    demo_runs: dict[str, str],
    page: Any,
) -> None:
    base = _run_metrics(page, server, demo_runs["experiment"], demo_runs["base"])
    _shot(page, "ui-run-metrics.png")
    adapter = _run_metrics(page, server, demo_runs["experiment"], demo_runs["adapter"])
    # Base: 2 of 8 full calls overall, 1 of 4 in French; the adapter gets all of them.
    assert base["overall/full_call_exact_match"] == "0.25"
    assert base["overall/counts/full_call_exact_match.numerator"] == "2"
    assert base["fr/full_call_exact_match"] == "0.25"
    assert adapter["overall/full_call_exact_match"] == "1"
    assert adapter["fr/full_call_exact_match"] == "1"


@pytest.mark.parametrize(
    ("artifact", "shot"),
    [("comparison.png", "ui-comparison-chart.png"), ("comparison_report.md", "ui-report.png")],
)
def test_parent_run_artifacts_render(
    server: str,
    demo_runs: dict[str, str],
    page: Any,
    artifact: str,
    shot: str,
) -> None:
    base = f"{server}/#/experiments/{demo_runs['experiment']}/runs/{demo_runs['parent']}"
    page.goto(f"{base}/artifacts/sommelier/{artifact}")
    page.get_by_text(artifact).first.wait_for(timeout=60_000)
    if artifact.endswith(".png"):
        page.locator("img").last.wait_for(timeout=60_000)
        assert page.locator("img").last.evaluate("img => img.naturalWidth") > 100
    else:  # the Markdown preview may render in a frame of its own
        for _ in range(60):
            texts = [frame.locator("body").inner_text() for frame in page.frames]
            if any("McNemar" in text and "full_call_exact_match" in text for text in texts):
                break
            page.wait_for_timeout(500)
        else:
            pytest.fail("comparison_report.md did not render its numbers")
    _shot(page, shot)


def test_evaluation_view_compares_the_arms_example_by_example(
    server: str,
    demo_runs: dict[str, str],
    page: Any,
) -> None:
    """Each arm logged a trace per example; the evaluation view pairs them by request."""
    page.goto(
        f"{server}/#/experiments/{demo_runs['experiment']}/evaluation-runs"
        f"?selectedRunUuid={demo_runs['adapter']}&compareToRunUuid={demo_runs['base']}"
    )
    # A trace's request preview is the example's query.
    row = page.get_by_text(f"weather in {CITIES[1]} (en)").first
    row.wait_for(timeout=60_000)
    body = page.inner_text("body")
    assert "Comparing" in body and "adapter" in body and "base" in body
    assert "8 of 8" in body  # one trace per example of the fixture
    row.click()
    page.get_by_text("Outputs").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)
    opened = page.inner_text("body")
    # en-1: the adapter answers celsius (right), the base kelvin (wrong units).
    assert "Comparing 2 traces" in opened
    assert "celsius" in opened and "kelvin" in opened
    # The modal heads its two columns with trace ids only: each trace names its arm.
    modal = page.get_by_role("dialog").last.inner_text()
    assert "base" in modal and "adapter" in modal, modal[:2000]
    _shot(page, "ui-evaluation.png")
