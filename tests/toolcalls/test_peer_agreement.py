"""Every peer test output decodes to the peer's calls, or docs/formats.md says why not.

vLLM's and SGLang's tool-parser tests are data about how real models write
tool calls: ``tests/fixtures/peer_tool_parsers/`` holds their model outputs and
expected calls (inputs and expected calls only; sources and licence in its
README). Each case either decodes, in the product's format of that family, to
exactly the peer's calls (a peer's "no call" reads as abstaining), or is a row
of the disagreement table in ``docs/formats.md`` naming the strictness rule
that refuses it. A row for a case that now agrees is stale and fails too, and
the per-format summary there is recounted from the data.

A format the product does not register yet is skipped, naming it: its data
wait for its decoder.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, loads
from sommelier_mlflow.toolcalls import CallsParseResult, output_format, output_format_names

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tests" / "fixtures" / "peer_tool_parsers"
FORMATS_DOC = ROOT / "docs" / "formats.md"
#: Why a documented case differs: a rule the product keeps, an output the peer repairs or
#: reads as text, or a call to a tool the example does not offer (the peer drops it; the
#: product decodes it and scores its name as wrong).
KINDS = ("strictness", "malformed", "unoffered")
_ROW = re.compile(r"^\| `(?P<case>[\w.-]+/[\w.-]+)` \| (?P<peer>\w+) \| (?P<kind>\w+) \| .+ \|$")
_SUMMARY = re.compile(
    r"^\| `(?P<format>\w+)` \| (?P<cases>\d+) \| (?P<agree>\d+) \| (?P<strict>\d+) \| "
    r"(?P<malformed>\d+) \| (?P<unoffered>\d+) \|$"
)


@dataclass(frozen=True)
class PeerCase:
    """One peer test output and the calls the peer expects from it."""

    case_id: str
    peer: str
    output_format: str
    output: str
    calls: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]


def _cases() -> list[PeerCase]:
    cases = []
    for path in sorted(PEERS.glob("*.json")):
        data = loads(path.read_bytes())
        for case in data["cases"]:
            cases.append(
                PeerCase(
                    f"{path.stem}/{case['id']}",
                    data["peer"],
                    data["format"],
                    case["output"],
                    tuple(case["calls"]),
                    tuple(case.get("tools", data.get("tools", ()))),
                )
            )
    return cases


CASES = _cases()


def _documented() -> dict[str, str]:
    """The disagreement table of docs/formats.md: case id -> kind."""
    rows = {}
    for line in FORMATS_DOC.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            assert match["case"] not in rows, f"{match['case']} is listed twice"
            rows[match["case"]] = match["kind"]
    return rows


_SUMMARY_GROUPS = ("cases", "agree", "strict", "malformed", "unoffered")


def _summary() -> dict[str, tuple[int, ...]]:
    """The per-format summary of docs/formats.md: cases, agree, and each kind of difference."""
    rows = {}
    for line in FORMATS_DOC.read_text(encoding="utf-8").splitlines():
        match = _SUMMARY.match(line)
        if match:
            rows[match["format"]] = tuple(int(match[group]) for group in _SUMMARY_GROUPS)
    return rows


def _decode(name: str, text: str, tools: Sequence[Mapping[str, Any]]) -> CallsParseResult:
    """Decode as a user's run does, giving the example's tools where the decoder takes them."""
    decode = output_format(name).decode
    assert decode is not None
    parameters = inspect.signature(decode).parameters
    if "tools" in parameters:
        return decode(text, tools=tools)  # type: ignore[call-arg]
    if len(parameters) >= 2:
        return decode(text, tools)  # type: ignore[call-arg]
    return decode(text)


def _agrees(case: PeerCase, result: CallsParseResult) -> bool:
    if not case.calls:
        return result.abstained
    return result.status == "ok" and canonical_json(list(result.calls or ())) == canonical_json(
        list(case.calls)
    )


def _registered(case: PeerCase) -> None:
    if case.output_format not in output_format_names():
        pytest.skip(
            f"output format {case.output_format!r} is not registered in this tree; its peer "
            "cases run once its decoder lands"
        )


def test_the_data_name_their_sources_and_licence() -> None:
    assert len(CASES) >= 50
    readme = (PEERS / "README.md").read_text(encoding="utf-8")
    for path in sorted(PEERS.glob("*.json")):
        data = loads(path.read_bytes())
        assert data["licence"] == "Apache-2.0"
        assert data["peer"] in ("vllm", "sglang") and data["source"] and data["commit"]
        assert path.name in readme
        assert data["cases"] and len({case["id"] for case in data["cases"]}) == len(data["cases"])


@pytest.mark.parametrize("case", CASES, ids=[case.case_id for case in CASES])
def test_each_case_agrees_or_is_documented(case: PeerCase) -> None:
    _registered(case)
    documented = _documented()
    result = _decode(case.output_format, case.output, case.tools)
    if _agrees(case, result):
        assert case.case_id not in documented, (
            f"{case.case_id} now decodes to the peer's calls: remove its row from docs/formats.md"
        )
    else:
        assert case.case_id in documented, (
            f"{case.case_id} ({case.peer}) decodes to {result.status} {result.calls!r}, not to "
            f"the peer's {list(case.calls)!r}, and docs/formats.md does not say which rule "
            "refuses it"
        )
        assert documented[case.case_id] in KINDS


def test_every_documented_case_exists() -> None:
    known = {case.case_id for case in CASES}
    assert sorted(set(_documented()) - known) == []


def test_the_summary_recounts_the_data() -> None:
    documented, summary = _documented(), _summary()
    registered = set(output_format_names())
    counted: dict[str, tuple[int, ...]] = {}
    for name in sorted({case.output_format for case in CASES} & registered):
        cases = [case for case in CASES if case.output_format == name]
        kinds = [documented.get(case.case_id) for case in cases]
        counted[name] = (len(cases), kinds.count(None), *(kinds.count(kind) for kind in KINDS))
    assert counted, "no registered format has peer data"
    rows = "\n".join(
        f"| `{name}` | " + " | ".join(str(count) for count in counts) + " |"
        for name, counts in counted.items()
    )
    assert {name: summary.get(name) for name in counted} == counted, (
        f"docs/formats.md's peer summary should read:\n{rows}"
    )
