"""examples/demo/run.py: the one place that knows what ``demo`` means."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.errors import ConfigError
from tests.examples.examples_helpers import run_from_checkout
from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "demo" / "run.py"


def _script() -> ModuleType:
    return load_script("examples/demo/run.py")


class Builds:
    """Counts builds and returns a demo laid out in a temporary folder."""

    def __init__(self, root: Path) -> None:
        self.calls = 0
        self.built = SimpleNamespace(
            splits_dir=root / "splits",
            base_model_dir=root / "base",
            adapter_dir=root / "lora",
            dtype="float64",
        )
        (root / "splits").mkdir()
        (root / "splits" / "drop_summary.json").write_text("{}")

    def __call__(self) -> SimpleNamespace:
        self.calls += 1
        return self.built


@pytest.fixture
def builds(tmp_path: Path) -> Builds:
    return Builds(tmp_path)


def test_own_model_and_adapter_are_forwarded_untouched_without_building(builds: Builds) -> None:
    argv = ["main", "--test-split", "s.jsonl", "--model", "m", "--adapter", "a"]
    assert _script().resolve_demo(argv, builds) == argv
    assert builds.calls == 0


def test_main_with_the_demo_gets_its_model_adapter_split_and_drop_summary(
    builds: Builds, tmp_path: Path
) -> None:
    argv = ["main", "--test-split", "", "--model", "demo", "--adapter=demo", "--seed", "3"]
    resolved = _script().resolve_demo(argv, builds)
    assert resolved == [
        "main",
        "--test-split",
        str(tmp_path / "splits" / "test.jsonl"),
        "--model",
        str(tmp_path / "base"),
        f"--adapter={tmp_path / 'lora'}",
        "--seed",
        "3",
        "--backend-options",
        "dtype=float64",
        "--drop-summary",
        str(tmp_path / "splits" / "drop_summary.json"),
    ]
    assert builds.calls == 1


def test_an_explicit_split_is_kept_and_evaluate_gets_no_drop_summary(
    builds: Builds, tmp_path: Path
) -> None:
    argv = ["evaluate", "--test-split", "mine.jsonl", "--model", "demo", "--adapter", ""]
    resolved = _script().resolve_demo(argv, builds)
    assert resolved == [
        "evaluate",
        "--test-split",
        "mine.jsonl",
        "--model",
        str(tmp_path / "base"),
        "--adapter",
        "",
        "--backend-options",
        "dtype=float64",
    ]


@pytest.mark.parametrize(
    "extra",
    [
        ["--backend-options", "dtype=float32"],
        ["--backend-options=max_retries=1, dtype=bfloat16"],
        # The spelling before issue 31, still accepted for one release.
        ["--backend-option", "dtype=float32"],
        ["--backend-option", "max_retries=1, dtype=bfloat16"],
        ["--backend", "server", "--backend-options", "base_url=http://h/v1"],
    ],
)
def test_the_demo_precision_yields_to_an_explicit_one_and_to_other_backends(
    builds: Builds, extra: list[str]
) -> None:
    argv = ["evaluate", "--test-split", "s.jsonl", "--model", "demo", *extra]
    resolved = _script().resolve_demo(argv, builds)
    assert "dtype=float64" not in resolved
    assert resolved[-len(extra) :] == extra


@pytest.mark.parametrize(
    ("model", "adapter", "message"),
    [
        ("mine", "demo", "--model demo"),
        ("demo", "mine", "--adapter demo or none"),
        # MLproject's model defaults to demo: a registry adapter is told how to drop it.
        ("demo", "models:/tools-lora@candidate", "-P model=''"),
    ],
)
def test_an_adapter_goes_only_with_its_own_base_model(
    builds: Builds, model: str, adapter: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _script().resolve_demo(["main", "--model", model, "--adapter", adapter], builds)
    assert builds.calls == 0


def test_a_broken_pairing_exits_2_and_says_so_under_mlflow_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mlflow run` exits 1 whatever the command returns: the line carries the real code."""
    monkeypatch.setenv("MLFLOW_RUN_ID", "0" * 32)
    assert _script().main(["main", "--model", "mine", "--adapter", "demo"]) == 2
    assert capsys.readouterr().err == (
        "error (exit code 2): the demo adapter was trained on the demo base model: "
        "pass --model demo too\n"
    )


def test_the_package_never_runs_demo_code() -> None:
    package = REPO / "sommelier_mlflow"
    for path in package.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "build_model" not in text and "build_demo" not in text, path


def _demo_copy(tmp_path: Path) -> Path:
    """examples/demo (scripts, data, committed model) copied into a scratch checkout."""
    demo = tmp_path / "examples" / "demo"
    shutil.copytree(SCRIPT.parent, demo, ignore=shutil.ignore_patterns("__pycache__"))
    return demo


@pytest.mark.parametrize("damage", ["altered", "missing"])
def test_an_altered_or_missing_committed_file_stops_the_demo_with_exit_3(
    tmp_path: Path, damage: str
) -> None:
    demo = _demo_copy(tmp_path)
    weights = demo / "model" / "base_model" / "model.safetensors"
    expected = loads((demo / "model" / "manifest.json").read_bytes())["files"][
        "base_model/model.safetensors"
    ]
    if damage == "altered":
        weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    else:
        weights.unlink()
    result = run_from_checkout(demo / "run.py", "main", "--out", str(tmp_path / "out"))
    assert result.returncode == 3, result.stderr
    assert f"model.safetensors {'was altered' if damage == 'altered' else 'is missing'}" in (
        result.stderr
    )
    assert f"expected sha256 {expected}" in result.stderr
    assert not (tmp_path / "out").exists()  # nothing generated, nothing trained
