"""An installed package's plugins reach every command by entry point alone.

A tiny plugin distribution is built in a temp dir and pip-installed into a
fresh venv layered over this one; nothing imports it by hand, yet
``sommelier-mlflow backends`` lists its backend, ``evaluate --backend toy``
runs with it, and its output format is accepted. A plugin that fails to
import is a warning naming it, never a crash (issue 24 item 2).

Its scoring metrics (one in ``sommelier_mlflow.scoring_metrics``, one in the
older ``sommelier_mlflow.metrics`` group) reach ``evaluate``, ``score`` and its
MLflow run, ``mlflow run -e score``, the ``mlflow.models.evaluate`` evaluator
and the genai scorers, none of which looks a metric up by name (issue 31
item 2c).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.cli.cli_helpers import (
    BASE_OUTPUTS,
    CITIES,
    evaluate_args,
    examples,
    gold,
    logged_run_id,
    score_args,
    write_fixture,
)
from tests.support.mlflow_run import mlflow_run

_BACKEND = '''
from pydantic import Field

from sommelier_mlflow.generation import BackendOptions, BackendRequest, register_backend

OUTPUTS = {outputs!r}


class ToyOptions(BackendOptions):
    suffix: str = Field("", description="text appended to every answer")


@register_backend("toy", options=ToyOptions)
class ToyBackend:
    """A plugin backend answering from a table (installed by entry point)."""

    tokenizer = None

    def __init__(self, request: BackendRequest, options: ToyOptions) -> None:
        self._identity = request.declared_identity()
        self._suffix = options.suffix

    def model_identity(self):
        return self._identity

    def adapter_info(self):
        return None

    def generate(self, prompts, *, max_new_tokens):
        return [OUTPUTS[prompt] + self._suffix for prompt in prompts]

    def fingerprint(self):
        return {{"backend": "toy", "model_identity": self._identity.to_dict(), "adapter": None}}
'''

_FORMAT = """
from sommelier_mlflow.toolcalls._modes import OutputFormat, register_output_format

register_output_format(OutputFormat("toy_json", "JSON, registered by a plugin", None))
"""

_METRIC = """
from sommelier_mlflow.metrics import register_metric
from sommelier_mlflow.metrics.builtin import JsonFormatMetric


@register_metric(name="toy_json_format")
class ToyJsonFormat(JsonFormatMetric):
    \"\"\"The built-in JSON-format check under a plugin's name.\"\"\"
"""

# A ratio metric (count columns, three scorers) in the scoring metrics' own group.
_SCORING_METRIC = """
from sommelier_mlflow import CallMatch, ScoringMetric, register_scoring_metric


def key_recall(comparison: CallMatch) -> tuple[int, int]:
    gold = set(comparison.gold.arguments)
    got = set(comparison.call["arguments"]) if comparison.call is not None else set()
    return len(gold & got), len(gold)


register_scoring_metric(
    ScoringMetric("toy_key_recall", "Gold argument names the prediction supplies.", key_recall)
)
"""

# A yes/no metric in the group scoring-metric plugins were told to use before
# they had their own: an entry point naming a function that registers.
_LEGACY_SCORING_METRIC = """
from sommelier_mlflow import CallMatch, ScoringMetric, register_scoring_metric


def weather(comparison: CallMatch) -> tuple[int, int]:
    called = comparison.call is not None and comparison.call["name"] == "get_weather"
    return int(called), 1


def register() -> None:
    register_scoring_metric(
        ScoringMetric("toy_called_weather", "The call names get_weather.", weather, binary=True)
    )
"""

_PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "toy-sommelier-plugin"
version = "0.1"

[tool.setuptools]
packages = ["toy_sommelier_plugin"]

[project.entry-points."sommelier_mlflow.backends"]
toy = "toy_sommelier_plugin.backend"
broken = "toy_sommelier_plugin.broken"

[project.entry-points."sommelier_mlflow.output_formats"]
toy_json = "toy_sommelier_plugin.formats"

[project.entry-points."sommelier_mlflow.metrics"]
toy_json_format = "toy_sommelier_plugin.metrics"
toy_called_weather = "toy_sommelier_plugin.legacy_scoring:register"

[project.entry-points."sommelier_mlflow.scoring_metrics"]
toy_key_recall = "toy_sommelier_plugin.scoring"
broken_metric = "toy_sommelier_plugin.broken"
"""

# By hand, over the fixture's eight outputs (four per language): every gold call has
# the two arguments city and units, and the three outputs that parse as calls
# supply both; two of them call get_weather.
KEY_RECALL = (2 * 3 * 2, 2 * 8)
CALLED_WEATHER = (2 * 2, 8)


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv over this one with the toy plugin pip-installed; its python."""
    root = tmp_path_factory.mktemp("plugin")
    package = root / "src" / "toy_sommelier_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    outputs = {
        example.prompt_text: BASE_OUTPUTS[int(example.example_id.split("-")[1])]
        for example in examples()
    }
    (package / "backend.py").write_text(_BACKEND.format(outputs=outputs))
    (package / "formats.py").write_text(_FORMAT)
    (package / "metrics.py").write_text(_METRIC)
    (package / "scoring.py").write_text(_SCORING_METRIC)
    (package / "legacy_scoring.py").write_text(_LEGACY_SCORING_METRIC)
    (package / "broken.py").write_text("raise ImportError('this plugin is broken on purpose')\n")
    (root / "src" / "pyproject.toml").write_text(_PYPROJECT)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Layer the new venv over this one (its packages, the editable install, pip).
    parent = sysconfig.get_paths()["purelib"]
    Path(site, "_parent_venv.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "-q"),
            *("--no-deps", "--no-build-isolation", "--no-index", str(root / "src")),
        ],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return python


@pytest.fixture(scope="module")
def plugin_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for this module's runs (its schema is built once)."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


def _environment(**env: str) -> dict[str, str]:
    """This process's environment plus ``env``, logging into no run from outside the test."""
    merged = {**os.environ, "PYTHONWARNINGS": "default", **env}
    merged.pop("MLFLOW_RUN_ID", None)
    return merged


def _cli(python: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "sommelier_mlflow.cli", *args],
        capture_output=True,
        text=True,
        env=_environment(**env),
        timeout=120,
    )


def _counts(metrics: dict[str, dict[str, int]], name: str) -> tuple[int, int]:
    return metrics[name]["numerator"], metrics[name]["denominator"]


def _assert_plugin_keys(metrics: dict[str, float]) -> None:
    """The plugin metrics' keys in an arm's MLflow run: value and exact counts."""
    assert metrics["overall/toy_key_recall"] == KEY_RECALL[0] / KEY_RECALL[1]
    assert metrics["overall/counts/toy_key_recall.numerator"] == KEY_RECALL[0]
    assert metrics["overall/counts/toy_key_recall.denominator"] == KEY_RECALL[1]
    assert metrics["fr/counts/toy_called_weather.numerator"] == 2  # one language, half
    assert metrics["overall/toy_called_weather"] == CALLED_WEATHER[0] / CALLED_WEATHER[1]


def test_an_installed_plugin_backend_is_listed_and_a_broken_one_is_a_warning(
    plugin_python: Path,
) -> None:
    listed = _cli(plugin_python, "backends")
    assert listed.returncode == 0, listed.stderr
    assert "toy: A plugin backend answering from a table" in listed.stdout
    assert "suffix (str, default '')" in listed.stdout
    assert "broken" in listed.stderr and "this plugin is broken on purpose" in listed.stderr
    assert "Traceback" not in listed.stderr


def test_evaluate_runs_with_the_plugin_backend_and_output_format(
    plugin_python: Path, tmp_path: Path
) -> None:
    files = write_fixture(tmp_path / "in")
    out = tmp_path / "arm"
    options = ("--backend-option", "suffix= ", "--output-format", "toy_json")
    done = _cli(plugin_python, *evaluate_args(files["split"], out, "toy", *options))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "evaluation_report.json").read_text())
    assert report["identity"]["decoding"]["backend"] == "toy"
    assert report["metrics"]["full_call_exact_match"]["numerator"] == 2
    assert _counts(report["metrics"], "toy_key_recall") == KEY_RECALL


def test_plugin_scoring_metrics_reach_score_and_its_mlflow_run(
    plugin_python: Path, plugin_store: str, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    args = (*score_args(files, "base", tmp_path / "arm", resamples=100), "--mlflow")
    done = _cli(plugin_python, *args, MLFLOW_TRACKING_URI=plugin_store)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "arm" / "evaluation_report.json").read_text())
    assert {"toy_key_recall", "toy_called_weather"} <= set(report["metric_names"])
    assert _counts(report["metrics"], "toy_key_recall") == KEY_RECALL
    assert _counts(report["metrics"], "toy_called_weather") == CALLED_WEATHER
    run = MlflowClient(tracking_uri=plugin_store).get_run(logged_run_id(done.stdout))
    _assert_plugin_keys(run.data.metrics)
    # The broken scoring-metric plugin is named in a warning, and scoring went on.
    assert "scoring metric plugin 'broken_metric'" in done.stderr
    assert "this plugin is broken on purpose" in done.stderr
    assert "Traceback" not in done.stderr


def test_plugin_scoring_metrics_reach_mlflow_run_score(
    plugin_python: Path, plugin_store: str, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    # The entry point's `python` is the plugin venv's, found first on PATH.
    path = f"{plugin_python.parent}{os.pathsep}{os.environ['PATH']}"
    run_id = mlflow_run(
        plugin_store,
        tmp_path,
        "score",
        extra_env={"PATH": path},
        test_split=str(files["split"]),
        generations=str(files["base"]),
        model_kind="base",
        model="tiny/model",
        revision="abc123",
        resamples="100",
    )
    _assert_plugin_keys(MlflowClient(tracking_uri=plugin_store).get_run(run_id).data.metrics)


# Run by the plugin venv's python: importing the package loads no plugin (a plugin
# importing the half-imported package would fail), then the evaluator, which
# loads them, scores the plugin metrics, and the genai scorers list them.
_EVALUATOR_AND_SCORERS = """
import json, sys

import mlflow
import pandas as pd

import sommelier_mlflow.integration.evaluator
import sommelier_mlflow.scorers

lazy = "toy_sommelier_plugin.scoring" not in sys.modules
mlflow.set_tracking_uri(sys.argv[1])
rows = json.loads(sys.argv[2])
data = pd.DataFrame(
    {"output": [row["output"] for row in rows], "gold": [row["gold"] for row in rows]}
)
with mlflow.start_run():
    result = mlflow.models.evaluate(
        data=data,
        predictions="output",
        targets="gold",
        model_type="tool-calling",
        evaluators=["sommelier"],
    )
scorers = {built.name: built for built in sommelier_mlflow.scorers.sommelier_scorers()}
row = {"outputs": rows[1]["output"], "expectations": {"gold_call": rows[1]["gold"]}}
print(json.dumps({
    "lazy": lazy,
    "evaluator": {key: value for key, value in result.metrics.items() if "toy_" in key},
    "scorers": {name: scorers[name](**row) for name in sorted(scorers) if name.startswith("toy_")},
}))
"""


def test_plugin_scoring_metrics_reach_the_evaluator_and_the_genai_scorers(
    plugin_python: Path, plugin_store: str
) -> None:
    rows = [
        {"output": BASE_OUTPUTS[index], "gold": gold(city)} for index, city in enumerate(CITIES)
    ]
    done = subprocess.run(
        [str(plugin_python), "-c", _EVALUATOR_AND_SCORERS, plugin_store, json.dumps(rows)],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["lazy"] is True
    # One language of the fixture: three of the four outputs supply both gold
    # argument names, two call get_weather.
    assert found["evaluator"]["overall/toy_key_recall"] == 6 / 8
    assert found["evaluator"]["overall/counts/toy_key_recall.numerator"] == 6
    assert found["evaluator"]["overall/toy_called_weather"] == 2 / 4
    # Row 1 answers get_weather with both argument names (in the wrong units).
    assert found["scorers"] == {
        "toy_called_weather": True,
        "toy_key_recall": 1.0,
        "toy_key_recall_denominator": 2,
        "toy_key_recall_numerator": 2,
    }


def test_a_plugin_metric_is_in_the_catalog_without_being_imported(plugin_python: Path) -> None:
    probe = (
        "from sommelier_mlflow.metrics import get_measure, list_measures; "
        "print(get_measure('toy_json_format').__name__, 'toy_json_format' in list_measures())"
    )
    done = subprocess.run(
        [str(plugin_python), "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ToyJsonFormat", "True"]
