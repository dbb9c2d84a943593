"""A full disk is one ``error:`` line and exit 2, and a previous result stays intact.

The disk is real: a small tmpfs mounted for the test (root only, as CI runs).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import Decoding
from sommelier_mlflow.generation import run_generation
from tests.cli.cli_helpers import examples, score_args
from tests.generation.generation_helpers import snapshot


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> None:
    """Take every free byte of the disk."""
    with (disk / "pad").open("wb") as pad:
        try:
            while True:
                pad.write(b"\0" * 65536)
                pad.flush()
        except OSError:
            pass


def test_score_on_a_full_disk_is_one_error_line_and_keeps_the_previous_result(
    files: dict[str, Path], small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = small_disk / "out"
    assert main(score_args(files, "base", out)) == 0
    before = snapshot(out)
    capsys.readouterr()
    _fill(small_disk)
    assert main(score_args(files, "base", out, resamples=300)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "No space left on device" in err
    assert snapshot(out) == before


def test_generation_on_a_full_disk_names_the_file(small_disk: Path) -> None:
    class Long:
        def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[str]:
            return ["x" * 200_000 for _ in prompts]

    _fill(small_disk)
    with pytest.raises(OSError) as caught:
        run_generation(
            list(examples()),
            Long(),
            out_dir=small_disk / "gen",
            decoding=Decoding(max_new_tokens=8, batch_size=2),
            model_kind="base",
            progress=False,
        )
    assert caught.value.filename is not None
    assert str(small_disk) in str(caught.value.filename)
