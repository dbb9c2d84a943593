"""Take the README's MLflow UI screenshots from the real demo, in headless Chromium.

The pictures in the README must show what a user gets from the command the
README tells them to run, so this script runs exactly that: it starts a local
``mlflow server`` (SQLite, temporary folder), runs ``mlflow run . --env-manager
local`` against it (the full offline demo on its committed model and
adapter), then drives Debian's Chromium through Playwright with the
MLflow assistant panel closed and writes ``docs/ui-*.png``:

* ``ui-experiment.png``: the experiment's evaluation runs, the comparison parent
  with its ``base`` and ``adapter`` children, key metric columns only;
* ``ui-run-metrics.png``: the adapter arm's run page with its metrics;
* ``ui-compare-runs.png``: MLflow's compare-runs page for the two arms;
* ``ui-comparison-chart.png``: the parent run's forest plot (``comparison.png``);
* ``ui-evaluation.png``: the evaluation view comparing adapter and base example
  by example, with one example opened.
* ``ui-training-curve.png``: the learning curve of tool calling: a few steps of
  ``examples/train_lora_with_callback.py`` on the demo base, logged to the same
  server, and the run's model-metrics charts of ``tooleval/overall/...``
  against the training step (``--only training`` takes just this one).

Before each picture the script checks that the page shows the values the
runs logged (read back through the tracking API), so a broken page fails here
instead of landing in the README.

    python docs/screenshots.py          # needs chromium (apt-get install chromium)
    python docs/screenshots.py --only training
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MLFLOW = str(Path(sys.executable).with_name("mlflow"))
EXPERIMENT = "sommelier-demo"
TRAINING_EXPERIMENT = "sommelier-training"
#: The training run of ui-training-curve.png: enough steps for the curve to move.
TRAINING_ARGS = ("--steps", "24", "--every", "4", "--max-examples", "20")
VIEWPORT = {"width": 1400, "height": 900}
#: The columns ui-experiment.png keeps (every other metric column is hidden).
KEY_COLUMNS = (
    "Run Name",
    "Status",
    "Dataset",
    "overall/valid_json_rate",
    "overall/full_call_exact_match",
    "en/full_call_exact_match",
    "fr/full_call_exact_match",
    "gap/fr/full_call_exact_match",
)


@contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """The tests' local ``mlflow server`` (one implementation), with a longer start allowance."""
    sys.path.insert(0, str(ROOT))
    from tests.support.mlflow_server import local_mlflow_server

    with local_mlflow_server(root, start_timeout=300) as url:
        yield url


def _environment(url: str, experiment: str) -> dict[str, str]:
    """A child process's environment: logging to ``url`` in ``experiment``, offline."""
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": url,
        "MLFLOW_EXPERIMENT_NAME": experiment,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("MLFLOW_RUN_ID", None)
    return env


def run_demo(url: str, cwd: Path) -> tuple[str, str]:
    """``mlflow run . --env-manager local`` against ``url``: the parent run id and the output."""
    env = _environment(url, EXPERIMENT)
    result = subprocess.run(
        [MLFLOW, "run", str(ROOT), "--env-manager", "local"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    match = re.search(r"Run \(ID '([0-9a-f]+)'\) succeeded", output)
    if result.returncode != 0 or not match:
        raise SystemExit(f"the demo failed:\n{output[-4000:]}")
    print(result.stdout)
    return match.group(1), result.stdout


def run_training(url: str, cwd: Path) -> str:
    """``examples/train_lora_with_callback.py`` on the demo base against ``url``: its run id."""
    sys.path.insert(0, str(ROOT))
    from tests.support.vllm_server import build_demo_assets

    assets = build_demo_assets()
    env = _environment(url, TRAINING_EXPERIMENT)
    script = ROOT / "examples" / "train_lora_with_callback.py"
    command = [sys.executable, str(script), "--base-model", str(assets.base_model_dir)]
    command += ["--splits", str(assets.splits_dir), *TRAINING_ARGS, "--output-dir", "train"]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    match = re.search(r"^MLflow run ([0-9a-f]+)$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or not match:
        raise SystemExit(f"the training example failed:\n{(result.stdout + result.stderr)[-4000:]}")
    print(result.stdout[result.stdout.find("step   0") :])
    return match.group(1)


def _runs(url: str, parent_id: str) -> dict[str, Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    parent = client.get_run(parent_id)
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    runs: dict[str, Any] = {run.info.run_name: run for run in children}
    runs["parent"] = parent
    if set(runs) != {"parent", "base", "adapter"}:
        raise SystemExit(f"expected base and adapter child runs, found {sorted(runs)}")
    return runs


def _expect_metric(page: Any, key: str, value: float) -> None:
    """The run page's metrics table shows ``key`` with ``value`` (however the UI rounds it)."""
    lines = [line.strip() for line in page.inner_text("body").splitlines()]
    shown = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == key]
    numbers = [float(text) for text in shown if re.fullmatch(r"-?[0-9.]+", text)]
    if not any(abs(number - value) < 5e-4 for number in numbers):
        raise SystemExit(f"{page.url} shows {key} = {shown}, the run logged {value}")


def _quiet(page: Any) -> None:
    """Close the MLflow assistant panel and dismiss first-visit tips, if shown."""
    page.wait_for_timeout(1500)
    for name in ("Got it",):
        button = page.get_by_role("button", name=name)
        if button.count():
            button.first.click()
    assistant = page.get_by_text("MLflow Assistant")
    close = page.get_by_role("button", name="Close")
    if assistant.count() and assistant.first.is_visible() and close.count():
        # A DOM click: on a loaded machine the panel's animation keeps Playwright's
        # "stable" check waiting past its timeout.
        close.first.evaluate("button => button.click()")
        page.wait_for_timeout(800)


def _expect(page: Any, *texts: str) -> None:
    body = page.inner_text("body")
    missing = [text for text in texts if text not in body]
    if missing:
        raise SystemExit(f"{page.url} does not show {missing}")


def _keep_columns(page: Any) -> None:
    """Hide every column of the evaluation-runs table except :data:`KEY_COLUMNS`."""
    page.get_by_role("combobox", name=re.compile(r"^Columns")).first.click()
    page.wait_for_timeout(800)
    options = page.get_by_role("option")
    for index in range(options.count()):
        option = options.nth(index)
        name = option.inner_text().strip()
        selected = option.get_attribute("aria-selected") == "true"
        if selected != (name in KEY_COLUMNS):
            option.click()
    page.keyboard.press("Escape")
    page.wait_for_timeout(800)


@contextmanager
def chromium_page() -> Iterator[Any]:
    """One page of a headless Chromium at :data:`VIEWPORT`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser.new_context(viewport=VIEWPORT).new_page()
        browser.close()


def take_training_curve(url: str, run_id: str) -> Path:
    """The training run's charts of ``tooleval/overall/...`` against the step."""
    from mlflow.tracking import MlflowClient

    run = MlflowClient(url).get_run(run_id)
    history = MlflowClient(url).get_metric_history(run_id, "tooleval/overall/valid_json_rate")
    if sorted(metric.step for metric in history)[:1] != [0]:
        raise SystemExit(f"run {run_id} has no tooleval/overall/valid_json_rate at step 0")
    with chromium_page() as page:
        page.goto(f"{url}/#/experiments/{run.info.experiment_id}/runs/{run_id}/model-metrics")
        page.get_by_text("tooleval/overall").first.wait_for(timeout=180_000)
        _quiet(page)
        page.get_by_placeholder("Search metric charts").fill("overall/")
        page.wait_for_timeout(3000)
        _expect(page, "tooleval/overall", "full_call_exact_match", "valid_json_rate")
        if "tooleval/en" in page.inner_text("body"):
            raise SystemExit(f"{page.url} did not filter the charts to tooleval/overall")
        path = DOCS / "ui-training-curve.png"
        page.screenshot(path=str(path))
    return path


def take(url: str, parent_id: str) -> list[Path]:
    """Drive Chromium through the five pages; return the screenshots written."""
    runs = _runs(url, parent_id)
    experiment = runs["parent"].info.experiment_id
    base, adapter = runs["base"].info.run_id, runs["adapter"].info.run_id
    key = "overall/full_call_exact_match"
    written: list[Path] = []
    with chromium_page() as page:

        def shot(name: str) -> None:
            path = DOCS / name
            page.screenshot(path=str(path))
            written.append(path)

        page.goto(f"{url}/#/experiments/{experiment}/evaluation-runs")
        page.get_by_text(runs["parent"].info.run_name).first.wait_for(timeout=120_000)
        _quiet(page)
        _keep_columns(page)
        _expect(page, "adapter", "base", key, "fr/full_call_exact_match")
        shot("ui-experiment.png")

        page.goto(f"{url}/#/experiments/{experiment}/runs/{adapter}")
        page.get_by_text(key).first.wait_for(timeout=120_000)
        _quiet(page)
        _expect_metric(page, key, runs["adapter"].data.metrics[key])
        shot("ui-run-metrics.png")

        ids, experiments = json.dumps([base, adapter]), json.dumps([experiment])
        page.goto(f"{url}/#/compare-runs?runs={ids}&experiments={experiments}")
        anchor = page.locator("a", has_text="en/argument_exact_match").first
        anchor.wait_for(state="attached", timeout=120_000)
        _quiet(page)
        anchor.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        _expect(page, base, adapter, "en/argument_exact_match")
        shot("ui-compare-runs.png")

        run_page = f"{url}/#/experiments/{experiment}/runs/{parent_id}"
        page.goto(f"{run_page}/artifacts/sommelier/comparison.png")
        # The artifact viewer keeps hidden <img> placeholders around the chart, so wait
        # for the chart itself: an image that has loaded at its 1200 px width.
        page.wait_for_function(
            "() => [...document.images].some(img => img.naturalWidth === 1200)",
            timeout=120_000,
        )
        _quiet(page)
        shot("ui-comparison-chart.png")

        page.goto(
            f"{url}/#/experiments/{experiment}/evaluation-runs"
            f"?selectedRunUuid={adapter}&compareToRunUuid={base}"
        )
        first = page.get_by_text('"example_id": ').first
        first.wait_for(timeout=120_000)
        _quiet(page)
        first.click()
        page.get_by_text("Outputs").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        _expect(page, "example_id", "query")
        shot("ui-evaluation.png")
    return written


def main(argv: list[str] | None = None) -> int:
    """Run the demo and the training example against a fresh local server; rewrite docs/ui-*.png."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="keep the server's files here")
    parser.add_argument(
        "--readme",
        action="store_true",
        help="also write this demo run's results table into README.md (one demo run for both)",
    )
    parser.add_argument(
        "--only",
        choices=["demo", "training"],
        default=None,
        help="take only the demo's five pictures, or only the training curve (default: all)",
    )
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="sommelier-shots-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        with mlflow_server(root) as url:
            written: list[Path] = []
            if args.only != "training":
                parent_id, output = run_demo(url, root)
                if args.readme:
                    sys.path.insert(0, str(DOCS))
                    from update_readme_results import README, summary_table, with_table

                    table = summary_table(output)
                    README.write_text(with_table(README.read_text("utf-8"), table), "utf-8")
                    print(f"wrote the demo table into {README.relative_to(ROOT)}")
                written += take(url, parent_id)
            if args.only != "demo":
                written.append(take_training_curve(url, run_training(url, root)))
            for path in written:
                print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
