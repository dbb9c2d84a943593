"""Run ``main`` and ``evaluate`` with ``--backend vllm`` in one process, as a user does.

Run by ``tests/generation/test_generation_vllm_inprocess.py`` with the vLLM
venv's python (vLLM's CPU build and the product live there), never imported by
pytest. Each command runs in this one process, one after the other, so what a
run leaves behind (an open engine, a live engine process) is seen by the next.
It counts the ``vllm.LLM`` engines built (the real class, counted), and after
each command the engines still registered (``open_engines``) and the vLLM
processes still alive, and writes everything to the JSON file named by its
first argument.

    python tests/support/vllm_inprocess_driver.py RESULT.json WORK_DIR
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _live_engine_processes() -> list[str]:
    """vLLM's engine and worker processes under this one that have not exited."""
    import psutil

    alive = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.status() != psutil.STATUS_ZOMBIE and "VLLM" in child.name():
                alive.append(f"{child.pid} {child.name()}")
    return alive


def _run(argv: list[str]) -> dict[str, Any]:
    """One command through the demo's entry point (what the MLproject runs), in this process."""
    sys.path.insert(0, str(ROOT / "examples" / "demo"))
    from run import main as demo_main

    from sommelier_mlflow.generation import open_engines

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = demo_main(argv)
    return {
        "argv": argv,
        "exit": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue()[-4000:],
        "open_engines": [repr(key) for key in open_engines()],
        "live_engine_processes": _live_engine_processes(),
    }


def main() -> None:
    """Each scenario of the test, in order; results to the JSON file."""
    import vllm

    result_path, work = Path(sys.argv[1]), Path(sys.argv[2])
    built: list[str] = []
    real_llm = vllm.LLM

    class CountedLLM(real_llm):  # type: ignore[misc, valid-type]
        """The real engine; only its constructions are counted."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(str(kwargs.get("model")))
            super().__init__(*args, **kwargs)

    vllm.LLM = CountedLLM
    from tests.support.vllm_server import build_demo_assets

    split = str(build_demo_assets().test_split)  # what `main` runs on the demo
    common = ["--backend", "vllm", "--log-traces", "false"]
    runs: dict[str, dict[str, Any]] = {}

    def record(name: str, argv: list[str]) -> None:
        before = len(built)
        runs[name] = {**_run(argv), "engines_built": len(built) - before}
        partial = result_path.with_suffix(".partial")
        partial.write_text(json.dumps(runs, indent=1), encoding="utf-8")
        partial.replace(result_path)  # a reader never sees half a file

    # 1. The adapter's rank (16) is above the engine's max_lora_rank: the base arm
    #    generates on the engine, the adapter arm is refused, the engine closes.
    record(
        "rank",
        [
            *("main", "--model", "demo", "--adapter", "demo", *common),
            *("--backend-options", "max_lora_rank=8,kv_cache_gib=1", "--max-examples", "4"),
            *("--out", str(work / "rank")),
        ],
    )
    # 2. The whole demo, both arms on one engine: its table must be the README's.
    record(
        "demo",
        [
            *("main", "--model", "demo", "--adapter", "demo", *common),
            *("--backend-options", "kv_cache_gib=1", "--out", str(work / "demo")),
        ],
    )
    # 3. A KV cache too small for one request of max_model_len tokens.
    record(
        "memory",
        [
            *("evaluate", "--model", "demo", "--model-kind", "base", *common),
            *("--test-split", split),
            *("--backend-options", "kv_cache_gib=0.001", "--out", str(work / "memory")),
        ],
    )
    # 4. A base model the engine cannot load: an architecture nobody implements.
    broken = work / "broken_model"
    shutil.copytree(ROOT / "examples" / "demo" / "model" / "base_model", broken)
    config = json.loads((broken / "config.json").read_text())
    config["architectures"] = ["NoSuchArchitectureForCausalLM"]
    (broken / "config.json").write_text(json.dumps(config))
    record(
        "unloadable",
        [
            *("evaluate", "--model", str(broken), "--model-kind", "base", *common),
            *("--test-split", split),
            *("--backend-options", "kv_cache_gib=1", "--out", str(work / "unloadable")),
        ],
    )


if __name__ == "__main__":  # vLLM starts its engine processes with spawn: they import this
    main()
