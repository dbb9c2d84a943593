"""import-bfcl: BFCL v4 questions and possible answers become one test split, or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import (
    BFCL_DROP_SUMMARY_SCHEMA,
    TEST_EXAMPLE_SCHEMA,
    import_bfcl,
    read_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError


def _function(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} does things.",
        "parameters": {"type": "dict", "properties": properties, "required": required},
    }


AREA = _function(
    "geometry.area",
    {
        "base": {"type": "float", "description": "The base."},
        "corners": {"type": "tuple", "items": {"type": "integer"}, "description": "Corners."},
        "style": {
            "type": "dict",
            "description": "Drawing style.",
            "properties": {"color": {"type": "string"}, "payload": {"type": "any"}},
        },
        "unit": {"type": "string", "description": "The unit.", "enum": ["cm", "m"]},
    },
    ["base"],
)
WEATHER = _function("get_weather", {"city": {"type": "string"}}, ["city"])


def _question(qid: str, functions: list[dict[str, Any]], *turn: dict[str, str]) -> dict[str, Any]:
    return {
        "id": qid,
        "question": [list(turn) or [{"role": "user", "content": "hi"}]],
        "function": functions,
    }


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _write(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    _write(
        folder / "BFCL_v4_simple_python.json",
        [
            _question("simple_python_0", [AREA], _user("Area of base 3?")),
            _question(
                "simple_python_1",
                [AREA],
                {"role": "system", "content": "Be brief."},
                _user("Area of base 4 in cm?"),
            ),
            _question(
                "simple_python_2",
                [AREA],
                _user("first"),
                {"role": "assistant", "content": "?"},
                _user("second"),
            ),
        ],
    )
    _write(
        folder / "possible_answer" / "BFCL_v4_simple_python.json",
        [
            {"id": "simple_python_0", "ground_truth": [{"geometry.area": {"base": [3.0, 3]}}]},
            {
                "id": "simple_python_1",
                "ground_truth": [{"geometry.area": {"base": [4.0], "unit": ["cm", ""]}}],
            },
            {"id": "simple_python_2", "ground_truth": [{"geometry.area": {"base": [1.0]}}]},
        ],
    )
    _write(
        folder / "BFCL_v4_irrelevance.json",
        [_question("irrelevance_0", [WEATHER], _user("Tell me a joke."))],
    )
    return folder


def _read_split(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_questions_become_split_rows_with_json_schema_tools_and_verbatim_answers(
    data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "bfcl.jsonl"
    result = import_bfcl(data_dir, out, categories=["simple_python", "irrelevance"])

    rows = _read_split(out)
    assert [row["example_id"] for row in rows] == [
        "simple_python_0",
        "simple_python_1",
        "irrelevance_0",
    ]
    first = rows[0]
    assert first["schema_version"] == TEST_EXAMPLE_SCHEMA
    assert (first["language"], first["category"]) == ("en", "simple_python")
    assert first["query"] == "Area of base 3?"
    (tool,) = first["tools"]
    assert tool["name"] == "geometry.area" and tool["description"] == "geometry.area does things."
    params = tool["parameters"]
    assert params["type"] == "object" and params["required"] == ["base"]
    props = params["properties"]
    assert props["base"] == {"type": "number", "description": "The base."}
    assert props["corners"]["type"] == "array" and props["corners"]["items"] == {"type": "integer"}
    assert props["style"]["type"] == "object"
    assert props["style"]["properties"]["payload"] == {}  # `any`: no type at all
    assert props["unit"]["enum"] == ["cm", "m"]
    # The possible answer as an answer key: acceptable values verbatim, BFCL's type kept.
    assert first["gold_calls"] == [
        {
            "name": "geometry.area",
            "arguments": {
                "base": {"acceptable": [3.0, 3], "bfcl_type": ["float"], "required": True}
            },
        }
    ]
    assert rows[1]["gold_calls"][0]["arguments"]["unit"] == {
        "acceptable": ["cm", ""],
        "bfcl_type": ["string"],
        "required": False,
    }
    assert rows[1]["query"] == "Area of base 4 in cm?"  # the system turn is not the query
    assert rows[2]["gold_calls"] == []  # irrelevance: no call is right
    split = read_test_split(out, slice_by=["category"])  # an ordinary test split
    assert [dict(e.slice_values)["category"] for e in split.examples] == [
        "simple_python",
        "simple_python",
        "irrelevance",
    ]

    summary = json.loads(result.drop_summary_path.read_text(encoding="utf-8"))
    assert result.drop_summary_path == tmp_path / "out" / "bfcl.drop_summary.json"
    assert summary["schema_version"] == BFCL_DROP_SUMMARY_SCHEMA
    assert summary["read"] == {"simple_python": 3, "irrelevance": 1}
    assert summary["dropped"]["simple_python"]["not_one_user_turn"] == 1
    assert summary["kept"] == {"simple_python": 2, "irrelevance": 1}
    assert summary["kept_total"] == 3
    assert set(summary["files"]["simple_python"]) == {"questions", "possible_answers"}
    assert summary["dropped_questions"] == [
        {
            "category": "simple_python",
            "id": "simple_python_2",
            "line": 3,
            "reason": "not_one_user_turn",
            "detail": "is not one user turn (optionally after one system turn)",
        }
    ]


def test_strict_stops_at_the_first_skipped_question_naming_file_line_and_reason(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "split.jsonl"
    argv = ["import-bfcl", str(data_dir), "--categories", "simple_python", "--out", str(out)]
    assert main([*argv, "--strict"]) == 2
    error = capsys.readouterr().err
    assert "BFCL_v4_simple_python.json:3" in error
    assert "'simple_python_2' is skipped: not_one_user_turn" in error
    assert not out.exists()


@pytest.mark.parametrize(
    ("category", "named"),
    [
        ("multi_turn_composite", "multi_turn_composite (not a BFCL v4 category)"),
        ("simple_java", "simple_java (uses Java's types)"),
        ("live_relevance", "live_relevance"),
        ("memory", "memory"),
        ("web_search", "web_search"),
        ("format_sensitivity", "format_sensitivity"),
        ("simple_javascript", "simple_javascript"),
        ("made_up", "made_up (not a BFCL v4 category)"),
    ],
)
def test_categories_the_ast_rules_cannot_score_exit_2_naming_them(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], category: str, named: str
) -> None:
    out = tmp_path / "split.jsonl"
    code = main(
        ["import-bfcl", str(data_dir), "--category", f"simple_python,{category}", "--out", str(out)]
    )
    assert code == 2
    assert named in capsys.readouterr().err
    assert not out.exists()


def test_cli_imports_repeated_and_comma_separated_categories(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "split.jsonl"
    code = main(
        [
            "import-bfcl",
            str(data_dir),
            "--category",
            "simple_python",
            "--category",
            "irrelevance,",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert len(_read_split(out)) == 3
    printed = capsys.readouterr().out
    assert "simple_python: 2 kept, 1 skipped" in printed
    assert "bfcl.drop_summary.json" not in printed and "split.drop_summary.json" in printed


def _break(data_dir: Path, relative: str, line: int, text: str) -> None:
    path = data_dir / relative
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


ANSWERS = "possible_answer/BFCL_v4_simple_python.json"
QUESTIONS = "BFCL_v4_simple_python.json"


@pytest.mark.parametrize(
    ("relative", "line", "text", "where", "message"),
    [
        (QUESTIONS, 2, '{"id": "simple_python_1", "question": [', QUESTIONS, "not valid JSON"),
        (
            ANSWERS,
            2,
            json.dumps({"id": "simple_python_9", "ground_truth": []}),
            ANSWERS,
            "does not line up",
        ),
        (
            QUESTIONS,
            1,
            json.dumps(
                _question("simple_python_0", [_function("f", {"x": {"type": "complex"}}, [])])
            ),
            QUESTIONS,
            "BFCL type 'complex'",
        ),
        (
            ANSWERS,
            1,
            json.dumps({"id": "simple_python_0", "ground_truth": [{"nope": {}}]}),
            ANSWERS,
            "which the question does not offer",
        ),
        (
            ANSWERS,
            1,
            json.dumps({"id": "simple_python_0", "ground_truth": [{"geometry.area": {"base": 3}}]}),
            ANSWERS,
            "list of values",
        ),
    ],
)
def test_bad_lines_exit_2_naming_file_and_line_and_nothing_is_written(
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    relative: str,
    line: int,
    text: str,
    where: str,
    message: str,
) -> None:
    _break(data_dir, relative, line, text)
    out = tmp_path / "out" / "split.jsonl"
    code = main(["import-bfcl", str(data_dir), "--category", "simple_python", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{data_dir / where}:{line}:" in err and message in err
    assert not out.exists() and not (tmp_path / "out" / "split.drop_summary.json").exists()


def test_a_question_without_its_possible_answer_names_the_question_line(
    data_dir: Path, tmp_path: Path
) -> None:
    answers = data_dir / ANSWERS
    answers.write_text("".join(answers.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(DataError, match=r"BFCL_v4_simple_python.json:3: .*has no possible answer"):
        import_bfcl(data_dir, tmp_path / "split.jsonl", categories=["simple_python"])


def test_an_answer_without_its_question_is_refused(data_dir: Path, tmp_path: Path) -> None:
    with (data_dir / ANSWERS).open("a") as handle:
        handle.write(json.dumps({"id": "simple_python_3", "ground_truth": []}) + "\n")
    with pytest.raises(DataError, match=r"possible_answer/BFCL_v4_simple_python.json:4: "):
        import_bfcl(data_dir, tmp_path / "split.jsonl", categories=["simple_python"])


def test_a_missing_folder_or_file_is_refused_and_an_old_split_survives(
    data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "split.jsonl"
    out.write_text("old\n")
    with pytest.raises(DataError, match="BFCL data folder not found"):
        import_bfcl(tmp_path / "nowhere", out)
    (data_dir / ANSWERS).unlink()
    with pytest.raises(DataError, match=r"possible_answer/BFCL_v4_simple_python.json: .*not found"):
        import_bfcl(data_dir, out, categories=["simple_python"])
    with pytest.raises(DataError, match=r"BFCL_v4_multiple.json: .*not found"):
        import_bfcl(data_dir, out, categories=["irrelevance", "multiple"])
    assert out.read_text() == "old\n"


def test_naming_a_category_twice_is_a_config_error(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="more than once: irrelevance"):
        import_bfcl(data_dir, tmp_path / "s.jsonl", categories=["irrelevance", "irrelevance"])


def test_an_id_repeated_inside_a_category_is_refused_naming_file_and_both_lines(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Questions and answers both repeat line 1 as line 3, so they still line up:
    # only an id check sees it.
    for relative in (QUESTIONS, ANSWERS):
        _break(data_dir, relative, 3, (data_dir / relative).read_text().splitlines()[0])
    out = tmp_path / "split.jsonl"
    code = main(["import-bfcl", str(data_dir), "--category", "simple_python", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{data_dir / QUESTIONS}:3: " in err
    assert "'simple_python_0'" in err and "line 1" in err
    assert not out.exists()


def test_a_split_that_cannot_be_written_leaves_neither_file_and_names_the_users_path(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "split.jsonl"
    out.mkdir()  # the split cannot replace a folder; its summary must not appear alone
    summary = tmp_path / "split.drop_summary.json"
    summary.write_text("old summary\n")
    code = main(["import-bfcl", str(data_dir), "--category", "simple_python", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {out}: " in err and "staging" not in err
    assert summary.read_text() == "old summary\n" and out.is_dir()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "data",
        "split.drop_summary.json",
        "split.jsonl",
    ]


@pytest.mark.parametrize("relative", [QUESTIONS, ANSWERS, "BFCL_v4_irrelevance.json"])
def test_an_empty_category_file_is_refused_naming_the_file_and_category(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], relative: str
) -> None:
    (data_dir / relative).write_bytes(b"")  # a download cut off before its first line
    out = tmp_path / "split.jsonl"
    args = ["import-bfcl", str(data_dir), "--category", "simple_python,irrelevance"]
    code = main([*args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    category = "irrelevance" if "irrelevance" in relative else "simple_python"
    assert f"{data_dir / relative}" in err and f"BFCL category {category}" in err
    assert not out.exists()


def test_a_category_file_cut_off_mid_line_is_refused_naming_the_category(
    data_dir: Path, tmp_path: Path
) -> None:
    path = data_dir / "BFCL_v4_irrelevance.json"
    path.write_bytes(path.read_bytes()[:-20])
    cut_off = r"BFCL_v4_irrelevance.json:1: .*cut off.*\(BFCL category irrelevance\)"
    with pytest.raises(DataError, match=cut_off):
        import_bfcl(data_dir, tmp_path / "split.jsonl", categories=["irrelevance"])
