"""examples/train_lora_with_callback.py, run as a user would, on the demo base and splits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train_lora_with_callback.py"


@pytest.mark.slow
def test_training_logs_loss_and_tool_call_metrics_on_one_step_axis(tmp_path: Path) -> None:
    """The documented command, with fewer steps: the demo's model and splits by default."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_RUN_ID", None)
    args = ["--steps", "2", "--every", "2", "--max-examples", "4"]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "step   0 base" in result.stdout and "step   2 adapter" in result.stdout
    run_id = result.stdout.strip().splitlines()[-1].split()[-1]
    client = MlflowClient(uri)
    tool = client.get_metric_history(run_id, "tooleval/overall/full_call_exact_match")
    loss = client.get_metric_history(run_id, "loss")
    assert sorted(m.step for m in tool) == [0, 2]
    assert {m.step for m in loss} == {1, 2}  # the trainer's loss, in the same run
    # Under the folder .gitignore ignores, as every example's output.
    adapter = tmp_path / "sommelier_out" / "train_lora" / "adapter"
    assert (adapter / "adapter_model.safetensors").is_file()
    mlflow_files = {"mlflow.db", "mlruns", "mlartifacts"}  # the store's, where it puts them
    assert {path.name for path in tmp_path.iterdir()} - mlflow_files == {"sommelier_out"}


def test_the_documented_command_and_caption_are_what_the_picture_shows() -> None:
    """docs/training.md's command is the one docs/screenshots.py ran for its picture."""
    shots = load_script("docs/screenshots.py")
    page = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", page, re.S)
    assert [b for b in blocks if "train_lora_with_callback" in b] == [shots.TRAINING_COMMAND + "\n"]
    flags = dict(zip(shots.TRAINING_ARGS[::2], shots.TRAINING_ARGS[1::2], strict=True))
    steps, every, roots = flags["--steps"], flags["--every"], flags["--max-examples"]
    assert f"{steps} steps, an evaluation every {every}, {roots} roots" in page
    recorded = json.loads((ROOT / "docs" / "screenshots.json").read_text(encoding="utf-8"))
    picture = recorded["ui-training-curve.png"]
    assert picture["command"] == shots.TRAINING_COMMAND
    curves = picture["curves"]
    full = {
        int(step): value for step, value in curves["tooleval/overall/full_call_exact_match"].items()
    }
    names = {int(step): v for step, v in curves["tooleval/overall/function_name_accuracy"].items()}
    assert sorted(full) == list(range(0, int(steps) + 1, int(every)))
    # The page's reading of the picture: the numbers it quotes are the curve's.
    best = max(full.values())
    first_best = min(step for step, value in full.items() if value == best)
    assert f"rises from {full[0]:.3f} to {best:.3f}, reached at\nstep {first_best}" in page
    best_names = max(names.values())
    at = min(step for step, value in names.items() if value == best_names)
    assert f"rises from {names[0]:.3f} (the base) to {best_names:.3f}\nat step {at}" in page


def test_the_adapter_starts_from_the_same_weights_in_every_run(tmp_path: Path) -> None:
    """The LoRA weights are drawn after seeding, so a rerun retraces the same curve."""
    import torch

    from tests.generation.generation_helpers import corpus
    from tests.support.scripts import load_script
    from tests.support.tiny_models import build_tiny_llama, build_tokenizer

    example = load_script("examples/train_lora_with_callback.py")
    base = build_tiny_llama(tmp_path / "base", build_tokenizer(tmp_path / "tok", corpus()))
    first, second = (example.lora_model(base).state_dict() for _ in range(2))
    torch.manual_seed(12345)  # what came before does not matter either
    third = example.lora_model(base).state_dict()
    lora_keys = [key for key in first if "lora_A" in key]
    assert lora_keys  # the adapter's randomly initialised matrices
    for key in lora_keys:
        assert torch.equal(first[key], second[key]) and torch.equal(first[key], third[key])
    other = example.lora_model(base, seed=1).state_dict()
    assert not torch.equal(first[lora_keys[0]], other[lora_keys[0]])  # the seed decides
