"""``main --parallel-arms``: both arms generate at once, byte-identical to one after the other."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.cli._main_command import SIDE_BY_SIDE_MAX_BYTES, _side_by_side
from sommelier_mlflow.cli._options import GenerationPlan
from sommelier_mlflow.generation import TIMING_NAME
from tests.cli.cli_helpers import examples, tiny_arms
from tests.generation.generation_helpers import count_model_loads
from tests.support.mlflow_run import PROJECT

ARMS = ("base", "adapter")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_arms(tmp_path_factory.mktemp("parallel"))


def _assert_same_outputs(out: Path, reference: Path) -> None:
    """Each arm's generations, manifest, formatted split and report are the same bytes.

    (Throughput figures are timings, never the same twice.)
    """
    for arm in ARMS:
        names = ["evaluation_report.json", "generation_manifest.json"]
        names += [
            str(p.relative_to(out / arm))
            for p in (out / arm).rglob("*.jsonl")
            if p.name != TIMING_NAME  # seconds per batch: a clock reading, never the same
        ]
        assert any(name.startswith("generations/") for name in names)
        for name in names:
            assert (out / arm / name).read_bytes() == (reference / arm / name).read_bytes(), name


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
    model_loads = count_model_loads(monkeypatch)
    together, in_turn = tmp_path / "together", tmp_path / "in_turn"
    logged = ("--mlflow", "--num-threads")
    assert main(_main(tiny, together, "--parallel-arms", "true", *logged, "2")) == 0
    assert sorted(loads) == ["adapter", "base"]  # the worker's base load is its own
    assert model_loads == ["model"]  # scoring the base arm here reused the adapter arm's model
    assert main(_main(tiny, in_turn, "--parallel-arms", "false", *logged, "1")) == 0
    assert loads[2:] == ["base", "adapter"]
    assert model_loads == ["model", "model"]  # one base model for both arms, one after the other
    _assert_same_outputs(together, in_turn)
    for arm in ARMS:
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


def test_main_loads_the_base_model_once_and_generates_what_each_arm_alone_does(
    tiny: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both arms of ``main`` run on one copy of the base model (before: one load per arm).

    The reference is each arm alone, ``evaluate`` loading a model of its own and
    closing it: the generations, manifests and reports are the same bytes, so
    the adapter loaded into the shared model never reached the base arm.
    """
    from sommelier_mlflow.generation import open_engines

    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    model_loads = count_model_loads(monkeypatch)
    already_open = set(open_engines())  # other tests' generators in this process
    shared = tmp_path / "shared"
    assert main(_main(tiny, shared, "--parallel-arms", "false", "--num-threads", "1")) == 0
    assert model_loads == ["model"]
    assert set(open_engines()) == already_open  # and closed once main was done
    alone = tmp_path / "alone"
    for arm in ARMS:
        argv = _main(tiny, alone / arm, "--num-threads", "1")
        argv[0] = "evaluate"
        argv[argv.index("--log-traces") : argv.index("--log-traces") + 2] = []
        if arm == "base":
            argv[argv.index("--adapter") : argv.index("--adapter") + 2] = []
        assert main([*argv, "--model-kind", arm]) == 0
    assert model_loads == ["model", "model", "model"]
    _assert_same_outputs(shared, alone)


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


def _lines(arm: Path) -> int:
    """Complete generation records an arm's files hold so far."""
    return sum(path.read_bytes().count(b"\n") for path in (arm / "generations").glob("*.jsonl"))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads processes from /proc")
def test_the_base_worker_dies_with_a_killed_main_and_a_rerun_ends_byte_identical(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    """``kill -9`` of ``main --parallel-arms true`` while its worker generates the base arm.

    The worker (and any other child of ``main``) ends within seconds instead of
    generating the rest of the arm as an orphan; the base arm's files stop
    growing there; a rerun resumes both arms and ends with the same bytes as a
    run that was never interrupted, leaving no worker behind.
    """
    import multiprocessing

    from sommelier_mlflow.data import write_test_split

    rows = {row.example_id: row for row in examples()}
    roots = 40  # the arm takes seconds, not milliseconds: it is caught half-way
    big = [replace(rows[f"en-{i % 4}"], example_id=f"en-{i}") for i in range(roots)]
    big += [
        replace(rows[f"fr-{i % 4}"], example_id=f"fr-{i}", source_example_id=f"en-{i}")
        for i in range(roots)
    ]
    split = write_test_split(
        tmp_path / "big.jsonl", [replace(row, prompt_text=None, prompt_sha256=None) for row in big]
    )
    fixture = {**tiny, "split": Path(split)}
    killed = tmp_path / "killed"
    argv = _main(fixture, killed, "--parallel-arms", "true", "--num-threads", "2")
    program = Path(sys.executable).with_name("sommelier-mlflow")
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "HF_HUB_OFFLINE": "1"}
    log = tmp_path / "main.log"
    with log.open("wb") as output:
        process = subprocess.Popen([program, *argv], env=env, stdout=output, stderr=output)
        try:
            deadline = time.monotonic() + 180
            while _lines(killed / "base") == 0:  # the worker has not generated yet
                assert process.poll() is None, log.read_text("utf-8")
                assert time.monotonic() < deadline, "the base worker generated nothing in time"
                time.sleep(0.01)
            children = _children(process.pid)
            at_kill = _lines(killed / "base")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert children, "main had no worker process"
    stop = time.monotonic() + 10
    while any(_running(child) for child in children) and time.monotonic() < stop:
        time.sleep(0.05)
    assert not [child for child in children if _running(child)], "orphaned worker"
    # The worker stopped where main died, far from the end of its arm: an orphan would
    # have finished the arm's 80 rows in the seconds waited above. (How many batches of 3
    # still land between the kill and the worker's exit depends on the machine's load:
    # CI saw three, so it is not pinned.)
    left = _lines(killed / "base")
    assert at_kill <= left < 2 * roots, (at_kill, left)

    assert main(argv) == 0  # the rerun resumes both arms
    assert not multiprocessing.active_children()
    reference = tmp_path / "reference"
    assert main(_main(fixture, reference, "--parallel-arms", "false", "--num-threads", "1")) == 0
    _assert_same_outputs(killed, reference)
    comparison = Path("comparison") / "comparison_report.json"
    assert (killed / comparison).read_bytes() == (reference / comparison).read_bytes()
