"""Every backend and engine a command opens is closed exactly once, also on error.

Nothing outside this file knows the ``counted`` backend: it opens its engine
through ``shared_engine`` keyed by the model it declares, and counts what it
opens and closes. ``main`` runs both arms on one engine and closes it once;
``evaluate``, a failure half-way through generating, and two ``main`` runs in
one process leave no backend or engine open (issue 31 item 2b; issue 34's
"an engine is always closed, also on error").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import DependencyError
from sommelier_mlflow.generation import (
    BackendOptions,
    BackendRequest,
    open_engines,
    register_backend,
    shared_engine,
)
from tests.cli.cli_helpers import ADAPTER_OUTPUTS, BASE_OUTPUTS, evaluate_args, examples


class _Engine:
    """What the backend loads once per model: here, only a count of its closes."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.closes = 0
        ENGINES.append(self)

    def close(self) -> None:
        self.closes += 1


ENGINES: list[_Engine] = []
BACKENDS: list[CountedBackend] = []


class CountedOptions(BackendOptions):
    """What the counted backend can be told."""

    fail_at: int = Field(0, ge=0, description="the generate call that fails (0: none)")


@register_backend("counted", options=CountedOptions)
class CountedBackend:
    """Answers fixture prompts on an engine shared per declared model (a test backend)."""

    tokenizer = None

    def __init__(self, request: BackendRequest, options: CountedOptions) -> None:
        self._lease = shared_engine(("counted", request.model), lambda: _Engine(request.model))
        self._identity = request.declared_identity()
        self._adapter = request.declared_adapter()
        outputs = ADAPTER_OUTPUTS if request.adapter else BASE_OUTPUTS
        self._outputs = {
            example.prompt_text: outputs[int(example.example_id.split("-")[1])]
            for example in examples()
        }
        self._fail_at = options.fail_at
        self.calls = 0
        self.closes = 0
        BACKENDS.append(self)

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> dict[str, str] | None:
        return self._adapter

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        assert self._lease.engine.closes == 0  # raises too once this backend was closed
        self.calls += 1
        if self.calls == self._fail_at:
            raise DependencyError("the engine lost its device half-way (a test failure)")
        return [self._outputs[prompt] for prompt in prompts]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": "counted",
            "model_identity": self._identity.to_dict(),
            "adapter": self._adapter,
        }

    def close(self) -> None:
        self.closes += 1
        self._lease.close()


@pytest.fixture(autouse=True)
def _counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh counts per test, and no MLflow run to log into."""
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    ENGINES.clear()
    BACKENDS.clear()
    yield
    ENGINES.clear()
    BACKENDS.clear()


def _main_args(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        *("main", "--test-split", str(files["split"]), "--model", "tiny/model"),
        *("--revision", "abc123", "--adapter", str(files["adapter_dir"]), "--backend", "counted"),
        *("--batch-size", "2", "--resamples", "100", "--log-traces", "false"),
        *("--out", str(out), *extra),
    ]


def _all_closed_once() -> None:
    assert BACKENDS and all(backend.closes == 1 for backend in BACKENDS)
    assert ENGINES and all(engine.closes == 1 for engine in ENGINES)
    assert ("counted", "tiny/model") not in open_engines()


@pytest.mark.parametrize("arms", [(), ("--parallel-arms", "false"), ("--parallel-arms", "true")])
def test_main_runs_both_arms_on_one_engine_and_closes_everything_once(
    files: dict[str, Path], tmp_path: Path, arms: tuple[str, ...]
) -> None:
    """Sequential (the default for this backend, and asked for), and side by side.

    Side by side, a worker process generates the base arm (unpickling the
    options imports this module there, which registers the backend) while this
    process generates the adapter arm; the base arm is then only scored here,
    on the engine the adapter arm opened. Only this process's backends and
    engines are counted.
    """
    assert main(_main_args(files, tmp_path / "out", *arms)) == 0
    assert len(ENGINES) == 1  # two arms, one key: one engine
    base, adapter = sorted(BACKENDS, key=lambda backend: backend.adapter_info() is not None)
    assert adapter.calls > 0
    assert (base.calls > 0) is (arms != ("--parallel-arms", "true"))
    _all_closed_once()
    report = (tmp_path / "out" / "comparison" / "comparison_report.json").read_text()
    assert '"adapter"' in report


def test_evaluate_closes_its_backend_and_engine(files: dict[str, Path], tmp_path: Path) -> None:
    assert main(evaluate_args(files["split"], tmp_path / "arm", "counted")) == 0
    assert len(ENGINES) == len(BACKENDS) == 1
    _all_closed_once()


@pytest.mark.parametrize("command", ["evaluate", "main"])
def test_an_error_half_way_through_generating_still_closes_everything(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    fail = ("--backend-option", "fail_at=2")  # the second batch of the (first) arm
    argv = (
        evaluate_args(files["split"], tmp_path / "arm", "counted", *fail)
        if command == "evaluate"
        else _main_args(files, tmp_path / "out", *fail)
    )
    assert main(argv) == 3
    assert "lost its device half-way" in capsys.readouterr().err
    assert len(ENGINES) == len(BACKENDS) == 1  # main stopped in its first arm
    assert BACKENDS[0].calls == 2
    _all_closed_once()


def test_two_main_runs_in_one_process_do_not_leak_an_engine(
    files: dict[str, Path], tmp_path: Path
) -> None:
    assert main(_main_args(files, tmp_path / "first")) == 0
    assert main(_main_args(files, tmp_path / "second")) == 0
    assert len(ENGINES) == 2  # the second run opened its own: the first one's was closed
    assert len(BACKENDS) == 4
    _all_closed_once()
    first, second = (
        tmp_path / run / "comparison" / "comparison_report.json" for run in ("first", "second")
    )
    assert first.read_bytes() == second.read_bytes()
