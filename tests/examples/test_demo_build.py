"""The demo model build: cached by key, verified on reuse, atomic, loadable, deterministic.

Every test uses a *reduced* build (a few optimiser steps on a few dozen
training roots) so the suite stays fast; the full build differs only in the
step and row counts, which are part of the cache key.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.data import format_examples, read_test_split, render_target
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.toolcalls import parse_tool_call

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "demo" / "build_model.py"
REDUCED: dict[str, Any] = {"base_steps": 3, "adapter_steps": 2, "max_train_roots": 40}


@cache
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_build_model", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _restore_torch_threads() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache_root = tmp_path_factory.mktemp("demo-cache")
    return _script().build_demo(cache_root, progress=False, **REDUCED)


def _weights(artifacts: Any) -> Path:
    return Path(artifacts.base_model_dir) / "model.safetensors"


def test_build_writes_a_complete_verified_layout(built: Any) -> None:
    module = _script()
    root = Path(built.root)
    assert built.built is True
    assert root.name == built.key
    assert built.key == module.cache_key(**REDUCED)
    assert {p.name for p in root.parent.iterdir()} == {built.key}  # no scratch left behind
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl", "drop_summary.json"):
        assert (Path(built.splits_dir) / name).is_file()
    assert Path(built.test_split) == Path(built.splits_dir) / "test.jsonl"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (Path(built.base_model_dir) / name).is_file()
    adapter_files = {p.name for p in Path(built.adapter_dir).iterdir()}
    assert adapter_files == {"adapter_config.json", "adapter_model.safetensors"}
    manifest = loads(Path(built.manifest_path).read_bytes())
    assert manifest == dict(built.manifest)
    assert manifest["schema_version"] == module.MANIFEST_SCHEMA
    on_disk = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name != module.MANIFEST_NAME
    )
    assert sorted(manifest["files"]) == on_disk
    assert manifest["inputs"]["params"]["base_steps"] == REDUCED["base_steps"]
    assert set(manifest["inputs"]["versions"]) >= {"torch", "transformers", "peft", "tokenizers"}
    assert manifest["summary"]["parameters"]["base"] < 5_000_000
    # The adapter names its base by the sibling directory, never by a build path.
    adapter_config = loads((Path(built.adapter_dir) / "adapter_config.json").read_bytes())
    assert adapter_config["base_model_name_or_path"] == "base_model"
    assert str(root.parent) not in (Path(built.adapter_dir) / "adapter_config.json").read_text()


def test_test_split_is_the_prepared_one_with_french_pairs(built: Any) -> None:
    split = read_test_split(built.test_split)
    by_language: dict[str, int] = {}
    for example in split.examples:
        by_language[example.language] = by_language.get(example.language, 0) + 1
    assert by_language["en"] == _script().DEFAULT_SPLIT_SIZES["test"]
    assert 0 < by_language["fr"] <= by_language["en"]
    roots = {e.example_id for e in split.examples if e.source_example_id is None}
    assert all(e.source_example_id in roots for e in split.examples if e.language == "fr")


def test_second_call_reuses_the_cache_without_rebuilding(built: Any) -> None:
    before = _weights(built).stat().st_mtime_ns
    again = _script().build_demo(Path(built.root).parent, progress=False, **REDUCED)
    assert again.built is False
    assert again.timings == {}
    assert (again.root, again.base_model_dir, again.adapter_dir, again.splits_dir) == (
        built.root,
        built.base_model_dir,
        built.adapter_dir,
        built.splits_dir,
    )
    assert again.manifest == built.manifest
    assert _weights(again).stat().st_mtime_ns == before


def _copy_cache(built: Any, tmp_path: Path) -> Path:
    cache_root = tmp_path / "cache"
    shutil.copytree(Path(built.root), cache_root / built.key)
    return cache_root


def test_a_flipped_byte_is_detected_and_the_rebuild_is_byte_identical(
    built: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache_root = _copy_cache(built, tmp_path)
    weights = cache_root / built.key / "base_model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    module = _script()
    problem = module.verify_cache(cache_root / built.key, built.key)
    assert problem[0] is None and "base_model/model.safetensors is corrupted" in problem[1]

    rebuilt = module.build_demo(cache_root, progress=False, **REDUCED)

    assert rebuilt.built is True
    assert "base_model/model.safetensors is corrupted" in capsys.readouterr().err
    # A rebuild from scratch reproduces every file bit for bit.
    assert rebuilt.manifest["files"] == built.manifest["files"]
    assert module.verify_cache(Path(rebuilt.root), built.key)[1] is None


def test_a_build_in_another_process_with_another_hash_seed_is_byte_identical(
    built: Any, tmp_path: Path
) -> None:
    code = (
        "import sys, importlib.util; from pathlib import Path\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['m'] = m\n"
        "spec.loader.exec_module(m)\n"
        f"a = m.build_demo(Path(sys.argv[1]), progress=False, **{REDUCED!r})\n"
        "print(a.manifest_path)\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "cache")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    manifest = loads(Path(result.stdout.strip().splitlines()[-1]).read_bytes())
    assert manifest["key"] == built.key
    assert manifest["files"] == built.manifest["files"]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda root: (root / "manifest.json").unlink(), "manifest.json is missing"),
        (lambda root: (root / "adapter" / "adapter_model.safetensors").unlink(), "missing"),
        (lambda root: (root / "splits" / "stray.txt").write_text("x"), "unexpected"),
    ],
    ids=["no-manifest", "missing-file", "extra-file"],
)
def test_an_incomplete_or_altered_cache_is_never_used(
    built: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: Any,
    reason: str,
) -> None:
    cache_root = _copy_cache(built, tmp_path)
    damage(cache_root / built.key)
    rebuilt = _script().build_demo(cache_root, progress=False, **REDUCED)
    assert rebuilt.built is True
    assert reason in capsys.readouterr().err
    assert rebuilt.manifest["files"] == built.manifest["files"]


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    raw = tmp_path / "raw.jsonl"
    source = (REPO / "examples" / "demo" / "data" / "raw.jsonl").read_text().splitlines()
    raw.write_text("\n".join(source[:30]) + "\n")
    cache_root = tmp_path / "cache"
    # A stale scratch directory of a process that no longer exists is cleaned up.
    dead_pid = _dead_pid()
    stale = cache_root / f".building-0123456789abcdef-{dead_pid}-deadbeef"
    stale.mkdir(parents=True)
    with pytest.raises(ConfigError, match="valid root rows"):
        _script().build_demo(cache_root, raw_path=raw, progress=False, **REDUCED)
    assert list(cache_root.iterdir()) == []


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    pid = process.pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid
    pytest.skip("the pid of a finished process was reused at once")


def test_cache_key_tracks_every_knob() -> None:
    module = _script()
    key = module.cache_key(**REDUCED)
    assert key == module.cache_key(**REDUCED)
    assert len(key) == 64
    changed = [
        {**REDUCED, "base_steps": 4},
        {**REDUCED, "adapter_steps": 3},
        {**REDUCED, "max_train_roots": 41},
        {**REDUCED, "split_sizes": {"train": 1700, "validation": 50, "test": 200}},
    ]
    assert len({key, *(module.cache_key(**kwargs) for kwargs in changed)}) == 1 + len(changed)


def test_tokenizer_round_trips_gold_calls_and_renders_the_chat_prompt(built: Any) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(built.base_model_dir)
    examples = format_examples(read_test_split(built.test_split).examples[:20], tokenizer)
    for example in examples:
        target = render_target(example.gold_call)
        ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids, skip_special_tokens=True) == target
        assert example.prompt_text is not None
        assert example.prompt_text.startswith("<s><|system|>\n")
        assert example.prompt_text.endswith(f"{example.query}<|end|>\n<|assistant|>\n")
        # The instruction and each tool schema are one token: <s>, <|system|>, "\n",
        # the instruction, "[", the tools and their separators, "]", <|end|>, "\n".
        system_ids = tokenizer(example.prompt_text.split("<|user|>")[0], add_special_tokens=False)
        assert len(system_ids["input_ids"]) <= 8 + 2 * len(example.tools)
    assert tokenizer.padding_side == "left"


def test_base_and_adapter_load_with_transformers_and_peft_and_generate(built: Any) -> None:
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(built.base_model_dir)
    model = AutoModelForCausalLM.from_pretrained(built.base_model_dir)
    assert model.config.model_type == "llama"
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    with warnings.catch_warnings():
        # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        adapted: Any = PeftModel.from_pretrained(model, str(built.adapter_dir))
    lora = load_file(str(Path(built.adapter_dir) / "adapter_model.safetensors"))
    # Trained: the B matrices (zero at initialisation) have moved.
    assert any(float(t.abs().sum()) > 0 for name, t in lora.items() if "lora_B" in name)

    examples = format_examples(read_test_split(built.test_split).examples[:3], tokenizer)
    batch = tokenizer(
        [e.prompt_text for e in examples],
        return_tensors="pt",
        padding=True,
        add_special_tokens=False,
    )
    with torch.inference_mode():
        output = adapted.generate(**batch, max_new_tokens=8, do_sample=False)
    texts = tokenizer.batch_decode(
        output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True
    )
    assert len(texts) == 3
    for text in texts:
        assert isinstance(text, str)
        parse_tool_call(text)  # never raises, whatever the tiny model says


def test_the_generation_backend_runs_both_arms(built: Any) -> None:
    from sommelier_mlflow.generation import HFGenerator

    examples = read_test_split(built.test_split).examples[:2]
    for adapter in (None, built.adapter_dir):
        generator = HFGenerator(built.base_model_dir, adapter=adapter, num_threads=1)
        prompts = [e.prompt_text for e in format_examples(examples, generator.tokenizer)]
        outputs = generator.generate([p or "" for p in prompts], max_new_tokens=6)
        assert len(outputs) == 2 and all(isinstance(text, str) for text in outputs)
