"""Deterministic tool-calling examples formatted with the tiny chat template."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import TestExample
from sommelier_mlflow.generation import TIMING_NAME

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "city": {"type": "str", "description": "City name"},
            "unit": {"type": "str", "description": "celsius or fahrenheit"},
        },
    },
    {
        "name": "convert_currency",
        "description": "Convert an amount between currencies.",
        "parameters": {
            "amount": {"type": "float", "description": "Amount"},
            "source": {"type": "str", "description": "ISO code"},
            "target": {"type": "str", "description": "ISO code"},
        },
    },
]


@dataclass(frozen=True)
class TinyModels:
    """Where the session's tiny tokenizer, model and adapter were saved."""

    root: Path
    tokenizer_dir: Path
    model_dir: Path
    adapter_dir: Path


CITIES = ["Paris", "Berlin", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Hanoi", "Perth", "Zürich"]
CURRENCIES = ["EUR", "USD", "JPY", "GBP", "CHF"]


def _rows(count: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(query_en, query_de, gold_call) triples; lengths vary so batching sorts."""
    rows = []
    for i in range(count):
        if i % 2 == 0:
            city = CITIES[i % len(CITIES)]
            unit = "celsius" if i % 4 == 0 else "fahrenheit"
            padding = " please" * (i % 5)
            rows.append(
                (
                    f"What is the weather in {city} in {unit}?{padding}",
                    f"Wie ist das Wetter in {city} in {unit}?{' bitte' * (i % 5)}",
                    {"name": "get_weather", "arguments": {"city": city, "unit": unit}},
                )
            )
        else:
            amount = float(10 * i + 5)
            source = CURRENCIES[i % len(CURRENCIES)]
            target = CURRENCIES[(i + 2) % len(CURRENCIES)]
            rows.append(
                (
                    f"Convert {amount} {source} to {target}." + " Thanks!" * (i % 3),
                    f"Rechne {amount} {source} in {target} um." + " Danke!" * (i % 3),
                    {
                        "name": "convert_currency",
                        "arguments": {"amount": amount, "source": source, "target": target},
                    },
                )
            )
    return rows


def corpus() -> list[str]:
    """Texts the tiny tokenizer is trained on (queries, tools, gold calls)."""
    texts = [canonical_json(TOOLS)]
    for en, de, call in _rows(40):
        texts.extend([en, de, canonical_json(call)])
    return texts


def format_prompt(tokenizer: Any, query: str) -> str:
    """Render system (tools) + user messages with the chat template."""
    messages = [
        {"role": "system", "content": "Tools: " + canonical_json(TOOLS)},
        {"role": "user", "content": query},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert isinstance(text, str)
    return text


def make_examples(
    tokenizer: Any, count: int, *, languages: tuple[str, ...] = ("en", "de")
) -> list[TestExample]:
    """``count`` roots per language, interleaved the way a test split would be."""
    examples = []
    for i, (en, de, call) in enumerate(_rows(count)):
        for language in languages:
            query = en if language == "en" else de
            prompt = format_prompt(tokenizer, query)
            examples.append(
                TestExample(
                    example_id=f"ex{i:03d}" if language == "en" else f"ex{i:03d}-{language}",
                    language=language,
                    query=query,
                    tools=TOOLS,
                    gold_call=call,
                    source_example_id=None if language == "en" else f"ex{i:03d}",
                    prompt_text=prompt,
                    prompt_sha256=sha256_text(prompt),
                )
            )
    return examples


def load_tokenizer(directory: Path) -> Any:
    """Reload a saved tiny tokenizer offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory, local_files_only=True)


class RecordingGenerator:
    """Delegates to a real backend and records the batches it was asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    def generate(self, prompts: Any, *, max_new_tokens: int) -> list[str]:
        self.batches.append(list(prompts))
        result: list[str] = self.inner.generate(prompts, max_new_tokens=max_new_tokens)
        return result

    def __getattr__(self, name: str) -> Any:
        # Optional capabilities (prompt_lengths, fingerprint) are the inner backend's,
        # except generate_details and generate_for: every batch must go through
        # generate to be recorded.
        if name in ("generate_details", "generate_for"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` by relative path, to prove nothing changed.

    Except ``generation_timing.jsonl``: it records how long each batch took,
    a clock reading no two runs share (the runner's timing tests check it).
    """
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != TIMING_NAME
    }


def count_model_loads(monkeypatch: Any) -> list[str]:
    """Record every causal LM transformers loads from now on (its folder's name), in order.

    A spy, not a stand-in: each call still loads the model. ``monkeypatch``
    (pytest's fixture) undoes it after the test.
    """
    from transformers import AutoModelForCausalLM

    loaded: list[str] = []
    original = AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        loaded.append(Path(str(source)).name)
        return original(cls, source, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    return loaded


def kill_9_when(
    command: Sequence[str],
    ready: Callable[[], bool],
    log: Path,
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout: float = 120,
) -> None:
    """Run ``command``, send it SIGKILL as soon as ``ready()`` holds, and wait until it is gone.

    The test fails (with the child's output, kept in ``log``) if the child
    ends by itself first or nothing is ready within ``timeout`` seconds.
    """
    with log.open("wb") as output:
        child = subprocess.Popen(
            list(command), cwd=cwd, env=dict(env), stdout=output, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + timeout
            while not ready():
                assert child.poll() is None, log.read_text("utf-8")
                assert time.monotonic() < deadline, "the child made no progress in time"
                time.sleep(0.02)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == -signal.SIGKILL
