"""A new backend is one module: register it with its options model, and the CLI has it.

Nothing outside this file knows the ``toy_echo`` backend, yet ``evaluate``
runs with it, ``--backend-option`` reaches it typed, ``--help`` and
``sommelier-mlflow backends`` describe its options, and a bad option is one
``error:`` line with exit 2 (issue 24 item 1).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from sommelier_mlflow.cli import build_parser, main
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.generation import BackendOptions, BackendRequest, register_backend
from tests.cli.cli_helpers import BASE_OUTPUTS, evaluate_args, examples, write_fixture


class ToyOptions(BackendOptions):
    """What the toy backend can be told."""

    suffix: str = Field("", description="text appended to every answer")
    repeat: int = Field(1, ge=1, description="times each answer is written")


@register_backend("toy_echo", options=ToyOptions)
class ToyBackend:
    """Answers each fixture prompt with its hand-written output (a toy for tests)."""

    tokenizer = None

    def __init__(self, request: BackendRequest, options: ToyOptions) -> None:
        self._identity = request.declared_identity()
        self._options = options
        self._outputs = {
            example.prompt_text: BASE_OUTPUTS[int(example.example_id.split("-")[1])]
            for example in examples()
        }

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> None:
        return None

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return [
            self._outputs[prompt] * self._options.repeat + self._options.suffix
            for prompt in prompts
        ]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": "toy_echo",
            "options": self._options.model_dump(),
            "model_identity": self._identity.to_dict(),
            "adapter": None,
        }


def _evaluate(tmp_path: Path, *options: str) -> int:
    files = write_fixture(tmp_path / "in")
    return main(evaluate_args(files["split"], tmp_path / "arm", "toy_echo", *options))


def test_a_registered_backend_runs_evaluate_with_its_typed_options(tmp_path: Path) -> None:
    assert _evaluate(tmp_path, "--backend-option", "suffix= (toy),repeat=1") == 0
    report = json.loads((tmp_path / "arm" / "evaluation_report.json").read_text())
    assert report["identity"]["decoding"]["backend"] == "toy_echo"
    manifest = json.loads((tmp_path / "arm" / "generation_manifest.json").read_text())
    assert manifest["generator"]["options"] == {"suffix": "(toy)", "repeat": 1}
    texts = [
        json.loads(line)["raw_text"]
        for path in sorted((tmp_path / "arm" / "generations").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert texts and all(text.endswith("(toy)") for text in texts)


@pytest.mark.parametrize(
    ("option", "complaint"),
    [
        ("repeat=0", "option repeat: Input should be greater than or equal to 1"),
        ("repeat=two", "option repeat: Input should be a valid integer"),
        ("colour=red", "it does not take the option 'colour'"),
        ("suffix", "--backend-options takes KEY=VALUE"),
    ],
)
def test_a_bad_option_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, complaint: str
) -> None:
    assert _evaluate(tmp_path, "--backend-option", option) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and complaint in err
    assert not (tmp_path / "arm" / "generations").exists()  # refused before generating


def test_help_and_the_backends_command_describe_the_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]  # type: ignore[union-attr]
    help_text = " ".join(evaluate.format_help().split())
    assert "toy_echo: suffix (str, default ''), repeat (int, default 1)" in help_text
    assert "server: base_url (str, required)" in help_text
    assert main(["backends"]) == 0
    listed = capsys.readouterr().out
    assert "toy_echo: Answers each fixture prompt" in listed
    assert "  repeat (int, default 1): times each answer is written" in listed
    assert "  request_timeout (float, default 300.0): seconds one request may take in all" in listed
    assert "hf: Transformers in this process" in listed and "replay" not in listed


def test_the_arm_run_holds_the_generation_timing_beside_the_manifest(
    tmp_path: Path, tracking_uri: str
) -> None:
    from mlflow import MlflowClient

    assert _evaluate(tmp_path, "--mlflow") == 0
    client = MlflowClient(tracking_uri=tracking_uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "sommelier")}
    assert {"sommelier/generation_manifest.json", "sommelier/generation_timing.jsonl"} <= artifacts
    logged = client.download_artifacts(
        run.info.run_id, "sommelier/generation_timing.jsonl", str(tmp_path / "dl")
    )
    assert Path(logged).read_bytes() == (tmp_path / "arm" / "generation_timing.jsonl").read_bytes()
