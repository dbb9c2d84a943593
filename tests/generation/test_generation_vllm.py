"""The ``server`` backend against a real vLLM server serving the demo model + LoRA.

The server is started once per test session (``vllm_server`` in
``tests/conftest.py``); these tests are skipped only when the vLLM venv has not
been built (``scripts/setup_vllm.sh``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import Decoding, format_examples, read_generations, read_test_split
from sommelier_mlflow.generation import (
    HFGenerator,
    ServerGenerator,
    ServerTransport,
    run_generation,
)
from tests.support.vllm_server import ADAPTER_NAME, BASE_NAME

pytestmark = pytest.mark.slow

PROMPTS = 32


def _raw_texts(out: Path) -> dict[str, str]:
    return {
        record.example_id: record.raw_text
        for path in sorted((out / "generations").glob("*.jsonl"))
        for record in read_generations(path)
    }


@pytest.mark.parametrize("kind", ["base", "adapter"])
def test_served_greedy_outputs_equal_transformers_outputs(
    vllm_server: Any, demo_assets: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", vllm_server.api_key)
    adapter = demo_assets.adapter_dir if kind == "adapter" else None
    local = HFGenerator(demo_assets.base_model_dir, adapter=adapter)
    served = ServerGenerator(
        ServerTransport(vllm_server.url),
        served_model=BASE_NAME,
        served_adapter=ADAPTER_NAME if adapter else None,
        adapter=adapter,
        model=str(demo_assets.base_model_dir),
        usage_log=tmp_path / "usage.jsonl",
    )
    split = read_test_split(demo_assets.splits_dir / "test.jsonl")
    examples = format_examples(split.examples[:PROMPTS], served.tokenizer)
    # One at a time for transformers: no padding, the reference greedy decode.
    for name, generator, batch in (("hf", local, 1), ("served", served, 8)):
        run_generation(
            examples,
            generator,
            decoding=Decoding(max_new_tokens=96, batch_size=batch),
            model_kind="adapter" if adapter else "base",
            out_dir=tmp_path / name,
            progress=False,
        )
    expected, found = _raw_texts(tmp_path / "hf"), _raw_texts(tmp_path / "served")
    assert len(expected) == PROMPTS
    differing = [key for key in expected if expected[key] != found[key]]
    assert differing == [], [(expected[k], found[k]) for k in differing[:3]]
    assert served.model_identity() == local.model_identity()
    assert served.adapter_info() == local.adapter_info()
    usage = (tmp_path / "usage.jsonl").read_text().splitlines()
    assert len(usage) == PROMPTS and all('"finish_reason":"' in line for line in usage)
    assert served.stats.metrics()["tokens_per_s"] > 0


def _evaluate(url: str, split: Path, base: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sommelier_mlflow.cli",
        "evaluate",
        "--test-split",
        str(split),
        "--model",
        str(base),
        "--model-kind",
        "base",
        "--backend",
        "server",
        "--base-url",
        url,
        "--served-model",
        BASE_NAME,
        "--max-new-tokens",
        "96",
        "--batch-size",
        "4",
        "--concurrency",
        "4",
        "--max-examples",
        "30",
        "--resamples",
        "50",
        "--out",
        str(out),
    ]


def _lines(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in (out / "generations").glob("*.jsonl"))


def test_killed_server_exits_3_and_the_rerun_resumes_byte_identical(
    vllm_server: Any, demo_assets: Any, tmp_path: Path
) -> None:
    env = {**os.environ, "OPENAI_API_KEY": vllm_server.api_key}
    split = demo_assets.splits_dir / "test.jsonl"
    base = demo_assets.base_model_dir
    reference = subprocess.run(
        _evaluate(vllm_server.url, split, base, tmp_path / "reference"),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert reference.returncode == 0, reference.stderr[-3000:]

    out = tmp_path / "interrupted"
    process = subprocess.Popen(
        _evaluate(vllm_server.url, split, base, out),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 600
        while not (out / "generations").is_dir() or _lines(out) == 0:
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        vllm_server.kill()
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
        if vllm_server.process is None:
            vllm_server.start()  # later tests share the server
    kept = _lines(out)
    total = _lines(tmp_path / "reference")
    assert process.returncode == 3, stderr[-3000:]
    assert f"127.0.0.1:{vllm_server.port}" in stderr and "Traceback" not in stderr
    assert vllm_server.api_key not in stderr
    assert 0 < kept < total

    resumed = subprocess.run(
        _evaluate(vllm_server.url, split, base, out),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    names = sorted(p.name for p in (tmp_path / "reference" / "generations").glob("*.jsonl"))
    assert names == sorted(p.name for p in (out / "generations").glob("*.jsonl"))
    for name in names:
        assert (out / "generations" / name).read_bytes() == (
            tmp_path / "reference" / "generations" / name
        ).read_bytes(), name
    for folder in (out, tmp_path / "reference"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert vllm_server.api_key.encode() not in path.read_bytes(), path
