"""Hand-made arm files for CLI and MLflow-project tests: a formatted split and generations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sommelier_mlflow._json import dumps_line, sha256_text
from sommelier_mlflow.data import Decoding, GenerationRecord, TestExample, write_test_split
from sommelier_mlflow.toolcalls import parse_tool_call

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"city": {"type": "str"}, "units": {"type": "str"}},
    },
    {
        "name": "fetch_weather",
        "description": "Another weather tool",
        "parameters": {"city": {"type": "str"}, "units": {"type": "str"}},
    },
]
CITIES = ["Paris", "Oslo", "Rome", "Lyon"]
DECODING = Decoding(max_new_tokens=32, batch_size=2)


def gold(city: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"city": city, "units": "celsius"}}


def examples() -> list[TestExample]:
    rows = []
    for index, city in enumerate(CITIES):
        for language, source in (("en", None), ("fr", f"en-{index}")):
            example_id = f"{language}-{index}"
            prompt = f"<system>tools</system><user>{language} weather {city}</user>"
            rows.append(
                TestExample(
                    example_id=example_id,
                    language=language,
                    query=f"weather in {city} ({language})",
                    tools=TOOLS,
                    gold_call=gold(city),
                    source_example_id=source,
                    prompt_text=prompt,
                    prompt_sha256=sha256_text(prompt),
                )
            )
    return sorted(rows, key=lambda row: row.source_example_id is not None)


# The spec's worked example per language: exact, wrong units, wrong name, prose.
BASE_OUTPUTS = {
    0: json.dumps(gold("Paris")),
    1: json.dumps({"name": "get_weather", "arguments": {"city": "Oslo", "units": "kelvin"}}),
    2: json.dumps({"name": "fetch_weather", "arguments": {"city": "Rome", "units": "celsius"}}),
    3: "The weather in Lyon is sunny.",
}
ADAPTER_OUTPUTS = {index: json.dumps(gold(city)) for index, city in enumerate(CITIES)}


def write_arm(folder: Path, kind: str, outputs: dict[int, str]) -> Path:
    """Write ``folder/generations/<lang>.jsonl`` as the generation layer would."""
    by_language: dict[str, list[bytes]] = {}
    for example in examples():
        index = int(example.example_id.split("-")[1])
        raw = outputs[index]
        parsed = parse_tool_call(raw)
        assert example.prompt_sha256 is not None
        record = GenerationRecord(
            example_id=example.example_id,
            model_kind=kind,  # type: ignore[arg-type]
            language=example.language,
            prompt_sha256=example.prompt_sha256,
            raw_text=raw,
            parse_status=parsed.status,
            parsed_call=parsed.call,
            decoding=DECODING.to_dict(),
        )
        by_language.setdefault(example.language, []).append(dumps_line(record.to_json()))
    target = folder / "generations"
    target.mkdir(parents=True, exist_ok=True)
    for language, lines in by_language.items():
        (target / f"{language}.jsonl").write_bytes(b"".join(lines))
    return target


def write_fixture(root: Path) -> dict[str, Path]:
    """A formatted split, base and adapter generations, and a stand-in adapter folder."""
    split = write_test_split(root / "test.jsonl", examples())
    adapter_dir = root / "adapter"
    adapter_dir.mkdir(parents=True, exist_ok=True)
    (adapter_dir / "adapter_config.json").write_text('{"r": 4}')
    (adapter_dir / "adapter_model.safetensors").write_bytes(b"weights")
    return {
        "split": split,
        "base": write_arm(root / "base", "base", BASE_OUTPUTS),
        "adapter": write_arm(root / "adapter_arm", "adapter", ADAPTER_OUTPUTS),
        "adapter_dir": adapter_dir,
    }


def score_args(
    files: dict[str, Path],
    kind: str,
    out: Path,
    *,
    resamples: int = 200,
    revision: str | None = "abc123",
) -> list[str]:
    """``score`` of one arm of :func:`write_fixture`, without the program name.

    The generations path stays at index 4, where a test can swap it.
    """
    args = ["score", "--test-split", str(files["split"]), "--generations", str(files[kind])]
    args += ["--model-kind", kind, "--model", "tiny/model"]
    args += [] if revision is None else ["--revision", revision]
    args += ["--out", str(out), "--resamples", str(resamples)]
    return args + (["--adapter", str(files["adapter_dir"])] if kind == "adapter" else [])


def evaluate_args(split: Path, out: Path, backend: str, *extra: str) -> list[str]:
    """``evaluate`` of the fixture's base arm with ``backend`` (a model it declares, not loads)."""
    return [
        *("evaluate", "--test-split", str(split), "--model", "tiny/model"),
        *("--revision", "abc123", "--model-kind", "base", "--batch-size", "2"),
        *("--backend", backend, *extra, "--resamples", "100", "--out", str(out)),
    ]


def tiny_arms(root: Path, *, gold_in_vocabulary: bool = True) -> dict[str, Path]:
    """The fixture's split without prompts, a tiny Llama with a chat template, and its LoRA.

    The tokenizer is trained on the tools and queries, and on the gold calls unless
    ``gold_in_vocabulary`` is off; the model and adapter are seeded, so every build is alike.
    """
    from dataclasses import replace

    from sommelier_mlflow._json import canonical_json
    from tests.support.tiny_models import build_lora_adapter, build_tiny_llama, build_tokenizer

    rows = [replace(ex, prompt_text=None, prompt_sha256=None) for ex in examples()]
    split = write_test_split(root / "test.jsonl", rows)
    texts = [canonical_json(TOOLS), *(row.query for row in rows)]
    if gold_in_vocabulary:
        texts += [canonical_json(row.gold_call) for row in rows]
    tokenizer = build_tokenizer(root / "tokenizer", texts)
    model = build_tiny_llama(root / "model", tokenizer, seed=0)
    adapter = build_lora_adapter(model, root / "adapter", seed=1)
    return {"split": Path(split), "model": Path(model), "adapter": Path(adapter)}
