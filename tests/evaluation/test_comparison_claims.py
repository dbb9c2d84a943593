"""Claims inside the comparison: same intervals, a verdict table, checks before any resampling."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import ComparisonRefusedError, DataError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    compare_reports,
    parse_claims,
    read_claims,
    render_comparison_markdown,
)
from tests.evaluation.report_docs import typed

CLAIMS: dict[str, Any] = {
    "schema_version": "sommelier_mlflow.claims.v1",
    "claims": [
        {
            "id": "overall-gain",
            "slice": "overall",
            "metric": "valid_json_rate",
            "kind": "superiority",
            "margin": 0.0,
        },
        {
            "id": "fr-holds",
            "slice": "fr",
            "metric": "argument_f1",
            "kind": "non_inferiority",
            "margin": 0.05,
        },
        {
            "id": "en-leap",
            "slice": "en",
            "metric": "full_call_exact_match",
            "kind": "superiority",
            "margin": 0.5,
        },
    ],
}


def _spec(**changes: Any) -> Any:
    return parse_claims({**CLAIMS, **changes}, source="claims.json", sha256="c" * 64)


@pytest.fixture(scope="module")
def reports(kit):
    base, adapter = kit.golden_reports(resamples=200)
    return typed(base, "base report"), typed(adapter, "adapter report")


def _compare(reports, **options: Any) -> dict[str, Any]:
    base, adapter = reports
    return compare_reports(base, adapter, **options).to_json()


def test_claims_leave_every_published_number_unchanged(reports) -> None:
    plain = _compare(reports, seed=5, resamples=400)
    claimed = _compare(reports, seed=5, resamples=400, claims=_spec())
    assert set(claimed) - set(plain) == {"claims"}
    for key in plain:
        assert canonical_json(claimed[key]) == canonical_json(plain[key]), key


def test_verdict_rows_quote_the_published_estimate_and_interval(reports) -> None:
    report = _compare(reports, seed=5, resamples=400, claims=_spec())
    claims = report["claims"]
    assert claims["schema_version"] == "sommelier_mlflow.claims.v1"
    assert claims["alpha"] == 0.05
    assert claims["sha256"] == "c" * 64
    assert claims["registration"] == {"checked": False}
    for row in claims["claims"]:
        delta = report["slices"][row["slice"]]["delta"][row["metric"]]
        assert (row["estimate"], row["lower"], row["upper"]) == (
            delta["value"],
            delta["lower"],
            delta["upper"],
        )
        assert row["resamples"] == 400
        assert row["p_value"] <= row["adjusted_p_value"] <= 1
    decisions = {row["id"]: row["decision"] for row in claims["claims"]}
    # The adapter gains 0.25 on en full-call match; a 0.5 margin cannot be met.
    assert decisions["en-leap"] == "not_supported"
    assert claims["verdict"] == "not_supported"


def test_markdown_shows_the_verdict_table(reports) -> None:
    report = compare_reports(*reports, seed=5, resamples=400, claims=_spec())
    text = render_comparison_markdown(report)
    assert "## Preregistered claims: verdict NOT SUPPORTED" in text
    assert report.claims is not None
    for decision in report.claims.decisions:
        claim = decision.claim
        assert f"| `{claim.id}` | {claim.slice} | {claim.metric} |" in text
    assert "non-inferiority: delta > -0.0500" in text
    assert "Preregistration: not checked" in text
    assert text.index("Preregistered claims") < text.index("Adapter minus base, per slice")
    plain = compare_reports(*reports, seed=5, resamples=400)
    assert "Preregistered claims" not in render_comparison_markdown(plain)


@pytest.mark.parametrize(
    ("change", "error", "named"),
    [
        ({"slice": "de"}, DataError, "unknown slice 'de'"),
        ({"metric": "bleu"}, DataError, "unknown metric 'bleu'"),
    ],
)
def test_unknown_slice_or_metric_is_named(reports, change, error, named) -> None:
    claims = [{**CLAIMS["claims"][0], **change}]
    with pytest.raises(error, match=named):
        compare_reports(*reports, claims=_spec(claims=claims))


def test_a_preregistered_seed_must_be_the_comparison_seed(reports) -> None:
    with pytest.raises(ComparisonRefusedError, match="--seed 3"):
        compare_reports(*reports, seed=5, resamples=400, claims=_spec(seed=3))
    report = compare_reports(*reports, seed=3, resamples=400, claims=_spec(seed=3))
    assert report.bootstrap.seed == 3


def test_the_reader_recomputes_the_verdict_and_refuses_an_edited_one(reports) -> None:
    document = _compare(reports, seed=5, resamples=400, claims=_spec())
    read = ComparisonReport.from_json(document)
    assert read.claims is not None
    assert read.to_json() == document  # reads and rewrites the same document
    flipped = json.loads(json.dumps(document))
    row = next(r for r in flipped["claims"]["claims"] if r["decision"] == "not_supported")
    row["decision"] = "supported"
    with pytest.raises(InvariantViolationError, match="decision"):
        ComparisonReport.from_json(flipped)
    # An alpha just above one claim's adjusted p-value would support it: the
    # stored decisions no longer follow from the counts.
    rows = document["claims"]["claims"]
    refused = min(r["adjusted_p_value"] for r in rows if r["decision"] == "not_supported")
    assert refused < 1
    loosened = json.loads(json.dumps(document))
    loosened["claims"]["alpha"] = (refused + 1) / 2
    with pytest.raises(InvariantViolationError):
        ComparisonReport.from_json(loosened)
    unknown = json.loads(json.dumps(document))
    unknown["claims"]["claims"][0]["note"] = "x"
    with pytest.raises(DataError, match="note"):
        ComparisonReport.from_json(unknown)


def test_demo_claims_file_is_valid() -> None:
    from pathlib import Path

    demo = Path(__file__).resolve().parents[2] / "examples" / "demo" / "claims.json"
    spec = read_claims(demo)
    assert [(c.id, c.slice, c.kind, c.margin) for c in spec.claims] == [
        ("fr-gain", "fr", "superiority", 0.0),
        ("en-holds", "en", "non_inferiority", 0.01),
    ]
