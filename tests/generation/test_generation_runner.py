"""run_generation: batching, validation, resumption and refusals."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import dumps_line, loads, sha256_text
from sommelier_mlflow.data import GENERATION_SCHEMA, Decoding, TestExample
from sommelier_mlflow.errors import ConfigError, DataError, InputError, InvariantViolationError
from sommelier_mlflow.generation import (
    TIMING_NAME,
    HFGenerator,
    ReplayGenerator,
    read_example_seconds,
    run_generation,
)
from sommelier_mlflow.toolcalls import parse_tool_call
from tests.generation.generation_helpers import RecordingGenerator, snapshot

DECODING = Decoding(max_new_tokens=6, batch_size=4)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [loads(line) for line in path.read_bytes().splitlines()]


def _replay(examples: list[TestExample]) -> ReplayGenerator:
    outputs = {}
    for i, example in enumerate(examples):
        assert example.prompt_text is not None
        outputs[example.prompt_text] = (
            f'{{"name": "get_weather", "arguments": {{"city": "C{i}"}}}}' if i % 3 else "no call"
        )
    return ReplayGenerator(outputs)


def _run(
    examples: list[TestExample], generator: Any, out: Path, **overrides: Any
) -> dict[str, Path]:
    options: dict[str, Any] = {"decoding": DECODING, "model_kind": "base", "progress": False}
    options.update(overrides)
    return run_generation(examples, generator, out_dir=out, **options)


@pytest.fixture
def replay_run(examples: list[TestExample], tmp_path: Path) -> Path:
    """A completed replay run to resume into or tamper with."""
    out = tmp_path / "done"
    _run(examples, _replay(examples), out)
    return out


@pytest.mark.parametrize("batch_size", [1, 8])
def test_every_example_gets_one_record_in_split_order(
    base_generator: HFGenerator, examples: list[TestExample], tmp_path: Path, batch_size: int
) -> None:
    decoding = Decoding(max_new_tokens=4, batch_size=batch_size)
    recorder = RecordingGenerator(base_generator)
    paths = _run(examples, recorder, tmp_path, decoding=decoding)
    assert sorted(paths) == ["de", "en"]
    by_id = {example.example_id: example for example in examples}
    for language, path in paths.items():
        rows = _rows(path)
        expected = [e.example_id for e in examples if e.language == language]
        assert [row["example_id"] for row in rows] == expected
        for row in rows:
            example = by_id[row["example_id"]]
            parsed = parse_tool_call(row["raw_text"])
            assert row["schema_version"] == GENERATION_SCHEMA
            assert row["language"] == language
            assert row["model_kind"] == "base"
            assert row["prompt_sha256"] == example.prompt_sha256
            assert (row["parse_status"], row["parsed_call"]) == (parsed.status, parsed.call)
            assert row["decoding"] == decoding.to_dict()
    # The plan covers each prompt once, in batches no larger than asked, longest first.
    flat = [prompt for batch in recorder.batches for prompt in batch]
    assert sorted(flat) == sorted(e.prompt_text or "" for e in examples)
    assert all(len(batch) <= batch_size for batch in recorder.batches)
    lengths = base_generator.prompt_lengths(flat)
    assert lengths == sorted(lengths, reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": 0.7}, "temperature"),
        ({"temperature": 0}, "temperature"),
        ({"do_sample": True}, "do_sample"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": -3}, "max_new_tokens"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_non_greedy_or_empty_decoding_is_a_config_error_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    settings: dict[str, Any] = {"max_new_tokens": 8, "batch_size": 2, **kwargs}
    with pytest.raises(ConfigError, match=f"decoding.{field}"):
        Decoding(**settings)
    with pytest.raises(ConfigError, match=f"decoding.{field}"):
        Decoding.from_dict({"temperature": 0.0, "do_sample": False, **settings})


def test_decoding_and_model_kind_must_be_validated_values(
    examples: list[TestExample], tmp_path: Path
) -> None:
    replay = _replay(examples)
    with pytest.raises(ConfigError, match="Decoding"):
        _run(examples, replay, tmp_path, decoding=DECODING.to_dict())
    with pytest.raises(ConfigError, match="model_kind"):
        _run(examples, replay, tmp_path, model_kind="tuned")
    with pytest.raises(ConfigError, match="generate"):
        _run(examples, object(), tmp_path)
    assert not tmp_path.joinpath("generations").exists()


def test_examples_need_unique_ids_and_verified_prompts(
    examples: list[TestExample], tmp_path: Path
) -> None:
    replay = _replay(examples)
    unformatted = dataclasses.replace(examples[0], prompt_text=None, prompt_sha256=None)
    with pytest.raises(InputError, match="format the split"):
        _run([unformatted, *examples[1:]], replay, tmp_path)
    with pytest.raises(InputError, match="duplicate example_id"):
        _run([*examples, examples[3]], replay, tmp_path)
    altered = dataclasses.replace(examples[0], prompt_text=(examples[0].prompt_text or "") + " ")
    with pytest.raises(InvariantViolationError, match="prompt_sha256"):
        _run([altered, *examples[1:]], replay, tmp_path)
    with pytest.raises(InputError, match="empty"):
        _run([], replay, tmp_path)
    assert not any(tmp_path.iterdir())


def test_resume_regenerates_interrupted_batches_whole_and_ends_byte_identical(
    base_generator: HFGenerator, examples: list[TestExample], tmp_path: Path
) -> None:
    full = tmp_path / "full"
    first = RecordingGenerator(base_generator)
    _run(examples, first, full)
    plan = first.batches
    assert len(plan) == 10

    resumed = tmp_path / "resumed"
    shutil.copytree(full, resumed)
    en, de = resumed / "generations" / "en.jsonl", resumed / "generations" / "de.jsonl"
    # Drop one record from the 3rd batch and two from the 7th, and tear de's last line.
    victims = {plan[2][1], plan[6][0], plan[6][3]}
    by_prompt = {e.prompt_text: e.example_id for e in examples}
    victim_ids = {by_prompt[p] for p in victims}
    en.write_bytes(
        b"".join(
            line
            for line in en.read_bytes().splitlines(keepends=True)
            if loads(line)["example_id"] not in victim_ids
        )
    )
    de_bytes = de.read_bytes()
    de.write_bytes(de_bytes[:-7])
    torn_id = loads(de_bytes.splitlines()[-1])["example_id"]
    torn_prompt = next(e.prompt_text for e in examples if e.example_id == torn_id)

    second = RecordingGenerator(base_generator)
    _run(examples, second, resumed)
    expected_batches = [b for b in plan if victims & set(b) or torn_prompt in b]
    assert second.batches == expected_batches  # whole original batches, in plan order
    assert snapshot(resumed) == snapshot(full)

    third = RecordingGenerator(base_generator)
    _run(examples, third, resumed)  # nothing left to do: no model call, same bytes
    assert third.batches == []
    assert snapshot(resumed) == snapshot(full)


def test_torn_last_line_is_dropped_and_regenerated(
    examples: list[TestExample], replay_run: Path
) -> None:
    reference = snapshot(replay_run)
    en = replay_run / "generations" / "en.jsonl"
    en.write_bytes(en.read_bytes()[:-1])  # just the newline missing is still torn
    (replay_run / "generations" / ".en.jsonl.abc.tmp").write_bytes(b"half")  # crashed rewrite
    recorder = RecordingGenerator(_replay(examples))
    _run(examples, recorder, replay_run)
    assert len(recorder.batches) == 1
    assert snapshot(replay_run) == reference


def _assert_refused_leaving_the_run_as_it_was(
    examples: list[TestExample],
    replay_run: Path,
    error: type[Exception],
    match: str,
    **overrides: Any,
) -> None:
    """Resuming ``replay_run`` raises ``error`` and leaves every byte of the run as it was."""
    before = snapshot(replay_run)
    with pytest.raises(error, match=match):
        _run(examples, _replay(examples), replay_run, **overrides)
    assert snapshot(replay_run) == before


def _rewrite_line(path: Path, index: int, **changes: Any) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    row = loads(lines[index])
    row.update(changes)
    lines[index] = dumps_line(row)
    path.write_bytes(b"".join(lines))


def test_refuses_records_from_a_different_prompt(
    examples: list[TestExample], replay_run: Path
) -> None:
    _rewrite_line(replay_run / "generations" / "de.jsonl", 2, prompt_sha256=sha256_text("other"))
    _assert_refused_leaving_the_run_as_it_was(
        examples, replay_run, InvariantViolationError, r"de\.jsonl:3: .*different prompt.*fresh"
    )


def test_refuses_records_with_other_decoding_kind_or_parse(
    examples: list[TestExample], replay_run: Path
) -> None:
    en = replay_run / "generations" / "en.jsonl"
    original = en.read_bytes()
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"decoding": {**DECODING.to_dict(), "batch_size": 5}}, ConfigError, "decoding"),
        # Not a valid (greedy) decoding at all: the data reader refuses the record.
        ({"decoding": {**DECODING.to_dict(), "temperature": 0.5}}, DataError, "temperature"),
        ({"model_kind": "adapter"}, ConfigError, "model_kind"),
        # A well-formed parse this run's parser does not produce: the record was edited.
        (
            {"parse_status": "ok", "parsed_call": {"name": "edited", "arguments": {}}},
            InvariantViolationError,
            "parse",
        ),
        # A parse that contradicts itself is malformed, whoever wrote it.
        ({"parse_status": "ok", "parsed_call": None}, DataError, "parsed_call"),
        ({"schema_version": "sommelier_mlflow.generation.v0"}, DataError, "schema_version"),
        ({"language": "de"}, DataError, "does not belong"),
        ({"example_id": "stranger"}, ConfigError, "not in this test split"),
    ]
    for changes, error, message in cases:
        en.write_bytes(original)
        _rewrite_line(en, 0, **changes)
        _assert_refused_leaving_the_run_as_it_was(examples, replay_run, error, message)


def test_refuses_malformed_or_duplicated_lines_with_file_and_line(
    examples: list[TestExample], replay_run: Path
) -> None:
    en = replay_run / "generations" / "en.jsonl"
    lines = en.read_bytes().splitlines(keepends=True)
    en.write_bytes(lines[0] + b"{not json}\n" + b"".join(lines[2:]))
    with pytest.raises(DataError, match=r"en\.jsonl:2: not a JSON line"):
        _run(examples, _replay(examples), replay_run)
    en.write_bytes(lines[0] + lines[0] + b"".join(lines[2:]))
    with pytest.raises(DataError, match=r"en\.jsonl:2: duplicate example_id"):
        _run(examples, _replay(examples), replay_run)
    en.write_bytes(lines[0] + b'{"example_id": "x"}\n')
    with pytest.raises(DataError, match="not a generation record"):
        _run(examples, _replay(examples), replay_run)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"decoding": Decoding(max_new_tokens=7, batch_size=4)}, "decoding.max_new_tokens"),
        ({"decoding": Decoding(max_new_tokens=6, batch_size=2)}, "decoding.batch_size"),
        ({"model_kind": "adapter"}, "model_kind"),
    ],
)
def test_refuses_to_resume_a_different_run(
    examples: list[TestExample], replay_run: Path, change: dict[str, Any], field: str
) -> None:
    _assert_refused_leaving_the_run_as_it_was(
        examples,
        replay_run,
        ConfigError,
        rf"first difference: {field}\).*fresh output directory",
        **change,
    )


def test_refuses_a_changed_split_other_outputs_or_unknown_files(
    examples: list[TestExample], replay_run: Path
) -> None:
    before = snapshot(replay_run)
    with pytest.raises(ConfigError, match="example_count"):
        _run(examples[:-2], _replay(examples), replay_run)
    prompt = (examples[5].prompt_text or "") + "(edited)"
    edited = dataclasses.replace(examples[5], prompt_text=prompt, prompt_sha256=sha256_text(prompt))
    with pytest.raises(ConfigError, match="examples_sha256"):
        _run([*examples[:5], edited, *examples[6:]], _replay(examples), replay_run)
    with pytest.raises(ConfigError, match=r"generator\.outputs_sha256"):
        _run(examples, _replay(examples[:-1]), replay_run)
    assert snapshot(replay_run) == before
    foreign = replay_run / "generations" / "fr.jsonl"
    foreign.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"fr\.jsonl is a slice this test split does not have"):
        _run(examples, _replay(examples), replay_run)
    foreign.unlink()
    (replay_run / "generation_manifest.json").unlink()
    with pytest.raises(ConfigError, match=r"generation_manifest\.json is missing"):
        _run(examples, _replay(examples), replay_run)


def test_refuses_to_resume_with_another_adapter(
    adapter_generator: HFGenerator,
    base_generator: HFGenerator,
    examples: list[TestExample],
    tmp_path: Path,
) -> None:
    subset = examples[:4]
    _run(subset, base_generator, tmp_path)
    with pytest.raises(ConfigError, match=r"generator\.adapter"):
        _run(subset, adapter_generator, tmp_path)


class _HalfPairs:
    """A backend whose answers hold lone surrogates, as a server's escaped JSON can."""

    TEXTS = ('{"name": "get_weather", "arguments": {"city": "\ud800"}}', "a\udc00b\ud83d\ude00")

    def generate(self, prompts: list[str], *, max_new_tokens: int) -> list[str]:
        return [self.TEXTS[len(prompt) % 2] for prompt in prompts]


def test_a_completion_with_a_lone_surrogate_is_stored_with_a_replacement_character(
    examples: list[TestExample], tmp_path: Path
) -> None:
    paths = _run(examples, _HalfPairs(), tmp_path)
    rows = [row for path in paths.values() for row in _rows(path)]
    assert {row["raw_text"] for row in rows} <= {
        '{"name": "get_weather", "arguments": {"city": "\ufffd"}}',
        "a\ufffdb\U0001f600",
    }
    assert len(rows) == len(examples)
    for row in rows:
        parsed = parse_tool_call(row["raw_text"])
        assert (row["parse_status"], row["parsed_call"]) == (parsed.status, parsed.call)


class _Slow(RecordingGenerator):
    """A backend whose every batch takes at least 20 ms, like a real one."""

    def generate(self, prompts: Any, *, max_new_tokens: int) -> list[str]:
        import time

        time.sleep(0.02)
        return super().generate(prompts, max_new_tokens=max_new_tokens)


def test_each_generated_batch_records_its_seconds_beside_the_generations(
    examples: list[TestExample], tmp_path: Path
) -> None:
    recorder = _Slow(_replay(examples))
    paths = _run(examples, recorder, tmp_path)
    id_of = {example.prompt_text: example.example_id for example in examples}
    lines = _rows(tmp_path / TIMING_NAME)
    assert [line["example_ids"] for line in lines] == [
        [id_of[prompt] for prompt in batch] for batch in recorder.batches
    ]
    assert all(line["seconds"] >= 0.02 for line in lines)
    seconds = read_example_seconds(tmp_path)
    assert set(seconds) == set(id_of.values())
    for line in lines:  # each example's share of its batch: the shares add up to the batch
        shares = [seconds[example_id] for example_id in line["example_ids"]]
        assert sum(shares) == pytest.approx(line["seconds"])
    # The generations carry no clock: their fields are the record's, nothing more.
    for path in paths.values():
        assert all("seconds" not in row for row in _rows(path))


def test_a_resumed_run_appends_the_seconds_of_the_batches_it_regenerated(
    examples: list[TestExample], replay_run: Path
) -> None:
    timing = replay_run / TIMING_NAME
    before = read_example_seconds(replay_run)
    en = replay_run / "generations" / "en.jsonl"
    en.write_bytes(en.read_bytes()[:-1])  # the last English record is torn: regenerated
    timing.write_bytes(timing.read_bytes() + b'{"schema_version": "sommelier_mlf')  # torn too
    recorder = RecordingGenerator(_replay(examples))
    _run(examples, recorder, replay_run)
    assert len(recorder.batches) == 1
    lines = _rows(timing)  # every line whole: nothing glued onto the torn one
    assert len(lines) == len(before) // DECODING.batch_size + 1
    after = read_example_seconds(replay_run)
    assert set(after) == set(before)
    assert [after[example_id] for example_id in lines[-1]["example_ids"]] == [
        lines[-1]["seconds"] / len(lines[-1]["example_ids"])
    ] * len(lines[-1]["example_ids"])


def test_a_timing_line_that_is_not_one_is_refused_naming_file_and_line(
    replay_run: Path,
) -> None:
    timing = replay_run / TIMING_NAME
    timing.write_bytes(timing.read_bytes() + b'{"schema_version": "x", "seconds": 1}\n')
    count = len(timing.read_bytes().splitlines())
    expected = r"not a sommelier_mlflow\.generation_timing\.v1 line"
    with pytest.raises(DataError, match=expected) as info:
        read_example_seconds(replay_run)
    assert info.value.path == str(timing)
    assert info.value.line == count
    assert read_example_seconds(replay_run / "elsewhere") == {}  # no file: no durations


@pytest.mark.parametrize("round_number", [-1, 1.0, "2", True])
def test_a_timing_line_whose_round_is_no_round_number_is_refused(
    replay_run: Path, round_number: Any
) -> None:
    timing = replay_run / TIMING_NAME
    row = {**_rows(timing)[0], "round": round_number}
    timing.write_bytes(timing.read_bytes() + dumps_line(row))
    with pytest.raises(DataError, match="round: absent or an integer >= 0") as info:
        read_example_seconds(replay_run)
    assert info.value.line == len(timing.read_bytes().splitlines())
