"""A wheel of the package works on its own: built, installed in a fresh venv, run elsewhere.

Nothing here may reach the network: the wheel is built without build
isolation (the test venv's setuptools) and installed with ``--no-index``;
the dependencies come from the test venv's site-packages through a ``.pth``
line, which adds that folder to ``sys.path`` without running its own ``.pth``
files (so the editable install of the checkout stays invisible).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import TestExample, write_test_split

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "fixtures" / "reference-golden"


def _run(command: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _golden_inputs(folder: Path) -> tuple[Path, Path]:
    """The golden completions as a formatted split plus ``{example_id, raw_text}`` rows."""
    rows = [
        json.loads(line) for line in (GOLDEN / "raw_generations.jsonl").read_text().splitlines()
    ]
    examples = []
    for row in rows:
        prompt = f"<user>fixture {row['fixture_id']}</user>"
        examples.append(
            TestExample(
                example_id=row["fixture_id"],
                language="en",
                query=f"fixture {row['fixture_id']}",
                tools=[{"name": row["gold_call"]["name"], "parameters": {}}],
                gold_call=row["gold_call"],
                prompt_text=prompt,
                prompt_sha256=sha256_text(prompt),
            )
        )
    split = write_test_split(folder / "golden_split.jsonl", examples)
    precomputed = folder / "golden_outputs.jsonl"
    precomputed.write_text(
        "".join(
            json.dumps({"example_id": row["fixture_id"], "raw_text": row["raw_text"]}) + "\n"
            for row in rows
        )
    )
    return split, precomputed


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_scores_the_golden_fixture(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(MLFLOW_DISABLE_TELEMETRY="true", HF_HUB_OFFLINE="1", PIP_NO_INDEX="1")
    # Build from a copy: an in-tree build would leave build/ and egg-info in the checkout.
    source = tmp_path / "source"
    shutil.copytree(
        REPO / "sommelier_mlflow",
        source / "sommelier_mlflow",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    dist = tmp_path / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            dist,
            ".",
        ],
        source,
        env,
    )
    (wheel,) = dist.glob("sommelier_mlflow-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path, env)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], tmp_path, env)
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env
    ).strip()
    (Path(purelib) / "parent_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    located = _run(
        [python, "-c", "import sommelier_mlflow; print(sommelier_mlflow.__file__)"], elsewhere, env
    )
    assert Path(located.strip()).is_relative_to(venv), located
    usage = _run([venv / "bin" / "sommelier-mlflow", "--help"], elsewhere, env)
    assert "score" in usage and "main" in usage

    split, precomputed = _golden_inputs(tmp_path)
    out = elsewhere / "golden"
    _run(
        [
            venv / "bin" / "sommelier-mlflow",
            "score",
            "--test-split",
            split,
            "--precomputed",
            precomputed,
            "--model",
            "golden/model",
            "--revision",
            "fixture",
            "--max-new-tokens",
            "64",
            "--batch-size",
            "1",
            "--model-kind",
            "base",
            "--resamples",
            "50",
            "--out",
            out,
        ],
        elsewhere,
        env,
    )
    report = json.loads((out / "evaluation_report.json").read_text())
    expected = json.loads((GOLDEN / "golden_metrics.json").read_text())
    assert report["metrics"] == expected
