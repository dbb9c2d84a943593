"""`evaluate --backend server` through the CLI, against a scripted server on loopback.

The real-vLLM end to end is in ``test_served_main.py``; this one runs in the
fast suite and covers the exit codes and what is recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import (
    assert_never_logged,
    assert_not_in_files,
    compare_args,
    examples,
    tiny_arms,
)
from tests.support.net import free_port
from tests.support.openai_stub import echo_responder, finishes_within, running_stub

KEY = "sk-cli-planted-0a1b2c3d4e5f"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_arms(tmp_path_factory.mktemp("tiny-cli"), gold_in_vocabulary=False)


def _models(root: Path) -> list[dict[str, Any]]:
    return [
        {"id": "tiny", "object": "model", "root": str(root), "parent": None},
        {"id": "tiny-lora", "object": "model", "root": "/lora", "parent": "tiny"},
    ]


def _evaluate_hf(tiny: dict[str, Path], out: Path, *extra: str) -> list[str]:
    """``evaluate`` of the tiny model on the default (hf) backend: 8 new tokens, batches of 4.

    The server arms below add their backend to it, so both kinds decode alike.
    """
    return [
        *("evaluate", "--test-split", str(tiny["split"]), "--model", str(tiny["model"])),
        *("--max-new-tokens", "8", "--batch-size", "4", "--resamples", "50"),
        *("--out", str(out), *extra),
    ]


def _evaluate(tiny: dict[str, Path], url: str, out: Path, *extra: str) -> list[str]:
    """``evaluate`` of the tiny model served as ``tiny`` at ``url``."""
    served = ("--backend", "server", "--base-url", url, "--served-model", "tiny")
    return _evaluate_hf(tiny, out, *served, *extra)


def test_server_arm_records_usage_throughput_and_never_the_key(
    tiny: dict[str, Path],
    tmp_path: Path,
    tracking_uri: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("TEAM_KEY", KEY)
    out = tmp_path / "adapter"
    with running_stub(_models(tiny["model"]), echo_responder) as stub:
        code = main(
            [
                *_evaluate(tiny, stub.url, out, "--api-key-env", "TEAM_KEY"),
                "--model-kind",
                "adapter",
                "--served-adapter",
                "tiny-lora",
                "--adapter",
                str(tiny["adapter"]),
                "--mlflow",
            ]
        )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert {request["model"] for request in stub.requests} == {"tiny-lora"}
    usage = [json.loads(line) for line in (out / "generation_usage.jsonl").read_text().splitlines()]
    assert [row["example_id"] for row in usage] == [ex.example_id for ex in examples()]
    assert all(row["finish_reason"] == "stop" for row in usage)
    report = json.loads((out / "evaluation_report.json").read_text())
    assert report["identity"]["decoding"]["backend"] == "server"
    assert report["identity"]["adapter"]["source"] == str(tiny["adapter"].resolve())

    client = MlflowClient(tracking_uri=tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("sommelier").experiment_id])
    assert run.data.params["server.served_adapter"] == "tiny-lora"
    assert run.data.params["server.served_model_root"] == str(tiny["model"])
    assert run.data.params["server.key_from_env"] == "TEAM_KEY"
    assert run.data.metrics["generation/prompts"] == len(examples())
    assert run.data.metrics["generation/tokens_per_s"] > 0
    assert (
        run.data.metrics["generation/latency_p95_s"] >= run.data.metrics["generation/latency_p50_s"]
    )
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "sommelier")}
    assert "sommelier/generation_usage.jsonl" in artifacts
    assert_never_logged(client, [run], KEY, tmp_path / "dl")
    assert_not_in_files(out, KEY)
    assert KEY not in printed.out + printed.err


def test_unreachable_server_is_exit_3_naming_the_url(
    tiny: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    port = free_port()
    url = f"http://me:secret-pw@127.0.0.1:{port}/v1"
    code = main([*_evaluate(tiny, url, tmp_path / "out"), "--model-kind", "base"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"127.0.0.1:{port}" in err and "Traceback" not in err
    assert "secret-pw" not in err and KEY not in err
    assert not (tmp_path / "out" / "generations").exists()  # nothing before the check


def test_server_options_are_refused_with_another_backend(
    tiny: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _evaluate_hf(tiny, tmp_path / "out", "--model-kind", "base")
    code = main([*args, "--base-url", "http://127.0.0.1:1/v1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "the hf backend refused its options: it does not take the option 'base_url'" in err


def test_an_hf_arm_and_a_server_arm_are_not_compared(
    tiny: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hf_args = _evaluate_hf(tiny, tmp_path / "hf", "--model-kind", "base", "--num-threads", "1")
    assert main(hf_args) == 0
    with running_stub(_models(tiny["model"])) as stub:
        served = [
            *_evaluate(tiny, stub.url, tmp_path / "served"),
            "--model-kind",
            "adapter",
            "--served-adapter",
            "tiny-lora",
        ]
        assert main(served) == 0
    capsys.readouterr()
    code = main(compare_args(tmp_path / "hf", tmp_path / "served", tmp_path / "cmp"))
    assert code == 4
    assert "decoding.backend" in capsys.readouterr().err


@pytest.mark.usefixtures("tracking_uri")
def test_a_key_the_server_echoes_never_leaves_the_process_whatever_its_variable_is_called(
    tiny: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Issue 23 item 6: no secret-looking name, no secret-looking shape; the
    # server puts the key in /version and in every completion.
    key = "planted-team-key-7f3a9c5e1d"
    monkeypatch.setenv("VLLM_KEY", key)
    monkeypatch.chdir(tmp_path)  # the store's artifacts land under tmp_path too

    def echo_key(body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
        status, answer = echo_responder(body)
        assert isinstance(answer, dict)
        for choice in answer["choices"]:
            choice["text"] = f'{{"name": "{key}"}}'
        return status, answer

    out = tmp_path / "out"
    with running_stub(_models(tiny["model"]), echo_key) as stub:
        stub.version = f"0.9.1+{key}"
        args = [*_evaluate(tiny, stub.url, out, "--api-key-env", "VLLM_KEY"), "--mlflow"]
        code = main([*args, "--model-kind", "base", "--log-traces", "true"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert stub.headers and all(
        {k.lower(): v for k, v in h.items()}.get("authorization") == f"Bearer {key}"
        for p, h in stub.headers
        if p.startswith("/v1/")
    )
    generations = b"".join(p.read_bytes() for p in (out / "generations").glob("*.jsonl"))
    assert b"**********" in generations  # the echoed key was there, and was replaced
    checked = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "mlflow.db" for p in checked)
    assert any(p.name == "generation_manifest.json" for p in checked)
    assert_not_in_files(tmp_path, key)
    assert key not in printed.out + printed.err


@pytest.mark.parametrize("body", [b"", b"<html>upstream gone</html>"])
def test_a_200_answer_that_is_not_json_is_one_error_line_and_exit_3(
    tiny: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes
) -> None:
    # Issue 23 item 5 (the server part): was a JSONDecodeError traceback.
    out = tmp_path / "out"
    with running_stub(_models(tiny["model"]), lambda request: (200, body)) as stub:
        args = _evaluate(tiny, stub.url, out, "--backend-option", "max_retries=0")
        code = main([*args, "--model-kind", "base"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "HTTP 200 with" in err and stub.url in err
    assert not (out / "evaluation_report.json").exists()
    assert all(path.stat().st_size == 0 for path in (out / "generations").glob("*.jsonl"))


def test_request_timeout_bounds_a_trickling_server_through_the_cli(
    tiny: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 23 item 4, as a user meets it: --request-timeout is a total deadline.
    with running_stub(_models(tiny["model"])) as stub:
        stub.trickle, stub.trickle_s = frozenset({"/v1/completions"}), 0.5
        args = _evaluate(tiny, stub.url, tmp_path / "out", "--request-timeout", "1.5")
        started = time.monotonic()
        argv = [*args, "--backend-option", "max_retries=0", "--model-kind", "base"]
        code = finishes_within(30, lambda: main(argv))
        elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 3 and "timed out: no complete answer within 1.5 s" in err, err
    assert elapsed < 1.5 + 5.0  # one request's deadline plus loading the tokenizer and split
