"""Scoring the new formats: calls written while reasoning counted and kept; bare text typed."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from sommelier_mlflow.data import TestSplit
from sommelier_mlflow.errors import InvariantViolationError, SommelierError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    compare_reports,
    read_evaluation_report,
    render_comparison_markdown,
    write_evaluation_report,
)
from tests.evaluation.test_calls_scoring import ADAPTER, _score, calls_split
from tests.support.decoder_texts import glm45_call, qwen3_xml_call

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
CALL = f"<tool_call>\n{json.dumps(W)}\n</tool_call>"
THOUGHT_ONLY = f"<think>I could call {CALL} but will not.</think>No call needed."


def _hermes(text: str) -> str:
    calls = json.loads(text) if text.startswith("[") else []
    return "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls) or text


def test_thought_only_calls_are_counted_kept_and_checked(tmp_path: Path) -> None:
    texts = {example_id: _hermes(text) for example_id, text in ADAPTER.items()}
    texts["a3"] = THOUGHT_ONLY  # its gold is no call: it passes, thinking or not
    texts["b3"] = "<think>" + CALL + "</think>" + CALL  # answered too: not counted
    run = _score("adapter", texts, output_format="hermes")
    assert run.scored.calls_in_reasoning == 1
    path = write_evaluation_report(tmp_path / "evaluation_report.json", run)
    document = json.loads(path.read_text())
    assert document["calls_in_reasoning"] == 1
    arm = read_evaluation_report(path)
    assert arm.calls_in_reasoning == 1
    assert path.read_bytes() == write_evaluation_report(tmp_path / "again.json", arm).read_bytes()

    # A count no scoring gives (more than the rows scored no_json, or zero) is refused.
    for wrong in (2, 0):
        document["calls_in_reasoning"] = wrong
        path.write_text(json.dumps(document))
        with pytest.raises(InvariantViolationError, match="calls_in_reasoning"):
            read_evaluation_report(path)


def thought_only_arms() -> tuple[EvaluationReport, EvaluationReport]:
    """A base arm without reasoning-only calls and an adapter arm with one, in ``hermes``."""
    texts = {example_id: _hermes(text) for example_id, text in ADAPTER.items()}
    base = EvaluationReport.from_run(_score("base", texts, output_format="hermes"))
    texts["a3"] = THOUGHT_ONLY
    adapter = EvaluationReport.from_run(_score("adapter", texts, output_format="hermes"))
    return base, adapter


NOTE = (
    "1 of 6 outputs made calls only inside their reasoning (<think>…</think>, or the "
    "format's reasoning channel), which do not count as answers"
)


def test_the_comparison_report_carries_each_arms_count_and_checks_it() -> None:
    base, adapter = thought_only_arms()
    comparison = compare_reports(base, adapter, resamples=50)
    document = comparison.to_json()
    runs = document["runs"]
    assert runs["adapter"]["calls_in_reasoning"] == 1
    assert "calls_in_reasoning" not in runs["base"]  # none: left out, the bytes unchanged
    read = ComparisonReport.from_json(document)
    assert (read.runs["base"].calls_in_reasoning, read.runs["adapter"].calls_in_reasoning) == (0, 1)
    assert read.to_json() == document
    markdown = render_comparison_markdown(comparison)
    warnings = markdown.split("## Output format warnings\n\n", 1)[1].split("\n\n", 1)[0]
    assert warnings == "- adapter arm note: " + NOTE.replace("<", "&lt;").replace(">", "&gt;") + "."
    for wrong in (7, 0, -1, "1"):  # more than the arm's 6 outputs, none stored, not a count
        runs["adapter"]["calls_in_reasoning"] = wrong
        with pytest.raises(SommelierError, match=r"runs\.adapter\.calls_in_reasoning"):
            ComparisonReport.from_json(document)


def test_none_no_field_and_json_never_counts() -> None:
    run = _score("adapter", ADAPTER)  # json: no thoughts to look into
    assert run.scored.calls_in_reasoning == 0
    assert "calls_in_reasoning" not in EvaluationReport.from_run(run).to_json()
    texts = dict(ADAPTER, a3=THOUGHT_ONLY)
    assert _score("adapter", texts).scored.calls_in_reasoning == 0


XLAM_TOOLS = [
    {"name": "get_weather", "parameters": {"city": {"type": "str"}}},
    {"name": "convert", "parameters": {"amount": {"type": "int"}, "to": {"type": "str"}}},
]


def _typed_split() -> TestSplit:
    split = calls_split()
    examples = tuple(replace(example, tools=XLAM_TOOLS) for example in split.examples)
    return replace(split, examples=examples)


def _xml(calls: list[dict[str, object]], fmt: str) -> str:
    write = qwen3_xml_call if fmt == "qwen3_xml" else partial(glm45_call, compact=True)
    return "".join(write(c["name"], c["arguments"]) for c in calls)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["qwen3_xml", "glm45"])
def test_bare_text_values_are_typed_by_each_rows_tools_when_scored(fmt: str) -> None:
    # The adapter's answers (an integer amount among them) written as bare text: scored
    # through score_run, each value is typed by the row's own tools, so they score as json.
    texts = {
        key: _xml(json.loads(text) if text.startswith("[") else [], fmt) or text
        for key, text in ADAPTER.items()
    }
    typed = _score("adapter", texts, output_format=fmt, split=_typed_split())
    as_json = _score("adapter", ADAPTER, split=_typed_split())
    assert typed.scored.metrics == as_json.scored.metrics
    untyped = _score("adapter", texts, output_format=fmt)  # rows without tools: strings
    assert (
        untyped.scored.metrics["call_set_exact_match"]
        != as_json.scored.metrics["call_set_exact_match"]
    )
