"""The backend protocol and the replay backend, driven through the real runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, loads, sha256_text
from sommelier_mlflow.data import GENERATION_SCHEMA, Decoding, TestExample
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.generation import (
    ReplayGenerator,
    SupportsFingerprint,
    SupportsPromptLengths,
    TextGenerator,
    run_generation,
)
from sommelier_mlflow.toolcalls import PARSER_VERSION
from tests.generation.generation_helpers import TOOLS
from tests.support.examples import formatted_example


def _example(example_id: str, language: str, prompt: str) -> TestExample:
    return formatted_example(example_id, prompt=prompt, language=language, tools=TOOLS)


def _generate(
    examples: list[TestExample], generator: Any, out: Path, *, batch_size: int = 2, **options: Any
) -> dict[str, Path]:
    """The runner as the protocol tests drive it: 4 new tokens, the base arm, no progress bar.

    ``options`` (``progress``, ``on_batch``) add to or replace those settings.
    """
    settings: dict[str, Any] = {"model_kind": "base", "progress": False, **options}
    decoding = Decoding(max_new_tokens=4, batch_size=batch_size)
    return run_generation(examples, generator, decoding=decoding, out_dir=out, **settings)


def test_replay_generator_is_a_text_generator_with_a_fingerprint() -> None:
    replay = ReplayGenerator({"a": "x", "b": "y"})
    assert isinstance(replay, TextGenerator)
    assert isinstance(replay, SupportsFingerprint)
    assert not isinstance(replay, SupportsPromptLengths)
    assert replay.generate(["b", "a", "b"], max_new_tokens=5) == ["y", "x", "y"]
    assert replay.fingerprint() == ReplayGenerator({"b": "y", "a": "x"}).fingerprint()
    assert replay.fingerprint() != ReplayGenerator({"a": "x", "b": "z"}).fingerprint()


def test_replay_generator_refuses_unknown_prompts_and_non_strings() -> None:
    replay = ReplayGenerator({"known": "out"})
    with pytest.raises(InputError, match=sha256_text("unknown")):
        replay.generate(["known", "unknown"], max_new_tokens=5)
    with pytest.raises(ConfigError, match="str"):
        ReplayGenerator({"p": 3})  # type: ignore[dict-item]


def test_replayed_outputs_become_parsed_records_in_split_order(tmp_path: Path) -> None:
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    examples = [
        _example("e1", "en", "short"),
        _example("e2", "fr", "a much longer prompt"),
        _example("e3", "en", "a medium prompt"),
    ]
    replay = ReplayGenerator(
        {"short": f"Sure: {call}", "a much longer prompt": "no idea", "a medium prompt": "{oops"}
    )
    decoding = Decoding(max_new_tokens=8, batch_size=2)
    paths = run_generation(
        examples, replay, decoding=decoding, model_kind="adapter", out_dir=tmp_path, progress=False
    )
    assert paths == {
        "en": tmp_path / "generations" / "en.jsonl",
        "fr": tmp_path / "generations" / "fr.jsonl",
    }
    en = [loads(line) for line in paths["en"].read_bytes().splitlines()]
    fr = [loads(line) for line in paths["fr"].read_bytes().splitlines()]
    assert [row["example_id"] for row in en] == ["e1", "e3"]
    assert en[0] == {
        "schema_version": GENERATION_SCHEMA,
        "example_id": "e1",
        "model_kind": "adapter",
        "language": "en",
        "prompt_sha256": sha256_text("short"),
        "raw_text": f"Sure: {call}",
        "parse_status": "ok",
        "parsed_call": {"name": "get_weather", "arguments": {"city": "Oslo"}},
        "decoding": {"temperature": 0.0, "do_sample": False, "max_new_tokens": 8, "batch_size": 2},
    }
    assert en[1]["parse_status"] == "invalid_json"
    assert en[1]["parsed_call"] is None
    assert fr[0]["parse_status"] == "no_json"
    manifest = loads((tmp_path / "generation_manifest.json").read_bytes())
    assert manifest["parser_version"] == PARSER_VERSION
    assert manifest["generator"] == replay.fingerprint()
    assert canonical_json(manifest["decoding"]) == canonical_json(decoding.to_dict())


def test_a_generator_returning_the_wrong_number_of_outputs_is_an_invariant_violation(
    tmp_path: Path,
) -> None:
    from sommelier_mlflow.errors import InvariantViolationError

    class Short:
        def generate(self, prompts: object, *, max_new_tokens: int) -> list[str]:
            return ["only one"]

    examples = [_example("e1", "en", "p1"), _example("e2", "en", "p2")]
    with pytest.raises(InvariantViolationError, match="one str per prompt"):
        _generate(examples, Short(), tmp_path)
    assert not (tmp_path / "generations" / "en.jsonl").exists()


@pytest.mark.parametrize("progress", [True, False])
def test_progress_bar_goes_to_stderr_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], progress: bool
) -> None:
    examples = [_example(f"e{i}", "en", f"prompt {i}") for i in range(5)]
    replay = ReplayGenerator({f"prompt {i}": "{}" for i in range(5)})
    _generate(examples, replay, tmp_path, progress=progress)
    captured = capsys.readouterr()
    assert captured.out == ""
    if progress:
        assert "5/5" in captured.err
        assert "ex/s" in captured.err
    else:
        assert captured.err == ""


def test_on_batch_sees_every_generated_batch_with_its_completions(tmp_path: Path) -> None:
    from sommelier_mlflow.generation import Completion

    examples = [_example(f"e{i}", "en", f"prompt {i}") for i in range(5)]
    replay = ReplayGenerator({f"prompt {i}": f"out {i}" for i in range(5)})
    seen: list[tuple[list[Completion], float]] = []
    _generate(
        examples,
        replay,
        tmp_path,
        on_batch=lambda completions, seconds: seen.append((list(completions), seconds)),
    )
    assert [len(batch) for batch, _ in seen] == [2, 2, 1]
    texts = sorted(c.text for batch, _ in seen for c in batch)
    assert texts == [f"out {i}" for i in range(5)]
    # A backend without details reports texts only; nothing is invented.
    assert all(c.finish_reason is None and c.completion_tokens is None for b, _ in seen for c in b)
    assert all(seconds >= 0 for _, seconds in seen)


def test_details_that_are_not_completions_are_an_invariant_violation(tmp_path: Path) -> None:
    from sommelier_mlflow.errors import InvariantViolationError

    class Detailed:
        def generate(self, prompts: object, *, max_new_tokens: int) -> list[str]:
            return ["x"]

        def generate_details(self, prompts: object, *, max_new_tokens: int) -> list[str]:
            return ["x"]  # plain strings where Completions are due

    with pytest.raises(InvariantViolationError, match="one Completion per prompt"):
        _generate([_example("e1", "en", "p1")], Detailed(), tmp_path, batch_size=1)
