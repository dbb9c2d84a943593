"""An output format registered from this module reaches the CLI, the evaluator and the scorers.

Registering a format is the whole of adding one: no other change, and the
decoder's version is recorded next to the mode's parser version. The format
here keeps the deprecated one-argument ``decode(text)`` on purpose: existing
plugins written that way must keep working for one release.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.cli import main
from sommelier_mlflow.integration import score_predictions
from sommelier_mlflow.scorers import sommelier_scorers
from sommelier_mlflow.toolcalls import (
    PARSER_VERSION,
    CallsParseResult,
    OutputFormat,
    is_tool_call,
    register_output_format,
    unregister_output_format,
)
from tests.cli.cli_helpers import CITIES, gold, score_args, write_arm, write_fixture
from tests.integration.integration_helpers import Store, evaluate_in_run

NAME = "callline"


def _decode(text: str) -> CallsParseResult:
    """Every line ``CALL <json call>`` is one call; no such line is zero calls."""
    lines = [line[5:] for line in text.splitlines() if line.startswith("CALL ")]
    if not lines:
        return CallsParseResult("no_json")
    calls = []
    for line in lines:
        try:
            value = loads(line)
        except JSONDecodeError:
            return CallsParseResult("invalid_json")
        if not is_tool_call(value):
            return CallsParseResult("invalid_shape")
        calls.append(value)
    return CallsParseResult("ok", tuple(calls))


@pytest.fixture
def callline() -> Iterator[str]:
    # The one-argument decode(text) of the first plugins: still accepted for one
    # release, with a DeprecationWarning, and wrapped to the decode(text, tools) seam.
    with pytest.warns(DeprecationWarning, match=r"'callline': decode\(text\) is deprecated"):
        registered = register_output_format(
            OutputFormat(
                NAME, "One 'CALL <json>' line per call.", decode=_decode, version="callline.v1"
            )
        )
    assert registered.decode is not None
    assert registered.decode("CALL " + json.dumps(gold("Paris")), []) == _decode(
        "CALL " + json.dumps(gold("Paris"))
    )
    yield NAME
    unregister_output_format(NAME)


# Paris right; Oslo twice (single mode: not exactly one call); Rome as bare JSON
# (not this format: zero calls); Lyon right after some prose.
OUTPUTS = {
    0: "CALL " + json.dumps(gold("Paris")),
    1: "CALL " + json.dumps(gold("Oslo")) + "\nCALL " + json.dumps(gold("Oslo")),
    2: json.dumps(gold("Rome")),
    3: "Sure.\nCALL " + json.dumps(gold("Lyon")),
}


def test_a_registered_format_scores_through_the_cli(callline: str, tmp_path: Path) -> None:
    files = write_fixture(tmp_path)
    files["base"] = write_arm(tmp_path / "callline_arm", "base", OUTPUTS)
    out = tmp_path / "out"
    assert main([*score_args(files, "base", out), "--output-format", callline]) == 0
    report = json.loads((out / "evaluation_report.json").read_text())
    assert report["identity"]["parser_version"] == f"{PARSER_VERSION}+callline.v1"
    statuses = {row["example_id"]: row["parse_status"] for row in report["per_example"]}
    assert statuses == {
        f"{language}-{index}": status
        for index, status in enumerate(["ok", "invalid_shape", "no_json", "ok"])
        for language in ("en", "fr")
    }
    full_call = report["metrics"]["full_call_exact_match"]
    assert (full_call["numerator"], full_call["denominator"]) == (4, 8)
    # The json default reads the same files its own way (first JSON span), and says so.
    json_out = tmp_path / "json"
    assert main(score_args(files, "base", json_out)) == 0
    json_report = json.loads((json_out / "evaluation_report.json").read_text())
    assert json_report["identity"]["parser_version"] == PARSER_VERSION
    assert json_report["metrics"]["full_call_exact_match"]["numerator"] == 8


def test_an_unknown_format_is_exit_2_listing_the_registered_ones(
    callline: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_fixture(tmp_path)
    code = main([*score_args(files, "base", tmp_path / "o"), "--output-format", "nope"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown output format 'nope'" in err
    registered = err.rsplit("registered: ", 1)[1].strip().split(", ")
    assert callline in registered and "json" in registered
    assert registered == sorted(registered)


def _rows() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "output": [OUTPUTS[index] for index in range(len(CITIES))],
            "gold": [gold(city) for city in CITIES],
        }
    )


def test_a_registered_format_scores_through_the_evaluator(callline: str, store: Store) -> None:
    result, _ = evaluate_in_run(
        store, _rows(), evaluator_config={"sommelier": {"output_format": callline}}
    )
    assert result.metrics["overall/full_call_exact_match"] == 0.5
    assert result.metrics["overall/valid_json_rate"] == 0.5


def test_a_registered_format_scores_through_the_genai_scorers(callline: str) -> None:
    frame = _rows()
    scorers = {built.name: built for built in sommelier_scorers(output_format=callline)}
    outcome: list[Any] = [
        scorers["full_call_exact_match"](outputs=output, expectations={"gold_call": expected})
        for output, expected in zip(frame["output"], frame["gold"], strict=True)
    ]
    assert outcome == [True, False, False, True]
    direct = score_predictions(
        frame["output"].tolist(), frame["gold"].tolist(), output_format=callline
    )
    assert direct.report.parser_version == f"{PARSER_VERSION}+callline.v1"
    assert direct.report.to_json()["output_format"] == "callline"
    full_call = direct.report.metrics["full_call_exact_match"]
    assert (full_call.numerator, full_call.denominator) == (2, 4)
