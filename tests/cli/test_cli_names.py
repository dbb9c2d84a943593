"""One spelling per option: MLproject parameters, CLI flags, evaluator config keys, Python.

Issue 31 item 4: `-P raw_data=...` was `--raw`, `-P categories=...` was
`--category`, `-P backend_options=...` was `--backend-option`, and the
evaluator's `slice_columns` was everyone else's `slice_by`. The MLproject's
names won (`mlflow run` logs them as run params, so renaming one would split
run histories); each flag is the dashed form of its parameter, the old
spellings stay as aliases for one release, and the README's Changes section
lists every rename. These tests compare the four vocabularies, so a new
option spelt two ways fails here.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from sommelier_mlflow.cli import build_parser, main
from sommelier_mlflow.cli._parser import RENAMED_FLAGS
from tests.support.mlflow_run import PROJECT, mlproject_entry_points

PACKAGE = PROJECT / "sommelier_mlflow"

#: Evaluator config keys with no MLproject parameter, and why.
EVALUATOR_ONLY = {
    "language_column": "names a column of the evaluated table",
    "example_id_column": "names a column of the evaluated table",
    "source_example_id_column": "names a column of the evaluated table",
    "tools_column": "names a column of the evaluated table",
    "messages_column": "names a column of the evaluated table",
    "default_language": "a split row always has its language",
    "metrics": "catalog metrics exist only around mlflow.models.evaluate",
    "log_table": "an arm always logs its table",
    "col_mapping": "MLflow's own key",
}
#: Python parameters that are no option of the CLI, the MLproject or the evaluator.
PYTHON_ONLY = {
    "outputs": "a column of data, not an option",
    "gold_calls": "a column of data, not an option",
    "example_ids": "a column of data (the evaluator's example_id_column)",
    "languages": "a column of data (the evaluator's language_column)",
    "source_example_ids": "a column of data (the evaluator's source_example_id_column)",
    "tools": "a column of data (the evaluator's tools_column)",
    "messages": "a column of data (the evaluator's messages_column)",
    "every_n_steps": "when a training callback evaluates",
    "on_evaluate": "when a training callback evaluates",
    "at_end": "when a training callback evaluates",
    "evaluate_base": "when a training callback evaluates",
    "output_dir": "where a training callback writes",
    "fail_on_error": "what a training callback does on an error",
    "check_multi_turn": "a function (import-bfcl's execution check), not a value",
}
#: The public functions whose parameters name options: module file, function or class.
PYTHON_SURFACES = [
    ("integration/_predictions.py", "score_predictions"),
    ("integration/_scorers.py", "sommelier_scorers"),
    ("training/_callback.py", "SommelierCallback"),
    ("data/_bfcl.py", "import_bfcl"),
]


def _subparser(command: str) -> argparse.ArgumentParser:
    """The parser of an MLproject command line (``... cli claims register ...``)."""
    words = command.split()
    start = next(
        i
        for i, word in enumerate(words)
        if word == "sommelier_mlflow.cli" or word.endswith("/run.py")
    )
    parser: argparse.ArgumentParser = build_parser()
    for word in words[start + 1 :]:
        choices = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not choices or word not in choices[0].choices:
            break
        parser = choices[0].choices[word]
    return parser


def _first_spellings(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every long flag of a parser to the first spelling of its action (the current one)."""
    spellings = {}
    for action in parser._actions:
        flags = [option for option in action.option_strings if option.startswith("--")]
        spellings.update((flag, flags[0]) for flag in flags)
    return spellings


def _every_flag_name() -> set[str]:
    """Each current long flag of every command, underscored (``max_examples``)."""
    names: set[str] = set()
    stack = [build_parser()]
    while stack:
        parser = stack.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
        names.update(flag[2:].replace("-", "_") for flag in set(_first_spellings(parser).values()))
    return names


def _evaluator_keys() -> tuple[frozenset[str], dict[str, str]]:
    from sommelier_mlflow.integration._evaluator import _KNOWN_KEYS, RENAMED_KEYS

    return _KNOWN_KEYS, dict(RENAMED_KEYS)


def _mlproject_parameters() -> set[str]:
    entries = mlproject_entry_points().values()
    return {name for entry in entries for name in entry.get("parameters") or {}}


def _parameters(module: str, name: str) -> list[str]:
    """The parameter names of a function, or of a class's ``__init__``, read from its source."""
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            init = next(
                item
                for item in node.body
                if isinstance(item, ast.FunctionDef) and item.name == "__init__"
            )
            return [a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)]
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
    raise AssertionError(f"{name} not found in {module}")


@pytest.mark.parametrize("entry", sorted(mlproject_entry_points()))
def test_every_mlproject_parameter_is_passed_as_the_flag_of_its_own_name(entry: str) -> None:
    declared = mlproject_entry_points()[entry]
    command = " ".join(declared["command"].split())
    parser = _subparser(command)
    current = _first_spellings(parser)
    mismatched = []
    for flag, parameter in re.findall(r"(--[\w-]+) \{(\w+)\}", command):
        if flag != f"--{parameter.replace('_', '-')}" or current.get(flag) != flag:
            mismatched.append(f"{parameter} -> {flag} (current flag: {current.get(flag)})")
    assert mismatched == []
    unused = set(declared.get("parameters") or {}) - set(re.findall(r"\{(\w+)\}", command))
    assert unused == set()


def test_every_evaluator_config_key_is_spelt_as_its_mlproject_parameter() -> None:
    known, renamed = _evaluator_keys()
    parameters = _mlproject_parameters()
    shared = known - EVALUATOR_ONLY.keys() - renamed.keys()
    assert sorted(shared - parameters) == []
    assert set(renamed.values()) <= shared  # an old key names a key that exists
    assert "slice_by" in shared and renamed == {"slice_columns": "slice_by"}


@pytest.mark.parametrize(("module", "name"), PYTHON_SURFACES, ids=[n for _, n in PYTHON_SURFACES])
def test_python_parameters_use_the_option_names(module: str, name: str) -> None:
    known, renamed = _evaluator_keys()
    vocabulary = _mlproject_parameters() | _every_flag_name() | (known - renamed.keys())
    unknown = [
        parameter
        for parameter in _parameters(module, name)
        if parameter not in vocabulary | PYTHON_ONLY.keys() | renamed.keys()
    ]
    assert unknown == []


def test_each_renamed_flag_and_its_old_spelling_parse_alike() -> None:
    checked: set[str] = set()
    for entry in mlproject_entry_points().values():
        command = " ".join(entry["command"].split())
        parser = _subparser(command)
        spellings = _first_spellings(parser)
        for old, new in RENAMED_FLAGS.items():
            if new not in spellings:
                continue
            assert spellings[old] == new  # the old spelling is an alias of the same action
            action = next(a for a in parser._actions if new in a.option_strings)
            assert old in (action.help or "")  # --help says the old spelling still works
            checked.add(new)
    assert checked == set(RENAMED_FLAGS.values())


def test_prepare_and_import_bfcl_with_the_new_and_the_old_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = PROJECT / "examples" / "demo" / "data" / "raw.jsonl"
    written = {}
    for flags in (
        ("--raw-data", "--train-size", "--validation-size", "--test-size"),
        ("--raw", "--train", "--validation", "--test"),
    ):
        out = tmp_path / flags[0].strip("-")
        args = ["prepare", flags[0], str(raw), "--out", str(out), flags[1], "20", flags[2], "5"]
        assert main([*args, flags[3], "10"]) == 0
        written[flags[0]] = (out / "test.jsonl").read_bytes()
    assert written["--raw-data"] == written["--raw"]
    capsys.readouterr()
    for flag in ("--categories", "--category"):
        # Either spelling reaches the category check, which refuses the unknown one by name.
        out = tmp_path / f"bfcl{flag}" / "test.jsonl"
        assert main(["import-bfcl", str(tmp_path), flag, "nope", "--out", str(out)]) == 2
        assert "nope (not a BFCL v4 category)" in capsys.readouterr().err


def test_the_readme_lists_every_rename_in_its_changes_section() -> None:
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Changes\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, "README.md has no '## Changes' section"
    changes = match.group(1)
    _, renamed = _evaluator_keys()
    missing = [
        f"{old} -> {new}"
        for old, new in [*RENAMED_FLAGS.items(), *renamed.items()]
        if not re.search(rf"`{re.escape(old)}`[^\n]*`{re.escape(new)}`", changes)
        and not re.search(rf"`{re.escape(new)}`[^\n]*`{re.escape(old)}`", changes)
    ]
    assert missing == []
