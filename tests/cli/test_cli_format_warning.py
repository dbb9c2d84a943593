"""No silent mis-measurement: bare JSON scored as ``hermes`` is said plainly, everywhere.

A user ran BFCL with ``--output-format hermes`` on a model that writes bare
JSON: no output had a ``<tool_call>``, every irrelevance question passed and
the overall score was an artefact, with nothing printed to say so (issue 29,
items 1 and 5). Here the same happens to the bundled BFCL example and to the
CLI fixture, through ``score``, ``evaluate``, ``main`` and ``compare``; each
summary must warn before its table, mark irrelevance as not meaningful, and
the reports must carry the counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.cli._show import format_arm_summary
from sommelier_mlflow.data import ModelIdentity, read_test_split
from sommelier_mlflow.evaluation import read_evaluation_report
from sommelier_mlflow.generation import BackendOptions, BackendRequest, register_backend
from tests.cli.cli_helpers import (
    ADAPTER_OUTPUTS,
    BFCL_EXAMPLE,
    bfcl_example_split,
    compare_args,
    evaluate_args,
    examples,
    score_args,
    write_fixture,
)

EXAMPLE = BFCL_EXAMPLE
WARNING = "WARNING: --output-format hermes found its call syntax in 0 of"


class AnswersOptions(BackendOptions):
    """Where the answers are."""

    answers: str


@register_backend("answers_by_prompt", options=AnswersOptions)
class AnswersByPrompt:
    """Answers each prompt with the text a JSON file maps it to (a model that writes bare JSON)."""

    tokenizer = None

    def __init__(self, request: BackendRequest, options: AnswersOptions) -> None:
        self._answers: dict[str, str] = json.loads(Path(options.answers).read_text())
        self._identity = request.declared_identity()
        self._adapter = request.declared_adapter()

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> dict[str, str] | None:
        return self._adapter

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return [self._answers[prompt] for prompt in prompts]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "backend": "answers_by_prompt",
            "model_identity": self._identity.to_dict(),
            "adapter": self._adapter,
        }


@pytest.fixture(scope="module")
def bfcl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled BFCL example imported and formatted, with its arms' outputs by prompt."""
    root = tmp_path_factory.mktemp("bfcl")
    split = bfcl_example_split(root)
    # The adapter's outputs: bare JSON lists of calls, and "[]" on irrelevance.
    prompts = {
        ex.example_id: ex.prompt_text
        for ex in read_test_split(split, slice_by=["category"]).examples
    }
    rows = [
        json.loads(line) for line in (EXAMPLE / "outputs_adapter.jsonl").read_text().splitlines()
    ]
    answers = root / "answers.json"
    answers.write_text(json.dumps({prompts[row["example_id"]]: row["raw_text"] for row in rows}))
    return {"split": split, "answers": answers}


def _table(printed: str) -> list[str]:
    """The comparison table's header and rows, as ``main`` and ``compare`` print it."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("slice "))
    ends = (i for i in range(start, len(lines)) if not lines[i] or lines[i].startswith("matched"))
    end = next(ends, len(lines))
    return lines[start:end]


def _assert_columns_hold(table: list[str]) -> None:
    header, rows = table[0], table[1:]
    metric_at, base_end = header.index("metric"), header.index("base") + len("base")
    adapter_end = header.index("adapter") + len("adapter")
    assert rows
    for row in rows:
        assert row[metric_at - 1] == " " and row[metric_at] != " ", row
        assert re.fullmatch(r" \d\.\d{3}", row[base_end - 6 : base_end]), row
        assert re.fullmatch(r" \d\.\d{3}", row[adapter_end - 6 : adapter_end]), row


def _score_bfcl(bfcl: dict[str, Path], kind: str, out: Path, output_format: str = "hermes") -> int:
    args = ["score", "--test-split", str(bfcl["split"]), "--scoring", "bfcl"]
    args += ["--output-format", output_format]
    args += ["--precomputed", str(EXAMPLE / f"outputs_{kind}.jsonl")]
    args += ["--model-kind", kind, "--model", "example/model", "--max-new-tokens", "256"]
    args += ["--batch-size", "1", "--out", str(out), "--resamples", "100"]
    return main([*args, *(["--adapter", "example-adapter"] if kind == "adapter" else [])])


def test_bfcl_scored_as_hermes_warns_in_score_compare_and_the_reports(
    bfcl: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score_bfcl(bfcl, "base", tmp_path / "base") == 0
    capsys.readouterr()
    assert _score_bfcl(bfcl, "adapter", tmp_path / "adapter") == 0
    lines = capsys.readouterr().out.splitlines()
    # The warning comes right after the report path, before any number.
    assert lines[1].startswith(f"  {WARNING} 30 outputs, while json reads tool calls in 24 of them")
    assert lines[2] == "  hint: 24 of 30 outputs decode as json; did you mean --output-format json?"
    assert lines[3].split() == ["bfcl_ast_accuracy", "0.2000", "(6/30)"]
    irrelevance = [line for line in lines if "irrelevance (own line)" in line]
    assert len(irrelevance) == 2
    assert all(
        "(6/6)  not meaningful: hermes found its call syntax" in line for line in irrelevance
    )
    # The arm's metrics are one column whatever the metric's length.
    values_at = {re.search(r" \d\.\d{4} \(", line).start() for line in lines[3:6]}  # type: ignore[union-attr]
    assert len(values_at) == 1, lines[3:6]

    report = json.loads((tmp_path / "adapter" / "evaluation_report.json").read_text())
    assert report["format_mismatch"] == {
        "output_format": "hermes",
        "outputs": 30,
        "syntax_found": 0,
        "other_format": "json",
        "other_reads_calls": 24,
    }
    # `show` of the arm's run prints the same warning and hint before its table.
    shown = format_arm_summary(
        read_evaluation_report(tmp_path / "adapter" / "evaluation_report.json")
    )
    shown_lines = shown.splitlines()
    assert shown_lines[1].startswith(f"{WARNING} 30 outputs, while json reads tool calls in 24")
    assert shown_lines[3].startswith("slice ") and shown_lines[4].startswith("overall ")

    assert main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp")) == 0
    printed = capsys.readouterr().out
    # `compare` prints the comparison table as `main` does, warnings first.
    assert printed.startswith(f"{WARNING.replace(':', ' (base arm):', 1)} 30 outputs")
    assert f"{WARNING.replace(':', ' (adapter arm):', 1)} 30 outputs" in printed
    table = _table(printed)
    assert printed.index("WARNING") < printed.index(table[0])
    _assert_columns_hold(table)
    marked = [row for row in table if "not meaningful" in row]
    assert marked and all(row.startswith("category:irrelevance ") for row in marked)
    assert all(row.endswith("not meaningful for base and adapter (see WARNING)") for row in marked)

    comparison = tmp_path / "cmp" / "comparison"
    runs = json.loads((comparison / "comparison_report.json").read_text())["runs"]
    assert runs["adapter"]["format_mismatch"] == report["format_mismatch"]
    assert runs["base"]["format_mismatch"]["other_reads_calls"] == 25
    assert runs["base"]["format_hint"].startswith("25 of 30 outputs decode as json")
    markdown = (comparison / "comparison_report.md").read_text()
    assert markdown.index("## Output format warnings") < markdown.index("## Identity")
    assert "- **adapter arm:** --output-format hermes found its call syntax in 0 of 30" in markdown
    assert "- base arm hint: 25 of 30 outputs decode as json" in markdown
    assert (
        "| irrelevance (own line) | 1.0000 (6/6), not meaningful | 1.0000 (6/6), not meaningful |"
        in markdown
    )


def test_compare_prints_mains_table_whose_columns_hold_for_bfcl_category_slices(
    bfcl: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The right format this time: no warning, and the table `main` prints.
    for kind in ("base", "adapter"):
        assert _score_bfcl(bfcl, kind, tmp_path / kind, output_format="json") == 0
    capsys.readouterr()
    assert main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp")) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("slice ") and "WARNING" not in printed and "hint" not in printed
    table = _table(printed)
    _assert_columns_hold(table)
    rows = {tuple(row.split()[:4]) for row in table[1:]}
    assert ("overall", "bfcl_ast_accuracy", "0.633", "0.967") in rows  # 19/30 and 29/30
    assert ("category:parallel_multiple", "bfcl_leaderboard_accuracy") in {r[:2] for r in rows}
    assert printed.endswith("comparison_report.md\n")


def test_bfcl_main_warns_before_its_table_and_its_columns_hold(
    bfcl: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["main", "--test-split", str(bfcl["split"]), "--model", "example/model"]
    args += ["--adapter", "example-adapter", "--backend", "answers_by_prompt"]
    args += ["--backend-option", f"answers={bfcl['answers']}", "--scoring", "bfcl"]
    args += ["--output-format", "hermes", "--out", str(tmp_path / "out"), "--resamples", "100"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0].startswith("WARNING (base arm): --output-format hermes found its call syntax")
    assert lines[1].startswith("hint (base arm): 24 of 30 outputs decode as json")
    assert lines[2].startswith("WARNING (adapter arm): ")
    table = _table(printed)
    assert table[0] == lines[4]
    _assert_columns_hold(table)
    slices = {row.split()[0] for row in table[1:]}
    assert {"category:irrelevance", "category:parallel_multiple"} <= slices
    assert [row.split()[0] for row in table if "not meaningful" in row] == [
        "category:irrelevance"
    ] * 3
    markdown = (tmp_path / "out" / "comparison" / "comparison_report.md").read_text()
    assert "- **base arm:** --output-format hermes found its call syntax in 0 of 30" in markdown


def test_single_mode_evaluate_and_main_warn_and_calls_mode_score_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The CLI fixture's adapter answers, bare JSON calls, read as hermes.
    files = write_fixture(tmp_path / "in")
    outputs = {
        ex.prompt_text: ADAPTER_OUTPUTS[int(ex.example_id.split("-")[1])] for ex in examples()
    }
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(outputs))
    backend = ("--backend-option", f"answers={answers}", "--output-format", "hermes")
    assert main(evaluate_args(files["split"], tmp_path / "arm", "answers_by_prompt", *backend)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"  {WARNING} 8 outputs, while json reads tool calls in 8 of them")
    assert lines[3].split()[0] == "valid_json_rate"
    report = json.loads((tmp_path / "arm" / "evaluation_report.json").read_text())
    assert report["format_mismatch"]["other_reads_calls"] == 8

    args = ["main", "--test-split", str(files["split"]), "--model", "tiny/model"]
    args += ["--adapter", "example-adapter", "--backend", "answers_by_prompt", *backend]
    assert main([*args, "--out", str(tmp_path / "main"), "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("WARNING (base arm): --output-format hermes found its call syntax")
    assert "\nWARNING (adapter arm): " in printed
    assert printed.index("WARNING (adapter arm)") < printed.index("\nslice ")

    score = score_args(files, "adapter", tmp_path / "calls")
    assert main([*score, "--scoring", "calls", "--output-format", "hermes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"  {WARNING} 8 outputs")
    assert lines[3].split()[0] == "call_set_exact_match"


def test_calls_only_in_reasoning_are_noted_in_score_show_and_compare(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.cli.cli_helpers import declared_score_args, precomputed_rows, write_jsonl

    def hermes(text: str) -> str:
        return f"<tool_call>\n{text}\n</tool_call>" if text.startswith("{") else text

    outputs = {index: hermes(text) for index, text in ADAPTER_OUTPUTS.items()}
    outputs[0] = f"<think>I could write {outputs[0]}</think>No call needed."  # only thought
    for kind in ("base", "adapter"):
        precomputed = write_jsonl(tmp_path / f"{kind}.jsonl", precomputed_rows(outputs))
        args = [*declared_score_args(files["split"], kind), "--output-format", "hermes"]
        args += ["--precomputed", str(precomputed), "--out", str(tmp_path / kind)]
        assert main([*args, *(["--adapter", "my-lora"] if kind == "adapter" else [])]) == 0
    note = (
        "2 of 8 outputs made calls only inside their reasoning (<think>…</think>, "
        "or the format's reasoning channel), which do not count as answers"
    )
    hint = "hint: 2 of 8 outputs decode as json; did you mean --output-format json?"
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == [f"  {hint}", f"  note: {note}"]  # after the hint, before any number
    shown = format_arm_summary(read_evaluation_report(tmp_path / "base" / "evaluation_report.json"))
    assert shown.splitlines()[1:3] == [hint, f"note: {note}"]
    assert main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp")) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == f"note (base arm): {note}" and printed[3] == f"note (adapter arm): {note}"
    runs = json.loads((tmp_path / "cmp" / "comparison" / "comparison_report.json").read_text())[
        "runs"
    ]
    assert runs["base"]["calls_in_reasoning"] == runs["adapter"]["calls_in_reasoning"] == 2
