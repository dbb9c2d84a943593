"""Crash safety: a generation process killed with SIGKILL resumes to identical files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sommelier_mlflow._json import loads
from sommelier_mlflow.data import Decoding, TestExample
from sommelier_mlflow.generation import HFGenerator, run_generation
from tests.generation.generation_helpers import (
    RecordingGenerator,
    TinyModels,
    kill_9_when,
    snapshot,
)

REPO = Path(__file__).resolve().parents[2]
DECODING = Decoding(max_new_tokens=6, batch_size=4)

# Runs in a fresh interpreter; each batch is followed by a pause so the parent
# can catch the run between its first and last batch and kill it.
_CHILD = """
import sys, time
from pathlib import Path
from tests.generation.generation_helpers import RecordingGenerator, make_examples
from sommelier_mlflow.data import Decoding
from sommelier_mlflow.generation import HFGenerator, run_generation

class Slow(RecordingGenerator):
    def generate(self, prompts, *, max_new_tokens):
        time.sleep(0.25)
        return super().generate(prompts, max_new_tokens=max_new_tokens)

generator = HFGenerator(Path(sys.argv[1]), num_threads=1)
run_generation(
    make_examples(generator.tokenizer, 20),
    Slow(generator),
    decoding=Decoding(max_new_tokens=6, batch_size=4),
    model_kind="base",
    out_dir=Path(sys.argv[2]),
    progress=False,
)
"""


def _lines(out: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in (out / "generations").glob("*.jsonl"))


def test_kill_9_mid_run_then_rerun_gives_byte_identical_files(
    tiny: TinyModels,
    base_generator: HFGenerator,
    examples: list[TestExample],
    tmp_path: Path,
) -> None:
    assert len(examples) == 40
    killed = tmp_path / "killed"
    script = tmp_path / "child.py"
    script.write_text(_CHILD, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "generation")]),
        "HF_HUB_OFFLINE": "1",
    }
    kill_9_when(  # no directory yet counts as no line
        [sys.executable, str(script), str(tiny.model_dir), str(killed)],
        lambda: _lines(killed) > 0,
        tmp_path / "child.log",
        env=env,
    )
    partial = _lines(killed)
    assert 1 <= partial < len(examples)

    done = {
        loads(line)["example_id"]
        for path in (killed / "generations").glob("*.jsonl")
        for line in path.read_bytes().splitlines(keepends=True)
        if line.endswith(b"\n")
    }
    uninterrupted = tmp_path / "uninterrupted"
    reference = RecordingGenerator(base_generator)
    run_generation(
        examples,
        reference,
        decoding=DECODING,
        model_kind="base",
        out_dir=uninterrupted,
        progress=False,
    )
    id_of = {example.prompt_text: example.example_id for example in examples}
    unfinished = [b for b in reference.batches if any(id_of[p] not in done for p in b)]

    resumed = RecordingGenerator(base_generator)
    run_generation(
        examples, resumed, decoding=DECODING, model_kind="base", out_dir=killed, progress=False
    )
    # Only unfinished batches ran again, each with its original composition.
    assert resumed.batches == unfinished
    assert len(unfinished) < len(reference.batches) or len(done) < 4
    assert snapshot(killed) == snapshot(uninterrupted)


def test_importing_generation_does_not_import_the_torch_stack() -> None:
    code = (
        "import sys\n"
        "import sommelier_mlflow.generation\n"
        "heavy = ('torch', 'transformers', 'peft', 'mlflow', 'tokenizers')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.stdout.strip() == ""
