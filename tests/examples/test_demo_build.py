"""The demo's model files: committed and verified, rebuilt deterministically, never retrained.

The committed files are checked as they are. Every rebuild here is a
*reduced* one (a few optimiser steps on a few dozen training roots) so the
suite stays fast; the full build differs only in its step and row counts.
"""

from __future__ import annotations

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
from sommelier_mlflow.data import (
    build_messages,
    format_examples,
    read_test_split,
    render_target,
    tool_schemas,
)
from sommelier_mlflow.errors import ConfigError, DependencyError, InputError
from sommelier_mlflow.toolcalls import parse_tool_call
from tests.examples.examples_helpers import run_from_checkout
from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "demo" / "build_model.py"
REDUCED: dict[str, Any] = {"base_steps": 3, "adapter_steps": 2, "max_train_roots": 40}


def _script() -> ModuleType:
    return load_script("examples/demo/build_model.py")


@pytest.fixture(autouse=True)
def _restore_torch_threads() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A reduced rebuild, with the demo's splits, laid out as the demo uses it."""
    root = tmp_path_factory.mktemp("demo")
    module = _script()
    module.rebuild(root / "model", progress=False, **REDUCED)
    return module.demo_assets(root / "cache", model_dir=root / "model")


def _weights(artifacts: Any) -> Path:
    return Path(artifacts.base_model_dir) / "model.safetensors"


def test_rebuild_writes_a_complete_verified_layout(built: Any) -> None:
    module = _script()
    root = Path(built.model_dir)
    assert {p.name for p in root.parent.iterdir()} == {"model", "cache"}  # no scratch left
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
    assert manifest["built_with"]["params"]["base_steps"] == REDUCED["base_steps"]
    assert set(manifest["built_with"]["versions"]) >= {"torch", "transformers", "peft"}
    assert manifest["summary"]["parameters"]["base"] < 5_000_000
    # The adapter names its base by the sibling directory, never by a build path.
    adapter_config = loads((Path(built.adapter_dir) / "adapter_config.json").read_bytes())
    assert adapter_config["base_model_name_or_path"] == "base_model"
    assert str(root.parent) not in (Path(built.adapter_dir) / "adapter_config.json").read_text()


def test_the_committed_files_verify_and_are_small() -> None:
    module = _script()
    manifest = module.verify_model()
    sizes = [(module.MODEL_DIR / name).stat().st_size for name in manifest["files"]]
    assert sum(sizes) < 8_000_000
    assert manifest["built_with"]["params"]["base_steps"] == module.DEFAULT_BASE_STEPS
    assert manifest["built_with"]["params"]["adapter_steps"] == module.DEFAULT_ADAPTER_STEPS


def test_test_split_is_the_prepared_one_with_french_pairs(built: Any) -> None:
    split = read_test_split(built.test_split)
    by_language: dict[str, int] = {}
    for example in split.examples:
        by_language[example.language] = by_language.get(example.language, 0) + 1
    assert by_language["en"] == _script().DEFAULT_SPLIT_SIZES["test"]
    assert 0 < by_language["fr"] <= by_language["en"]
    roots = {e.example_id for e in split.examples if e.source_example_id is None}
    assert all(e.source_example_id in roots for e in split.examples if e.language == "fr")


def test_prepared_splits_are_reused_and_a_damaged_copy_is_prepared_again(
    built: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _script()
    cache_root = Path(built.splits_dir).parent
    assert Path(built.splits_dir).name == f"splits-{module.splits_key()}"
    before = Path(built.test_split).stat().st_mtime_ns
    assert module.prepare_splits(cache_root) == Path(built.splits_dir)
    assert Path(built.test_split).stat().st_mtime_ns == before

    Path(built.test_split).write_text("damaged\n")
    assert module.prepare_splits(cache_root) == Path(built.splits_dir)
    assert "test.jsonl was altered" in capsys.readouterr().err
    assert len(read_test_split(built.test_split).examples) > 200


def test_the_splits_key_depends_on_what_shapes_the_splits_only(tmp_path: Path) -> None:
    module = _script()
    key = module.splits_key()
    assert len(key) == 64
    other_sizes = {"train": 1700, "validation": 50, "test": 200}
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(module.DEFAULT_RAW_PATH.read_bytes() + b"\n")
    assert len({key, module.splits_key(split_sizes=other_sizes), module.splits_key(raw)}) == 3
    # Library versions and model files are not inputs of the splits.
    inputs = module._split_inputs(module.DEFAULT_RAW_PATH, module.DEFAULT_SPLIT_SIZES)
    assert set(inputs) == {"raw_sha256", "package_sources_sha256", "seed", "split_sizes"}


def _copy_model(built: Any, tmp_path: Path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(Path(built.model_dir), copy)
    return copy


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda root: _flip_a_byte(root / "base_model" / "model.safetensors"), "was altered"),
        (lambda root: (root / "adapter" / "adapter_model.safetensors").unlink(), "is missing"),
        (lambda root: (root / "adapter" / "stray.bin").write_text("x"), "does not list: adapter"),
        (lambda root: (root / "manifest.json").unlink(), "manifest.json is missing"),
    ],
    ids=["flipped-byte", "missing-file", "extra-file", "no-manifest"],
)
def test_a_missing_or_altered_model_file_is_named_and_never_retrained(
    built: Any, tmp_path: Path, damage: Any, reason: str
) -> None:
    copy = _copy_model(built, tmp_path)
    damage(copy)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    with pytest.raises(DependencyError, match=reason) as caught:
        _script().verify_model(copy)
    if reason in ("was altered", "is missing"):
        name = "model.safetensors" if reason == "was altered" else "adapter_model.safetensors"
        expected = next(d for f, d in built.manifest["files"].items() if f.endswith("/" + name))
        assert f"{name} {reason}" in str(caught.value)
        assert f"expected sha256 {expected}" in str(caught.value)
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before  # nothing touched


def test_a_rebuild_in_another_process_over_a_previous_build_is_byte_identical(
    built: Any, tmp_path: Path
) -> None:
    """Same machine, another hash seed, into a directory holding the previous build."""
    copy = _copy_model(built, tmp_path)
    _flip_a_byte(copy / "base_model" / "model.safetensors")  # the old build is replaced
    code = (
        "import sys, importlib.util; from pathlib import Path\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(SCRIPT)!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['m'] = m\n"
        "spec.loader.exec_module(m)\n"
        f"m.rebuild(Path(sys.argv[1]), progress=False, **{REDUCED!r})\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", code, str(copy)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _script().verify_model(copy)["files"] == built.manifest["files"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no scratch left


def test_a_rebuild_into_a_directory_with_other_files_is_refused_and_deletes_nothing(
    built: Any, tmp_path: Path
) -> None:
    copy = _copy_model(built, tmp_path)
    (copy / "notes.txt").write_text("mine")
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match=r"refusing to rebuild .*notes\.txt.*nothing was deleted"):
        _script().rebuild(copy, progress=False, **REDUCED)
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "weights.bin").write_text("not a build")
    with pytest.raises(InputError, match=r"weights\.bin"):
        _script().rebuild(other, progress=False, **REDUCED)
    assert (other / "weights.bin").read_text() == "not a build"


def test_the_command_line_exits_3_naming_the_altered_file(built: Any, tmp_path: Path) -> None:
    copy = _copy_model(built, tmp_path)
    _flip_a_byte(copy / "adapter" / "adapter_model.safetensors")
    result = run_from_checkout(SCRIPT, "--out", str(copy), "--cache", str(tmp_path / "c"))
    assert result.returncode == 3, result.stderr
    expected = built.manifest["files"]["adapter/adapter_model.safetensors"]
    assert "adapter_model.safetensors was altered" in result.stderr
    assert f"expected sha256 {expected}" in result.stderr


def test_a_failed_rebuild_leaves_nothing_behind(tmp_path: Path) -> None:
    raw = tmp_path / "raw.jsonl"
    source = (REPO / "examples" / "demo" / "data" / "raw.jsonl").read_text().splitlines()
    raw.write_text("\n".join(source[:30]) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    # A stale scratch directory of a process that no longer exists is cleaned up.
    stale = out / f".building-model-{_dead_pid()}-deadbeef"
    stale.mkdir()
    with pytest.raises(ConfigError, match="valid root rows"):
        _script().rebuild(out / "model", raw_path=raw, progress=False, **REDUCED)
    assert list(out.iterdir()) == []


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    pid = process.pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid
    pytest.skip("the pid of a finished process was reused at once")


def test_bad_build_parameters_are_refused() -> None:
    for bad in ({"base_steps": 0}, {"adapter_steps": -1}, {"max_train_roots": 0}):
        with pytest.raises(ConfigError):
            _script().rebuild(Path("/nonexistent/never-written"), progress=False, **bad)


def test_tokenizer_round_trips_gold_calls_and_renders_the_chat_prompt(built: Any) -> None:
    tokenizer = _committed_tokenizer()
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


#: The chat template the demo model was trained with, before it learned to render ``tools``.
TRAINED_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' + message['content'] + eos_token }}"
    "{% else %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


@cache
def _committed_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_script().MODEL_DIR / "base_model")


def test_without_tools_the_committed_template_renders_exactly_the_trained_prompts(
    built: Any,
) -> None:
    """Every prompt digest, and so every demo number, is what it was before ``tools``."""
    tokenizer = _committed_tokenizer()
    examples = read_test_split(built.test_split).examples
    for example in examples:
        messages = build_messages(example)
        for generation_prompt in (True, False):
            rendered = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=generation_prompt
            )
            trained = tokenizer.apply_chat_template(
                messages,
                chat_template=TRAINED_TEMPLATE,
                tokenize=False,
                add_generation_prompt=generation_prompt,
            )
            assert rendered == trained
    formatted = format_examples(examples, tokenizer)
    assert [e.prompt_text for e in formatted] == [
        tokenizer.apply_chat_template(
            build_messages(e),
            chat_template=TRAINED_TEMPLATE,
            tokenize=False,
            add_generation_prompt=True,
        )
        for e in examples
    ]


def test_with_tools_the_committed_template_renders_a_hermes_style_tools_block(
    built: Any,
) -> None:
    tokenizer = _committed_tokenizer()
    vocabulary = len(tokenizer)
    example = read_test_split(built.test_split).examples[0]
    tools = tool_schemas(example.tools)  # what --prompt-format native passes
    messages = [
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": example.query},
    ]
    rendered = tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=True
    )
    system, rest = rendered.split("<|end|>\n", 1)
    assert system.startswith("<s><|system|>\nYou are a travel assistant.\n\n")
    block = system.split("<tools>\n", 1)[1].split("</tools>", 1)[0]
    assert [loads(line) for line in block.splitlines()] == tools
    assert "<tool_call>" in system and "</tool_call>" in system
    assert rest == f"<|user|>\n{example.query}<|end|>\n<|assistant|>\n"
    # Without a system message the tools block is the whole system turn.
    bare = tokenizer.apply_chat_template(
        messages[1:], tools=tools, tokenize=False, add_generation_prompt=False
    )
    assert bare.startswith("<s><|system|>\nYou may call") and bare.endswith("<|end|>\n")
    assert len(tokenizer) == vocabulary  # the tags are text, not new tokens
    native = format_examples([example], tokenizer, prompt_format="native")[0]
    assert native.prompt_text is not None and "<tools>" in native.prompt_text


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


def test_the_generation_backend_runs_both_arms(demo_assets: Any) -> None:
    """On the committed demo, both arms answer, and the adapter is really applied."""
    from sommelier_mlflow.generation import HFGenerator

    examples = read_test_split(demo_assets.test_split).examples[:8]
    outputs = {}
    for arm, adapter in (("base", None), ("adapter", demo_assets.adapter_dir)):
        generator = HFGenerator(demo_assets.base_model_dir, adapter=adapter, num_threads=1)
        prompts = [e.prompt_text for e in format_examples(examples, generator.tokenizer)]
        outputs[arm] = generator.generate([p or "" for p in prompts], max_new_tokens=96)
        assert len(outputs[arm]) == len(examples) and all(outputs[arm]), arm
    # The adapter changes at least one answer, and nearly all of its answers are calls.
    assert outputs["adapter"] != outputs["base"]
    parsed = [parse_tool_call(text).status for text in outputs["adapter"]]
    assert parsed.count("ok") >= 6, parsed


def test_the_committed_template_renders_a_tool_call_history_and_single_turns_as_before(
    tmp_path: Path,
) -> None:
    """Issue 32: calls (content null or empty) and tool results render; no single turn changed."""
    from tests.support.conversations import write_conversation_split

    tokenizer = _committed_tokenizer()
    examples = read_test_split(write_conversation_split(tmp_path / "split.jsonl")).by_id()
    (later,) = format_examples([examples["c2-t3"]], tokenizer, prompt_format="native")
    text = later.prompt_text or ""
    assert (
        '<|assistant|>\n<tool_call>\n{"name": "search_flights", "arguments": {"destination": '
        '"Paris"}}\n</tool_call></s><|user|>\n<tool_response>\n{"flight": "AF123"}\n'
        "</tool_response><|end|>\n"
    ) in text
    assert text.endswith('{"booking": "H-9"}\n</tool_response><|end|>\n<|assistant|>\n')
    # A history with a text answer renders it as the trained assistant turns were.
    (answered,) = format_examples([examples["c4-t3"]], tokenizer, prompt_format="native")
    assert "<|assistant|>\nIn Berlin sind es 5 °C.</s><|user|>\nUnd in München?" in (
        answered.prompt_text or ""
    )
    # Single turns, with or without tools, render exactly as with the trained template.
    calls_split = REPO / "examples" / "calls" / "data" / "test_split.jsonl"
    for example in read_test_split(calls_split).examples:
        for tools in (None, tool_schemas(example.tools)):
            messages = [{"role": "user", "content": example.query}]
            assert tokenizer.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=True
            ) == tokenizer.apply_chat_template(
                messages,
                tools=tools,
                chat_template=TRAINED_TEMPLATE_WITH_TOOLS,
                tokenize=False,
                add_generation_prompt=True,
            )


#: The committed template before it learnt tool-call histories (issue 32).
TRAINED_TEMPLATE_WITH_TOOLS = (
    "{{ bos_token }}{% if tools %}{% set first = messages[0] if messages else none %}"
    "{{ '<|system|>\\n' }}{% if first and first['role'] == 'system' %}"
    "{{ first['content'] + '\\n\\n' }}{% endif %}{{ 'You may call one or more of the functions "
    "described below. Their JSON schemas, one per line, are inside "
    "<tools></tools>:\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ tool | tojson + '\\n' }}{% endfor %}{{ '</tools>\\n\\nTo call a "
    "function, answer with a JSON object holding its name and arguments inside "
    "<tool_call></tool_call> tags:\\n<tool_call>\\n{\"name\": <function name>, \"arguments\": "
    "<arguments as a JSON object>}\\n</tool_call><|end|>\\n' }}{% for message in messages %}"
    "{% if not (loop.first and message['role'] == 'system') %}{% if message['role'] == "
    "'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% else %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}{% endif %}"
    "{% endif %}{% endfor %}{% else %}{% for message in messages %}{% if message['role'] == "
    "'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token }}{% else %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}{% endif %}"
    "{% endfor %}{% endif %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
