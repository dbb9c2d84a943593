"""BFCL's multi-turn classes run in the sandbox: nothing a model writes is evaluated, limits hold.

The sandbox dispatches a decoded call only to a public method of an involved
instance, with its values as keywords. The breakout tests send what would run
code under BFCL's own ``eval``-based runner (``__import__``, attribute chains,
``eval``, format-string tricks) and check that a sentinel file never appears
and the state is unchanged. The limit tests use real BFCL methods on hostile
arguments (``logarithm`` and ``square_root`` at absurd precisions) and a
test-only class plugged in through the ``class_modules`` hook
(``tests/toolcalls/bfcl_hostile_api.py``), and check the run goes on after each.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.errors import DataError, DependencyError
from sommelier_mlflow.toolcalls import (
    BFCL_INSTALL_COMMAND,
    BfclSandbox,
    gold_turn_calls,
    parse_gold_call,
)
from tests.support.bfcl_multi_turn import (
    MULTI_TURN_CATEGORIES,
    multi_turn_questions,
    require_bfcl,
)

HOSTILE = {
    "HostileAPI": "tests.toolcalls.bfcl_hostile_api",
    "CrashingAPI": "tests.toolcalls.bfcl_hostile_api",
}


@pytest.fixture(scope="module", autouse=True)
def _bfcl_installed() -> None:
    require_bfcl()


@pytest.fixture(scope="module")
def file_system() -> dict[str, Any]:
    """The environment of BFCL's first base question (GorillaFileSystem and TwitterAPI)."""
    question = multi_turn_questions("multi_turn_base")[0]
    return dict(question.multi_turn["environment"])


@pytest.fixture
def sandbox() -> Iterator[BfclSandbox]:
    with BfclSandbox(call_seconds=1.0, class_modules=HOSTILE) as opened:
        yield opened


def _hostile(counter: int = 5) -> dict[str, Any]:
    return {
        "initial_config": {"HostileAPI": {"counter": counter}},
        "involved_classes": ["HostileAPI"],
        "long_context": False,
    }


def _call(function: Any, /, **arguments: Any) -> dict[str, Any]:
    return {"name": function, "arguments": arguments}


def test_calls_written_to_break_out_run_nothing(
    sandbox: BfclSandbox, file_system: dict[str, Any], tmp_path: Path
) -> None:
    sentinel = tmp_path / "ran"
    shell = f"__import__('os').system('touch {sentinel}')"
    sandbox.open("model", file_system)
    sandbox.open("fresh", file_system)
    refused = [
        _call("__import__", name="os"),
        _call("__class__"),
        _call("eval", source=shell),
        _call("exec", source=shell),
        _call("_load_scenario", scenario={}),
        _call("__init__"),
        _call("os.system", command=f"touch {sentinel}"),
        _call("ls.__globals__"),
        _call("ls.__func__.__globals__['subprocess'].run", args=["touch", str(sentinel)]),
        _call(shell),
        _call(None),
        _call(7),
        {"name": "ls", "arguments": shell},  # arguments that are text, not an object
        {"name": "ls", "arguments": ["a"]},
        {"name": "ls"},
        "ls()",  # not even a decoded call
    ]
    results = sandbox.execute("model", refused)
    assert len(results) == len(refused)
    assert all(result.startswith("Error during execution: ") for result in results)
    # Strings that look like code or format fields are data to BFCL's methods.
    tricky = [
        _call("ls", a=shell),
        _call("cd", folder=shell),
        _call("cat", file_name="{0.__class__.__init__.__globals__}"),
        _call("grep", file_name="{0.__class__}", pattern="%(os)s"),
        _call("ls", a=True, __import__="os"),  # an unknown keyword is a bad argument
    ]
    results = sandbox.execute("model", tricky)
    assert "{0.__class__.__init__.__globals__}" in results[2]
    assert results[4].startswith("Error during execution: ") and "__import__" in results[4]
    assert not sentinel.exists()
    assert sandbox.state_difference("model", "fresh") is None
    # The same sandbox still runs ordinary calls.
    assert sandbox.execute("model", [_call("pwd")]) == [
        '{"current_working_directory": "/workspace"}'
    ]


def test_a_call_looping_in_python_is_stopped_undone_and_the_run_goes_on(
    sandbox: BfclSandbox,
) -> None:
    sandbox.open("h", _hostile())
    results = sandbox.execute("h", [_call("bump"), _call("spin"), _call("bump")])
    assert results[0] == '{"counter": 6}'
    assert "spin ran past its 1 s limit" in results[1] and "undone" in results[1]
    assert results[2] == '{"counter": 7}'  # spin's +100 left no trace
    assert sandbox.restarts == 0


def test_a_call_stuck_in_c_code_kills_the_worker_and_every_environment_is_replayed(
    sandbox: BfclSandbox,
) -> None:
    sandbox.open("h", _hostile(5))
    sandbox.open("other", _hostile(50))
    sandbox.execute("h", [_call("bump"), _call("bump")])
    sandbox.execute("other", [_call("bump")])
    results = sandbox.execute("h", [_call("hang"), _call("bump")])
    assert sandbox.restarts == 1
    assert "hang ran past 2 s or ended the process" in results[0]
    assert results[1] == '{"counter": 8}'  # replayed to 7, the hang's +1000 undone
    assert sandbox.execute("other", [_call("bump")]) == ['{"counter": 52}']


def test_a_worker_killed_between_calls_is_replaced_with_its_environments(
    sandbox: BfclSandbox,
) -> None:
    sandbox.open("h", _hostile(5))
    sandbox.execute("h", [_call("bump")])
    process = sandbox._process
    assert process is not None
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert sandbox.execute("h", [_call("bump")]) == ['{"counter": 7}']
    assert sandbox.restarts == 1


def test_an_environment_that_ends_the_worker_is_refused_with_what_it_said(
    sandbox: BfclSandbox,
) -> None:
    sandbox.open("h", _hostile(5))
    crashing = {"initial_config": {}, "involved_classes": ["CrashingAPI"], "long_context": False}
    with pytest.raises(DataError, match="it said: CrashingAPI: this scenario ends the process"):
        sandbox.open("crash", crashing)
    assert sandbox.execute("h", [_call("bump")]) == ['{"counter": 6}']
    with pytest.raises(KeyError):
        sandbox.execute("crash", [_call("bump")])


def test_a_call_over_the_memory_cap_is_stopped_and_undone() -> None:
    with BfclSandbox(memory_bytes=1024**3, class_modules=HOSTILE) as sandbox:
        sandbox.open("h", _hostile())
        results = sandbox.execute("h", [_call("allocate", size=4 * 1024**3), _call("bump")])
        assert "allocate ran out of memory" in results[0]
        assert results[1] == '{"counter": 6}'
        assert sandbox.restarts == 0


def test_real_bfcl_methods_on_hostile_arguments_are_stopped(sandbox: BfclSandbox) -> None:
    math = {"initial_config": {}, "involved_classes": ["MathAPI"], "long_context": False}
    sandbox.open("math", math)
    results = sandbox.execute(
        "math",
        [
            _call("logarithm", value=3, base=2, precision=10**6),  # mpmath: Python-level
            _call("square_root", number=2, precision=10**8),  # libmpdec: stuck in C
            _call("add", a=1, b=2),
        ],
    )
    assert "logarithm ran past its 1 s limit" in results[0]
    assert "square_root ran past 2 s" in results[1]
    assert results[2] == '{"result": 3}'
    assert sandbox.restarts == 1


def test_long_results_are_cut_with_a_note_and_legitimate_ones_kept(sandbox: BfclSandbox) -> None:
    with BfclSandbox(result_chars=100, class_modules=HOSTILE) as small:
        small.open("h", _hostile())
        (cut,) = small.execute("h", [_call("shout", size=250)])
    assert cut.startswith("x" * 100 + "\n[result cut: 250 characters, the first 100 shown]")
    # The longest legitimate result over BFCL's 800 questions passes whole.
    question = next(
        q
        for q in multi_turn_questions("multi_turn_long_context")
        if q.example_id == "multi_turn_long_context_112"
    )
    sandbox.open("trading", question.multi_turn["environment"])
    (history,) = sandbox.execute("trading", [_call("get_transaction_history")])
    assert len(history) == 84_503 and "result cut" not in history


def test_missing_bfcl_package_is_a_dependency_error_naming_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)
    monkeypatch.setitem(
        sys.modules, "bfcl_eval.eval_checker.multi_turn_eval.func_source_code", None
    )
    with pytest.raises(DependencyError) as raised, BfclSandbox():
        pass
    assert raised.value.exit_code == 3
    assert BFCL_INSTALL_COMMAND in str(raised.value)


def test_a_class_module_the_worker_cannot_import_is_a_dependency_error() -> None:
    ghost = {"initial_config": {}, "involved_classes": ["Ghost"], "long_context": False}
    with BfclSandbox(class_modules={"Ghost": "no_such_module_for_sommelier"}) as sandbox:
        with pytest.raises(DependencyError, match="pip install --no-deps bfcl-eval"):
            sandbox.open("ghost", ghost)
        with pytest.raises(DataError, match="not a multi-turn class"):
            sandbox.open("x", {**ghost, "involved_classes": ["os"]})


def test_ground_truth_positional_arguments_are_named_by_the_signature(
    file_system: dict[str, Any],
) -> None:
    assert parse_gold_call("sort('final_report.pdf')", file_system) == {
        "name": "sort",
        "arguments": {"file_name": "final_report.pdf"},
    }
    assert parse_gold_call("tail(file_name='log.txt',lines=20)", file_system) == {
        "name": "tail",
        "arguments": {"file_name": "log.txt", "lines": 20},
    }


@pytest.mark.parametrize(
    "text",
    [
        "cd(folder=__import__('os').system('touch x'))",
        "os.system('touch x')",
        "ls.__globals__()",
        "cd(*['x'])",
        "cd(**{'folder': 'x'})",
        "no_such_function()",
        "_load_scenario({})",
        "cd('a', 'b', 'c')",
        "cd('a', folder='a')",
        "cd(folder='a'",
        "[cd(folder='a')]",
    ],
)
def test_ground_truth_that_is_not_a_literal_call_is_refused_naming_it(
    text: str, file_system: dict[str, Any]
) -> None:
    with pytest.raises(DataError) as raised:
        parse_gold_call(text, file_system)
    assert repr(text) in str(raised.value)
    assert raised.value.exit_code == 2


def test_every_ground_truth_string_of_the_four_categories_parses() -> None:
    calls = 0
    for category in MULTI_TURN_CATEGORIES:
        for question in multi_turn_questions(category):
            turns = gold_turn_calls(question)
            assert len(turns) == len(question.ground_truth)
            calls += sum(len(turn) for turn in turns)
    assert calls == sum(
        len(turn)
        for category in MULTI_TURN_CATEGORIES
        for question in multi_turn_questions(category)
        for turn in question.ground_truth
    )
    assert calls > 3000
