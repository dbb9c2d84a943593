"""Take the README's MLflow UI screenshots from the real demo, in headless Chromium.

The pictures in the README must show what a user gets from the command the
README tells them to run, so this script runs exactly that: it starts a local
``mlflow server`` (SQLite, temporary folder), runs ``mlflow run . --env-manager
local`` against it (the full offline demo on its committed model and
adapter, logged into MLflow's ``Default`` experiment as it is for a user, since
``mlflow run`` picks the experiment and the demo cannot), then drives Debian's
Chromium through Playwright with the MLflow assistant panel closed and writes
``docs/ui-*.png``:

* ``ui-experiment.png``: the experiment's evaluation runs, the comparison parent
  with its ``base`` and ``adapter`` children, key metric columns only;
* ``ui-run-metrics.png``: the adapter arm's run page with its metrics;
* ``ui-compare-runs.png``: MLflow's compare-runs page for the two arms;
* ``ui-comparison-chart.png``: the parent run's forest plot (``comparison.png``);
* ``ui-evaluation.png``: the evaluation view comparing adapter and base example
  by example, with one example opened.
* ``ui-training-curve.png``: the learning curve of tool calling: the command
  ``docs/training.md`` shows (:data:`TRAINING_COMMAND`, the demo base and splits
  by default), logged to the same server, and the run's model-metrics charts of
  ``tooleval/overall/...`` against the training step (``--only training`` takes
  just this one).
* ``ui-models-demo.png`` and ``ui-models-training.png``: the experiment's
  *Models* tab (MLflow 3's LoggedModels) after the demo (the base and the
  base + adapter, each with its metrics) and after the training example (one
  model per evaluated checkpoint, with its step's ``tooleval/...`` metrics).

Before each picture the script checks that the page shows the values the
runs logged (read back through the tracking API), so a broken page fails here
instead of landing in the README. It then records, in ``docs/screenshots.json``
(:data:`VALUES`), the experiment and the values each picture shows, so
``tests/examples/test_readme_results.py`` can hold the committed pictures to
the README's results table without a browser.

    python docs/screenshots.py          # needs chromium (apt-get install chromium)
    python docs/screenshots.py --only training

One command retakes all eight pictures (and ``--readme`` rewrites the README's
table from the same demo run); it took 5.4 minutes (322 s) on two shared cores.
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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MLFLOW = str(Path(sys.executable).with_name("mlflow"))
#: The experiment ``mlflow run .`` logs into when the user names none: what the README shows.
EXPERIMENT = "Default"
#: The training run of ui-training-curve.png, exactly as docs/training.md shows it (a test
#: checks the two agree): enough steps for the curve to move.
TRAINING_ARGS = ("--steps", "24", "--every", "4", "--max-examples", "20")
TRAINING_COMMAND = " ".join(("python examples/train_lora_with_callback.py", *TRAINING_ARGS))
#: What each picture shows, by run and metric key (written by this script, read by tests).
VALUES = DOCS / "screenshots.json"
#: The keys recorded per picture: an arm's slice metrics and gaps, the comparison's deltas.
_ARM_KEY = re.compile(r"^(?!gap/|delta/|marginal_gap/|mcnemar/)[^/]+/[a-z0-9_]+$|^gap/[^/]+/.+$")
_DELTA_KEY = re.compile(r"^delta/.+$")
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


def _environment(url: str) -> dict[str, str]:
    """A child process's environment: logging to ``url`` where a user's would, offline.

    No experiment is set, so runs land in ``Default`` as the README's command's do.
    """
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": url,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "HF_HUB_OFFLINE": "1",
    }
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        env.pop(name, None)
    return env


def run_demo(url: str, cwd: Path) -> tuple[str, str]:
    """``mlflow run . --env-manager local`` against ``url``: the parent run id and the output."""
    env = _environment(url)
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
    """:data:`TRAINING_COMMAND` against ``url`` (its outputs under ``cwd``): its run id."""
    env = _environment(url)
    script = ROOT / "examples" / "train_lora_with_callback.py"
    command = [sys.executable, str(script), *TRAINING_ARGS]
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


#: The request (first line) of the example row holding a trace-id chip: the row is the
#: chip's nearest ancestor that holds both arms' trace ids.
_ROW_REQUEST = """chip => {
  let row = chip;
  while (row && (row.innerText.match(/tr-[0-9a-f]/g) || []).length < 2) row = row.parentElement;
  return row ? row.innerText.split("\\n")[0] : null;
}"""


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


def _shown(run: Any, pattern: re.Pattern[str]) -> dict[str, float]:
    """The run's logged metrics whose keys match ``pattern`` (what its pages show)."""
    return {key: value for key, value in sorted(run.data.metrics.items()) if pattern.match(key)}


def _curves(url: str, run_id: str) -> dict[str, dict[str, float]]:
    """Every ``tooleval/overall/<metric>`` of a training run, by step (as a string: JSON keys)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    keys = [key for key in client.get_run(run_id).data.metrics if key.count("/") == 2]
    curves = {}
    for key in sorted(k for k in keys if k.startswith("tooleval/overall/")):
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        curves[key] = {str(metric.step): metric.value for metric in history}
    return curves


def record_values(values: dict[str, Any]) -> None:
    """Merge ``values`` (picture -> what it shows) into :data:`VALUES`, atomically."""
    sys.path.insert(0, str(ROOT))
    from sommelier_mlflow._json import atomic_write_json

    recorded = json.loads(VALUES.read_text("utf-8")) if VALUES.is_file() else {}
    atomic_write_json(VALUES, {**recorded, **values})


def take_training_curve(url: str, run_id: str) -> tuple[Path, dict[str, Any]]:
    """The training run's charts of ``tooleval/overall/...`` against the step, and its values."""
    from mlflow.tracking import MlflowClient

    run = MlflowClient(url).get_run(run_id)
    curves = _curves(url, run_id)
    if "0" not in curves.get("tooleval/overall/valid_json_rate", {}):
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
    shown = {"command": TRAINING_COMMAND, "experiment": EXPERIMENT, "curves": curves}
    return path, {path.name: shown}


def take_models_tab(
    url: str, experiment_id: str, names: list[str], key: str, picture: str
) -> tuple[Path, dict[str, Any]]:
    """The experiment's Models tab charting ``key`` for each model of ``names``.

    The models and their values are read back through the tracking API
    (``search_logged_models``); each model's name and each value (as the
    chart rounds it, two decimals) must be on the page.
    """
    from mlflow.tracking import MlflowClient

    models = MlflowClient(url).search_logged_models(experiment_ids=[experiment_id])
    shown: dict[str, dict[str, float]] = {}
    for model in models:
        if model.name in names:
            values = {m.key: m.value for m in model.metrics or [] if m.key == key}
            shown[model.name] = values
    missing = sorted(set(names) - set(shown))
    if missing or not all(shown.values()):
        raise SystemExit(f"the Models tab lacks {missing or names} with {key}")
    with chromium_page() as page:
        page.goto(f"{url}/#/experiments/{experiment_id}/models")
        page.get_by_text(names[0]).first.wait_for(timeout=120_000)
        _quiet(page)
        # The "Model training" view of the tab charts each model's metrics side by side.
        page.get_by_text("Model training").first.click()
        page.get_by_role("link", name="Models").first.click()
        page.get_by_text(names[0]).first.wait_for(timeout=120_000)
        page.locator("label:has(input[value=CHART])").first.click()
        page.get_by_placeholder("Search metric charts").fill(key)
        page.wait_for_timeout(3000)
        values = sorted(
            {f"{value:.2f}" for metrics in shown.values() for value in metrics.values()}
        )
        _expect(page, *names, key, *values)
        path = DOCS / picture
        page.screenshot(path=str(path))
    return path, {path.name: {"experiment": EXPERIMENT, "models": shown}}


def take_training_models(url: str, run_id: str) -> tuple[Path, dict[str, Any]]:
    """The Models tab after the training example: one LoggedModel per evaluated checkpoint."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    experiment = client.get_run(run_id).info.experiment_id
    checkpoints = client.search_logged_models(
        experiment_ids=[experiment],
        filter_string=f"tags.`sommelier.training_run_id` = '{run_id}'",
    )
    names = [model.name for model in checkpoints]
    if not names:
        raise SystemExit(f"training run {run_id} logged no checkpoint LoggedModels")
    key = "tooleval/overall/full_call_exact_match"
    return take_models_tab(url, experiment, names, key, "ui-models-training.png")


def take(url: str, parent_id: str) -> tuple[list[Path], dict[str, Any]]:
    """Drive Chromium through the five pages and the Models tab; return the pictures and values."""
    from mlflow.tracking import MlflowClient

    runs = _runs(url, parent_id)
    experiment = runs["parent"].info.experiment_id
    name = MlflowClient(url).get_experiment(experiment).name
    if name != EXPERIMENT:
        raise SystemExit(f"the demo logged into experiment {name!r}, not {EXPERIMENT!r}")
    base, adapter = runs["base"].info.run_id, runs["adapter"].info.run_id
    key = "overall/full_call_exact_match"
    arms = {kind: _shown(runs[kind], _ARM_KEY) for kind in ("base", "adapter")}
    deltas = {"parent": _shown(runs["parent"], _DELTA_KEY)}
    columns = {
        kind: {k: v for k, v in sorted(runs[kind].data.metrics.items()) if k in KEY_COLUMNS}
        for kind in ("parent", "base", "adapter")
    }
    shows: dict[str, dict[str, Any]] = {
        "ui-experiment.png": columns,
        "ui-run-metrics.png": {"adapter": arms["adapter"]},
        "ui-compare-runs.png": arms,
        "ui-comparison-chart.png": {**deltas, **arms},  # its columns: base->adapter, delta
        "ui-evaluation.png": {},
    }
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
        _expect(page, EXPERIMENT, "adapter", "base", key, "fr/full_call_exact_match")
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
        # Each row is one example: its request (the query), then both arms' trace ids.
        chip = page.get_by_text(re.compile(r"^tr-[0-9a-f]")).first
        chip.wait_for(timeout=120_000)
        _quiet(page)
        request = chip.evaluate(_ROW_REQUEST)
        if not request:
            raise SystemExit(f"{page.url}: no example row with both arms' traces")
        page.get_by_text(request, exact=True).first.click()
        page.get_by_text("Outputs").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        _expect(page, "Comparing 2 traces", "example_id", "query", "raw_output")
        shot("ui-evaluation.png")
    values = {path.name: {"experiment": EXPERIMENT, "runs": shows[path.name]} for path in written}
    models = [
        MlflowClient(url).get_logged_model(runs[kind].data.tags["sommelier.logged_model_id"]).name
        for kind in ("base", "adapter")
    ]
    picture, shown = take_models_tab(url, experiment, models, key, "ui-models-demo.png")
    return [*written, picture], {**values, **shown}


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
        help="take only the demo's six pictures, or only the training pictures (default: all)",
    )
    args = parser.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sommelier-shots-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        with mlflow_server(root) as url:
            written: list[Path] = []
            values: dict[str, Any] = {}
            if args.only != "training":
                parent_id, output = run_demo(url, root)
                if args.readme:
                    sys.path.insert(0, str(DOCS))
                    from update_readme_results import README, summary_table, with_table

                    table = summary_table(output)
                    README.write_text(with_table(README.read_text("utf-8"), table), "utf-8")
                    print(f"wrote the demo table into {README.relative_to(ROOT)}")
                pictures, shown = take(url, parent_id)
                written += pictures
                values.update(shown)
            if args.only != "demo":
                training_run = run_training(url, root)
                picture, shown = take_training_curve(url, training_run)
                written.append(picture)
                values.update(shown)
                picture, shown = take_training_models(url, training_run)
                written.append(picture)
                values.update(shown)
            record_values(values)
            for path in [*written, VALUES]:
                print(f"wrote {path.relative_to(ROOT)}")
    print(f"took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
