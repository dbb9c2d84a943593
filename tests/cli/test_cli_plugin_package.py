"""An installed package's backend and output format reach the CLI by entry point alone.

A tiny plugin distribution is built in a temp dir and pip-installed into a
fresh venv layered over this one; nothing imports it by hand, yet
``sommelier-mlflow backends`` lists its backend, ``evaluate --backend toy``
runs with it, and its output format is accepted. A plugin that fails to
import is a warning naming it, never a crash (issue 24 item 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.cli.cli_helpers import BASE_OUTPUTS, evaluate_args, examples, write_fixture

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
"""


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


def _cli(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "sommelier_mlflow.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "default"},
        timeout=120,
    )


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


def test_a_plugin_metric_is_in_the_catalog_without_being_imported(plugin_python: Path) -> None:
    probe = (
        "from sommelier_mlflow.metrics import get_metric, list_metrics; "
        "print(get_metric('toy_json_format').__name__, 'toy_json_format' in list_metrics())"
    )
    done = subprocess.run(
        [str(plugin_python), "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ToyJsonFormat", "True"]
