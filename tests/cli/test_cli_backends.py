"""``--backend``: a backend registered by name generates an arm end to end through the CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.generation import BackendRequest, NoOptions, register_backend
from tests.cli.cli_helpers import BASE_OUTPUTS, evaluate_args, examples


class FixtureBackend:
    """Answers each fixture prompt with the base arm's hand-written output."""

    def __init__(self, request: BackendRequest, options: NoOptions) -> None:
        self._identity = request.declared_identity()
        self._outputs = {
            example.prompt_text: BASE_OUTPUTS[int(example.example_id.split("-")[1])]
            for example in examples()
        }

    tokenizer = None

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> None:
        return None

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return [self._outputs[prompt] for prompt in prompts]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": "cli_fixture",
            "model_identity": self._identity.to_dict(),
            "adapter": None,
        }


register_backend("cli_fixture")(FixtureBackend)


def _evaluate(files: dict[str, Path], out: Path, backend: str) -> int:
    return main(evaluate_args(files["split"], out, backend, "--num-threads", "1"))


def test_a_named_backend_generates_an_arm_and_is_recorded_in_its_decoding(
    files: dict[str, Path], tmp_path: Path
) -> None:
    assert _evaluate(files, tmp_path / "arm", "cli_fixture") == 0
    report = json.loads((tmp_path / "arm" / "evaluation_report.json").read_text())
    assert report["identity"]["decoding"]["backend"] == "cli_fixture"
    assert report["identity"]["model_identity"]["base_model"] == "tiny/model"
    # Re-scoring the generations needs no model: the manifest gives the identity back.
    rescored = tmp_path / "rescored"
    code = main(
        [
            "score",
            "--test-split",
            str(files["split"]),
            "--generations",
            str(tmp_path / "arm" / "generations"),
            "--model-kind",
            "base",
            "--resamples",
            "200",
            "--out",
            str(rescored),
        ]
    )
    assert code == 0
    again = json.loads((rescored / "evaluation_report.json").read_text())
    assert again["identity"] == report["identity"]
    assert again["metrics"] == report["metrics"]
    assert report["metrics"]["full_call_exact_match"]["numerator"] == 2


@pytest.mark.parametrize("name", ["nope", "replay"])
def test_an_unregistered_or_internal_backend_is_refused_by_the_parser(
    files: dict[str, Path], tmp_path: Path, name: str
) -> None:
    # replay is registered, but only `score --precomputed` builds it.
    with pytest.raises(SystemExit) as exit_info:
        _evaluate(files, tmp_path / "arm", name)
    assert exit_info.value.code == 2


def test_a_resumed_arm_logs_the_throughput_and_the_resolved_threads(
    files: dict[str, Path], tmp_path: Path, tracking_uri: str
) -> None:
    """Issue 23 #3: an arm whose generations were all on disk logged no `generation/*`.

    `mlflow run` always resumes from the project's `sommelier_out/`, so a second
    run (e.g. the retry after a failure) lost the throughput metrics; and the
    resolved thread count was logged over the `num_threads` that `mlflow run` logs.
    """
    from mlflow.tracking import MlflowClient

    out = tmp_path / "arm"
    runs = []
    for _ in range(2):
        argv = ["evaluate", "--test-split", str(files["split"]), "--model", "tiny/model"]
        argv += ["--revision", "abc123", "--model-kind", "base", "--max-new-tokens", "32"]
        argv += ["--batch-size", "2", "--backend", "cli_fixture", "--num-threads", "1"]
        argv += ["--resamples", "50", "--log-traces", "false", "--out", str(out), "--mlflow"]
        assert main(argv) == 0
        client = MlflowClient(tracking_uri=tracking_uri)
        found = client.search_runs([e.experiment_id for e in client.search_experiments()])
        (new,) = {run.info.run_id for run in found} - set(runs)
        runs.append(new)
    first, second = (client.get_run(run_id).data for run_id in runs)
    throughput = {key for key in first.metrics if key.startswith("generation/")}
    assert {"generation/prompts_per_s", "generation/prompts"} <= throughput
    assert {key: second.metrics[key] for key in throughput if key in second.metrics} == {
        key: first.metrics[key] for key in throughput
    }
    for data in (first, second):
        assert data.params["num_threads.resolved"] == "1"
        assert "num_threads" not in data.params  # the name `mlflow run` logs the asked value under


@pytest.mark.parametrize(("exported", "expected"), [("3", 3), (" 1 ", 1), (None, None)])
def test_the_auto_thread_count_is_omp_num_threads_where_it_is_set(
    monkeypatch: pytest.MonkeyPatch, exported: str | None, expected: int | None
) -> None:
    """`--num-threads 0` takes the share a scheduler gave through OMP_NUM_THREADS, as torch does.

    Overriding it with every core oversubscribes exactly the machines that set it
    (several jobs side by side), where a small model then decodes several times slower.
    """
    from sommelier_mlflow.cli._options import resolve_num_threads
    from sommelier_mlflow.generation import physical_cores

    if exported is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", exported)
    assert resolve_num_threads(0) == (physical_cores() if expected is None else expected)
    assert resolve_num_threads(5) == 5  # an explicit count wins


@pytest.mark.parametrize("exported", ["0", "two", "-1", "1.5"])
def test_an_unusable_omp_num_threads_is_exit_2_when_the_count_is_auto(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exported: str,
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", exported)
    argv = evaluate_args(files["split"], tmp_path / "arm", "cli_fixture", "--num-threads", "0")
    assert main(argv) == 2
    assert "OMP_NUM_THREADS" in capsys.readouterr().err
    ok = evaluate_args(files["split"], tmp_path / "ok", "cli_fixture", "--num-threads", "2")
    assert main(ok) == 0
