"""The execution loop: BFCL multi-turn questions played step by step against BFCL's classes.

The model is scripted (:class:`ScriptedModel`); the loop, the runner, the
prompt rendering and the sandbox running ``GorillaFileSystem`` are the
product's own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, dumps_line, loads
from sommelier_mlflow.data import read_generations
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.generation import (
    MULTI_TURN_JOURNAL_NAME,
    TIMING_NAME,
    TRAJECTORIES_NAME,
    MultiTurnLoop,
    read_example_seconds,
    run_generation,
)
from sommelier_mlflow.toolcalls import BFCL_ADDED_TOOLS_PROMPT, BFCL_STEP_LIMIT
from tests.generation.generation_helpers import kill_9_when, snapshot
from tests.generation.multi_turn_helpers import (
    ANSWER,
    DECODING,
    LS,
    TOUCH,
    ScriptedModel,
    demo_tokenizer,
    formatted,
    play,
    question,
)
from tests.support.examples import formatted_example

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return demo_tokenizer()


def _journal(out: Path) -> list[dict[str, Any]]:
    return [loads(line) for line in (out / MULTI_TURN_JOURNAL_NAME).read_bytes().splitlines()]


def _trajectories(out: Path) -> dict[str, list[list[str]]]:
    rows = [loads(line) for line in (out / TRAJECTORIES_NAME).read_bytes().splitlines()]
    return {row["example_id"]: row["turns"] for row in rows}


def test_a_turn_ends_when_the_model_answers_without_a_call(tokenizer: Any, tmp_path: Path) -> None:
    model = ScriptedModel({"q1": [LS, ANSWER, ANSWER]})
    paths = play([question("q1")], model, tmp_path, tokenizer=tokenizer)

    assert _trajectories(tmp_path) == {"q1": [[LS, ANSWER], [ANSWER]]}
    (record,) = read_generations(paths["en"])
    assert record.turns == ((LS, ANSWER), (ANSWER,))
    assert record.raw_text == f"{LS}\n{ANSWER}\n{ANSWER}"
    first, second, third = _journal(tmp_path)
    assert (first["turn"], first["step"], first["calls"]) == (
        0,
        0,
        [{"name": "ls", "arguments": {}}],
    )
    assert first["results"] == ['{"current_directory_content": ["docs"]}']
    assert (second["turn"], second["step"], second["end"]) == (0, 1, "turn")
    assert (third["turn"], third["step"], third["calls"]) == (1, 0, [])
    # The result went back to the model: the second prompt shows the call and its result,
    # the third the next user turn after the first turn's answer.
    assert '"current_directory_content": ["docs"]' in model.batches[1][0]
    assert "[q1] request 1" in model.batches[2][0] and "[q1] request 1" not in model.batches[1][0]


def test_a_model_that_never_stops_calling_is_cut_after_the_step_limit(
    tokenizer: Any, tmp_path: Path
) -> None:
    model = ScriptedModel({}, default=LS)
    play([question("q1", turns=3)], model, tmp_path, tokenizer=tokenizer)

    # BFCL's rule: a turn that calls in more than BFCL_STEP_LIMIT steps is a forced quit,
    # and the question goes no further (the turns it never reached fail).
    assert _trajectories(tmp_path) == {"q1": [[LS] * (BFCL_STEP_LIMIT + 1)]}
    journal = _journal(tmp_path)
    assert len(journal) == BFCL_STEP_LIMIT + 1
    assert [entry["end"] for entry in journal] == [None] * BFCL_STEP_LIMIT + ["step_limit"]
    assert len(model.batches) == BFCL_STEP_LIMIT + 1


def test_tools_held_back_join_at_their_turn_with_bfcls_message(
    tokenizer: Any, tmp_path: Path
) -> None:
    example = question("q1", turns=2, added_tools={"1": [TOUCH]})
    touch = '[{"name": "touch", "arguments": {"file_name": "new.txt"}}]'
    model = ScriptedModel({"q1": [ANSWER, touch, LS, ANSWER]})
    play([example], model, tmp_path, tokenizer=tokenizer)

    first_prompt, *later = [batch[0] for batch in model.batches]
    assert '"touch"' not in first_prompt and BFCL_ADDED_TOOLS_PROMPT not in first_prompt
    assert all('"touch"' in prompt and BFCL_ADDED_TOOLS_PROMPT in prompt for prompt in later)
    journal = _journal(tmp_path)
    assert journal[1]["calls"] == [{"name": "touch", "arguments": {"file_name": "new.txt"}}]
    assert journal[2]["results"] == ['{"current_directory_content": ["docs", "new.txt"]}']


def test_hostile_output_executes_nothing(tokenizer: Any, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    injection = f"__import__('os').system('touch {marker}')"
    hostile = [
        '[{"name": "__init__", "arguments": {}}]',
        '[{"name": "_load_scenario", "arguments": {"scenario": {}}}]',
        canonical_json([{"name": "cd", "arguments": {"folder": injection}}]),
        '[{"name": "eval", "arguments": {"source": "1"}}]',
        'ls(); __import__("os").system("true")',
        LS,
    ]
    play(
        [question("q1", turns=1)],
        ScriptedModel({"q1": hostile}),
        tmp_path / "out",
        tokenizer=tokenizer,
    )

    journal = _journal(tmp_path / "out")
    assert not marker.exists()
    for entry in journal[:4]:  # decoded calls, each refused or failing as an error result
        assert len(entry["results"]) == 1 and "rror" in entry["results"][0], entry
    assert journal[4]["calls"] == [] and journal[4]["end"] == "turn"  # not a call: the turn ends
    # The file system is as it started: nothing the model wrote ran.
    (record,) = read_generations(tmp_path / "out" / "generations" / "en.jsonl")
    assert record.turns == (tuple(hostile[:5]),)


def test_one_generate_call_per_step_across_all_running_conversations(
    tokenizer: Any, tmp_path: Path
) -> None:
    script = {"a": [LS, ANSWER, ANSWER], "b": [LS, LS, LS, ANSWER, ANSWER], "c": [ANSWER, ANSWER]}
    model = ScriptedModel(script)
    play([question(name) for name in script], model, tmp_path, tokenizer=tokenizer)

    # Round by round, every conversation still running takes its step in one batch.
    assert [len(batch) for batch in model.batches] == [3, 3, 2, 1, 1]
    assert _trajectories(tmp_path) == {
        "a": [[LS, ANSWER], [ANSWER]],
        "b": [[LS, LS, LS, ANSWER], [ANSWER]],
        "c": [[ANSWER], [ANSWER]],
    }


def test_single_turn_and_multi_turn_rows_of_one_split_are_generated_together(
    tokenizer: Any, tmp_path: Path
) -> None:
    single = formatted_example("s1", prompt="<user>s1</user>")
    examples = [single, *formatted([question("q1")], tokenizer)]
    model = ScriptedModel({"q1": [LS, ANSWER, ANSWER]}, default='{"name": "x", "arguments": {}}')
    paths = run_generation(
        examples,
        model,
        decoding=examples_decoding(examples),
        model_kind="base",
        out_dir=tmp_path,
        progress=False,
        multi_turn=MultiTurnLoop(lambda step: formatted(step, tokenizer)),
    )
    records = read_generations(paths["en"])
    assert [(r.example_id, r.turns is None) for r in records] == [("s1", True), ("q1", False)]
    assert records[0].raw_text == '{"name": "x", "arguments": {}}'
    assert list(_trajectories(tmp_path)) == ["q1"]


def examples_decoding(examples: Any) -> Any:
    from sommelier_mlflow.generation import loop_decoding

    return loop_decoding(DECODING, examples, "json")


def test_multi_turn_rows_are_refused_without_the_loop(tokenizer: Any, tmp_path: Path) -> None:
    examples = formatted([question("q1")], tokenizer)
    with pytest.raises(ConfigError, match="multi-turn question"):
        run_generation(
            examples,
            ScriptedModel({}),
            decoding=examples_decoding(examples),
            model_kind="base",
            out_dir=tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigError, match=r"decoding\.execution"):
        run_generation(
            examples,
            ScriptedModel({}),
            decoding=DECODING,
            model_kind="base",
            out_dir=tmp_path,
            progress=False,
            multi_turn=MultiTurnLoop(lambda step: formatted(step, tokenizer)),
        )
    assert not (tmp_path / "generations").exists()


def _three_questions() -> tuple[list[Any], dict[str, list[str]]]:
    script = {
        "a": [LS, ANSWER, LS, LS, ANSWER],
        "b": [LS, LS, ANSWER, ANSWER],
        "c": [ANSWER, LS, ANSWER],
    }
    return [question(name) for name in script], script


def _uninterrupted(folder: Path, tokenizer: Any) -> tuple[list[Any], dict[str, list[str]]]:
    """The three questions played without interruption into ``folder``, and their script."""
    examples, script = _three_questions()
    play(examples, ScriptedModel(script), folder, tokenizer=tokenizer)
    return examples, script


def _cut_inside_the_third_round(whole: Path, cut: Path) -> list[int]:
    """What a kill leaves in ``cut``: two complete rounds, one step of the third, a torn line.

    And no generations yet (they are written when every question has ended).
    Returns the round of each line of the whole run's journal.
    """
    cut.mkdir()
    lines = (whole / MULTI_TURN_JOURNAL_NAME).read_bytes().splitlines(keepends=True)
    rounds = [loads(line)["round"] for line in lines]
    kept = lines[: rounds.index(2) + 1]
    (cut / MULTI_TURN_JOURNAL_NAME).write_bytes(b"".join(kept) + lines[rounds.index(2) + 1][:25])
    (cut / "generation_manifest.json").write_bytes(
        (whole / "generation_manifest.json").read_bytes()
    )
    return rounds


def test_a_run_cut_inside_a_round_resumes_to_identical_files(
    tokenizer: Any, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    examples, script = _uninterrupted(whole, tokenizer)
    cut = tmp_path / "cut"
    rounds = _cut_inside_the_third_round(whole, cut)

    model = ScriptedModel(script)
    play(examples, model, cut, tokenizer=tokenizer)
    assert snapshot(cut) == snapshot(whole)
    # Only the rounds from the cut one on were generated again, each whole.
    assert [len(batch) for batch in model.batches] == [3, 2, 1][: len(model.batches)]
    assert len(model.batches) == max(rounds) + 1 - 2


def _timing_rows(out: Path) -> list[dict[str, Any]]:
    return [loads(line) for line in (out / TIMING_NAME).read_bytes().splitlines()]


def test_each_step_batch_records_its_seconds_and_round_and_a_question_lasts_all_its_steps(
    tokenizer: Any, tmp_path: Path
) -> None:
    examples, script = _three_questions()
    model = ScriptedModel(script, pause=0.02)
    play(examples, model, tmp_path, tokenizer=tokenizer)

    rows = _timing_rows(tmp_path)
    journal = _journal(tmp_path)
    # One line per generated batch (one batch per round here), naming its conversations.
    assert len(rows) == len(model.batches) == 1 + max(entry["round"] for entry in journal)
    assert [(row["round"], sorted(row["example_ids"])) for row in rows] == [
        (n, sorted(e["example_id"] for e in journal if e["round"] == n)) for n in range(len(rows))
    ]
    assert all(row["seconds"] >= 0.02 for row in rows)
    # A question lasts its share of every round it took a step in; the shares add up.
    seconds = read_example_seconds(tmp_path)
    assert set(seconds) == set(script)
    for example_id in script:
        shares = [
            r["seconds"] / len(r["example_ids"]) for r in rows if example_id in r["example_ids"]
        ]
        assert len(shares) == sum(e["example_id"] == example_id for e in journal)
        assert seconds[example_id] == pytest.approx(sum(shares))
    assert sum(seconds.values()) == pytest.approx(sum(row["seconds"] for row in rows))


def test_a_resumed_run_times_only_the_rounds_it_generates_and_the_cut_one_once(
    tokenizer: Any, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    examples, script = _uninterrupted(whole, tokenizer)
    cut = tmp_path / "cut"
    _cut_inside_the_third_round(whole, cut)
    # What the killed run had timed: rounds 0 and 1 (1 s each), the batch of the cut
    # round (100 s, generated but not journaled when the kill came), and a torn line.
    planted = [
        {**row, "seconds": 1.0 if row["round"] < 2 else 100.0}
        for row in _timing_rows(whole)
        if row["round"] <= 2
    ]
    (cut / TIMING_NAME).write_bytes(b"".join(dumps_line(r) for r in planted) + b'{"schema_v')

    model = ScriptedModel(script, pause=0.01)
    play(examples, model, cut, tokenizer=tokenizer)
    rows = _timing_rows(cut)
    assert rows[: len(planted)] == planted  # the replayed rounds appended nothing
    again = rows[len(planted) :]
    assert [row["round"] for row in again] == list(range(2, 2 + len(model.batches)))
    seconds = read_example_seconds(cut)
    expected: dict[str, float] = {}
    for row in [*planted[:2], *again]:  # the cut round's 100 s gave way to its second run
        for example_id in row["example_ids"]:
            share = row["seconds"] / len(row["example_ids"])
            expected[example_id] = expected.get(example_id, 0.0) + share
    assert seconds == pytest.approx(expected)
    assert max(seconds.values()) < 100 / 3


def test_a_journal_whose_results_differ_is_refused(tokenizer: Any, tmp_path: Path) -> None:
    examples, script = _uninterrupted(tmp_path, tokenizer)
    journal = tmp_path / MULTI_TURN_JOURNAL_NAME
    entries = _journal(tmp_path)
    entries[0]["results"] = ['{"current_directory_content": ["elsewhere"]}']
    journal.write_bytes(b"".join(dumps_line(entry) for entry in entries))
    for path in (tmp_path / "generations").glob("*.jsonl"):
        path.unlink()

    with pytest.raises(InvariantViolationError, match="not deterministic"):
        play(examples, ScriptedModel(script), tmp_path, tokenizer=tokenizer)


def test_trajectories_replayed_give_the_records_the_loop_wrote(
    tokenizer: Any, tmp_path: Path
) -> None:
    played = tmp_path / "played"
    examples, _ = _uninterrupted(played, tokenizer)
    paths = {"en": played / "generations" / "en.jsonl"}

    ready = formatted(examples, tokenizer)
    replayed = tmp_path / "replayed"
    model = ScriptedModel({})
    run_generation(
        ready,
        model,
        decoding=examples_decoding(ready),
        model_kind="base",
        out_dir=replayed,
        progress=False,
        multi_turn=MultiTurnLoop(lambda step: [], trajectories=_trajectories(played)),
    )
    assert model.batches == []
    assert (replayed / "generations" / "en.jsonl").read_bytes() == paths["en"].read_bytes()
    assert (replayed / TRAJECTORIES_NAME).read_bytes() == (played / TRAJECTORIES_NAME).read_bytes()


class _ShortContext(ScriptedModel):
    """A model whose context holds prompts of up to ``limit`` characters (as tokens)."""

    def __init__(self, script: dict[str, list[str]], limit: int) -> None:
        super().__init__(script)
        self.limit = limit

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        return [len(prompt) for prompt in prompts]

    def context_length(self) -> int:
        return self.limit


def test_a_conversation_past_the_context_ends_there_and_the_others_go_on(
    tokenizer: Any, tmp_path: Path
) -> None:
    examples = [question("a"), question("b")]
    script = {"a": [LS, LS, LS, ANSWER, ANSWER], "b": [ANSWER, ANSWER]}
    first = max(len(e.prompt_text or "") for e in formatted(examples, tokenizer))
    model = _ShortContext(script, limit=first + DECODING.max_new_tokens + 120)
    play(examples, model, tmp_path, tokenizer=tokenizer)

    ends = {(e["example_id"], e["end"]) for e in _journal(tmp_path)}
    assert ("a", "context") in ends
    trajectories = _trajectories(tmp_path)
    assert trajectories["b"] == [[ANSWER], [ANSWER]]
    assert len(trajectories["a"]) == 1 and 0 < len(trajectories["a"][0]) < 4


# Plays the three questions with a pause after every round, so the parent can kill
# the process between two rounds (or while one is written).
_CHILD = """
import sys
from pathlib import Path
from tests.generation.multi_turn_helpers import ScriptedModel, demo_tokenizer, play, question
from tests.generation.test_generation_multi_turn import _three_questions

examples, script = _three_questions()
play(examples, ScriptedModel(script, pause=0.4), Path(sys.argv[1]), tokenizer=demo_tokenizer())
"""


def test_kill_9_between_rounds_then_rerun_gives_identical_files(
    tokenizer: Any, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    examples, script = _uninterrupted(whole, tokenizer)

    killed = tmp_path / "killed"
    journal = killed / MULTI_TURN_JOURNAL_NAME
    kill_9_when(
        [sys.executable, "-c", _CHILD, str(killed)],
        lambda: journal.is_file() and journal.read_bytes().count(b"\n") >= 4,
        tmp_path / "child.log",
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
    )
    assert not (killed / "generations" / "en.jsonl").exists()  # killed before the end

    resumed = ScriptedModel(script)
    play(examples, resumed, killed, tokenizer=tokenizer)
    assert snapshot(killed) == snapshot(whole)
    assert 0 < len(resumed.batches) < 5  # the journaled rounds were not generated again
