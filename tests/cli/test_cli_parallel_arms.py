"""``main --parallel-arms``: both arms generate at once, byte-identical to one after the other."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.cli._main_command import SIDE_BY_SIDE_MAX_BYTES, _side_by_side
from sommelier_mlflow.cli._options import GenerationPlan
from sommelier_mlflow.generation import TIMING_NAME
from tests.cli.cli_helpers import examples, tiny_arms

ARMS = ("base", "adapter")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_arms(tmp_path_factory.mktemp("parallel"))


def _main(tiny: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        *("main", "--test-split", str(tiny["split"]), "--model", str(tiny["model"])),
        *("--adapter", str(tiny["adapter"]), "--max-new-tokens", "12", "--batch-size", "3"),
        *("--resamples", "200", "--log-traces", "false", "--out", str(out), *extra),
    ]


def test_arms_generated_side_by_side_are_byte_identical_and_logged_alike(
    tiny: dict[str, Path], tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads shared out (one per arm) against one thread for each arm in turn.

    The generations, their manifests and the reports are the same bytes; under
    MLflow both child runs finish with their throughput and the thread count
    each arm really ran with. This process loads each arm's model once either
    way: the adapter arm it generated is scored without loading it again.
    """
    from mlflow.tracking import MlflowClient

    import sommelier_mlflow.generation as generation

    loads: list[str] = []
    create = generation.create_backend

    def counted(name: str, request: generation.BackendRequest) -> generation.GenerationBackend:
        loads.append("adapter" if request.adapter else "base")
        return create(name, request)

    monkeypatch.setattr(generation, "create_backend", counted)
    together, in_turn = tmp_path / "together", tmp_path / "in_turn"
    logged = ("--mlflow", "--num-threads")
    assert main(_main(tiny, together, "--parallel-arms", "true", *logged, "2")) == 0
    assert sorted(loads) == ["adapter", "base"]  # the worker's base load is its own
    assert main(_main(tiny, in_turn, "--parallel-arms", "false", *logged, "1")) == 0
    assert loads[2:] == ["base", "adapter"]
    for arm in ARMS:
        names = ["evaluation_report.json", "generation_manifest.json"]
        names += [
            str(p.relative_to(together / arm))
            for p in (together / arm).rglob("*.jsonl")
            if p.name != TIMING_NAME  # seconds per batch: a clock reading, never the same
        ]
        assert any(name.startswith("generations/") for name in names)
        for name in names:
            assert (together / arm / name).read_bytes() == (in_turn / arm / name).read_bytes(), name
        manifest = json.loads((together / arm / "generation_manifest.json").read_text())
        assert '"cpu_threads": "1"' in json.dumps(manifest)
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    children = [r for r in client.search_runs(experiments) if r.info.run_name in ARMS]
    assert len(children) == 4
    for run in children:
        assert run.info.status == "FINISHED"
        assert run.data.params["num_threads.resolved"] == "1"
        assert run.data.metrics["generation/prompts"] == len(examples())


@pytest.mark.parametrize("broken", ["model", "adapter"])
def test_a_failing_arm_is_reported_once_with_its_exit_code(
    tiny: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    """A broken base fails in the worker (quietly) and again here; a broken adapter fails here.

    Either way the error is reported once, with its exit code, and no worker is left running.
    """
    import multiprocessing

    folder = tmp_path / f"broken_{broken}"
    shutil.copytree(tiny[broken], folder)
    weights = "model.safetensors" if broken == "model" else "adapter_model.safetensors"
    (folder / weights).write_bytes(b"not weights")
    argv = _main(tiny, tmp_path / "out", "--parallel-arms", "true", "--num-threads", "2")
    argv[argv.index(str(tiny[broken]))] = str(folder)
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("error:") == 1, err
    assert "Traceback" not in err
    assert not multiprocessing.active_children()


def _plan(threads: int | None, backend: str = "hf") -> GenerationPlan:
    args = argparse.Namespace(
        max_new_tokens=8,
        batch_size=2,
        backend=backend,
        num_threads=threads or 0,
        max_examples=0,
        prompt_format="sommelier",
        system_prompt="",
        backend_option=[],
    )
    return GenerationPlan.from_args(args, "base")


def test_auto_is_on_for_a_small_local_model_on_several_threads(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    model = str(tiny["model"])
    assert _side_by_side("auto", _plan(2), model)
    assert not _side_by_side("auto", _plan(1), model)  # nothing to share out
    assert not _side_by_side("auto", _plan(2), "org/hub-model")  # size unknown
    big = tmp_path / "big"
    big.mkdir()
    with (big / "model.safetensors").open("wb") as handle:
        handle.truncate(SIDE_BY_SIDE_MAX_BYTES)  # sparse: no disk used
    assert not _side_by_side("auto", _plan(2), str(big))  # two copies would not fit lightly
    assert _side_by_side("true", _plan(1), "org/hub-model")
    assert not _side_by_side("false", _plan(2), model)


def test_sharing_cores_halves_the_threads_and_keeps_at_least_one() -> None:
    assert _plan(4).sharing_cores().num_threads == 2
    assert _plan(3).sharing_cores().num_threads == 1
    assert _plan(1).sharing_cores().num_threads == 1
