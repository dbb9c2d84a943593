"""Clustered examples: turns of one conversation are resampled and tested together."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.evaluation import (
    BootstrapSettings,
    ComparisonReport,
    EvaluationReport,
    bootstrap_p_value,
    compare_reports_with_draws,
    derive_seed,
    mcnemar_exact,
    mcnemar_one_sided,
    paired_bootstrap_draws,
    parse_claims,
)
from sommelier_mlflow.evaluation._stats import (
    CLUSTER_TEST_METHOD,
    cluster_test_from_outcomes,
    sign_flip_p_values,
)
from tests.evaluation.report_docs import doc, markdown_of, typed

# Each English root is a turn of a two-turn conversation, and so is its French translation.
CONVERSATIONS = {
    "en-1": "c-a",
    "en-2": "c-a",
    "en-3": "c-b",
    "en-4": "c-b",
    "fr-1": "c-fa",
    "fr-2": "c-fa",
    "fr-3": "c-fb",
    "fr-4": "c-fb",
}


def _in_conversations(rows):
    return [
        replace(
            row, conversation_id=CONVERSATIONS[row.example_id], turn=2 - int(row.example_id[-1]) % 2
        )
        if row.example_id in CONVERSATIONS
        else row
        for row in rows
    ]


def _arms(kit, resamples=400):
    split = kit.golden_split(_in_conversations)
    base = typed(doc(kit.score(split, kit.BASE_TEXTS, "base", resamples=resamples)))
    adapter = typed(doc(kit.score(split, kit.ADAPTER_TEXTS, "adapter", resamples=resamples)))
    return base, adapter


def _correlated(seed: int, conversations: int, turns: int):
    """Binary outcomes whose turns share their conversation's outcome (total correlation)."""
    rng = np.random.default_rng(seed)
    per_conversation_a = rng.random(conversations) < 0.5
    per_conversation_b = rng.random(conversations) < 0.6
    a = np.repeat(per_conversation_a, turns)[:, None].astype(np.int64)
    b = np.repeat(per_conversation_b, turns)[:, None].astype(np.int64)
    labels = np.repeat(np.arange(conversations), turns)
    return a, b, np.ones_like(a), labels


def test_clustered_intervals_are_wider_than_turn_level_ones_on_correlated_turns():
    a, b, den, labels = _correlated(3, conversations=60, turns=5)
    options = {"seed": 11, "resamples": 2000, "metric_names": ["exact"]}
    turns = paired_bootstrap_draws(a, den, b, den, **options).result.interval("exact")
    clustered = paired_bootstrap_draws(a, den, b, den, clusters=labels, **options).result
    interval = clustered.interval("exact")
    assert clustered.clusters == 60
    assert interval.estimate == turns.estimate
    # Five identical turns per conversation: the honest interval is about sqrt(5) times wider.
    assert (interval.upper - interval.lower) > 1.8 * (turns.upper - turns.lower)


def test_one_turn_per_conversation_resamples_exactly_as_rows():
    a, b, den, _ = _correlated(5, conversations=40, turns=1)
    options = {"seed": 2, "resamples": 300, "metric_names": ["exact"]}
    rows = paired_bootstrap_draws(a, den, b, den, **options)
    singletons = paired_bootstrap_draws(a, den, b, den, clusters=np.arange(40), **options)
    assert np.array_equal(rows.differences, singletons.differences)
    assert rows.result.clusters is None and singletons.result.clusters == 40


def test_sign_flip_p_value_on_a_hand_computable_case():
    # Three conversations: arm b wins two turns of the first, one of the second,
    # arm a one turn of the third. d = (2, 1, -1), T = 2. Over the 8 sign vectors
    # sum(s * d) is 4, 2, 2, 0, 0, -2, -2, -4: six have |S| >= 2, two have S >= 2.
    a = np.array([0, 0, 1, 0, 1, 1], dtype=bool)
    b = np.array([1, 1, 1, 1, 0, 1], dtype=bool)
    labels = ["x", "x", "y", "y", "z", "z"]
    result = cluster_test_from_outcomes(a, b, labels)
    assert result.method == CLUSTER_TEST_METHOD
    assert (result.b, result.c, result.n, result.clusters) == (1, 3, 6, 3)
    assert result.differences == ((-1, 1), (1, 1), (2, 1))
    assert result.p_value == 0.75
    assert result.one_sided() == Fraction(3, 8)
    # Per turn, McNemar sees b = 1, c = 3 as four independent pairs: p = 0.625.
    assert mcnemar_exact(1, 3) == 0.625


@pytest.mark.parametrize(("b", "c"), [(3, 9), (10, 4), (0, 0), (7, 7), (0, 12)])
def test_with_one_turn_per_conversation_the_test_is_mcnemars(b, c):
    table = tuple(item for item in ((-1, b), (1, c)) if item[1])
    two_sided, one_sided = sign_flip_p_values(table)
    assert two_sided == mcnemar_exact(b, c)
    assert one_sided == mcnemar_one_sided(b, c)


def test_the_large_sample_route_agrees_with_the_exact_count():
    table = ((-2, 150), (-1, 160), (1, 170), (2, 171))  # 651 conversations: float route
    exact_small = ((-2, 15), (-1, 16), (1, 17), (2, 25))
    assert sign_flip_p_values(table)[0] == pytest.approx(float(_enumerated(table)), rel=1e-9)
    assert sign_flip_p_values(exact_small)[0] == float(_enumerated(exact_small))


def _enumerated(table):
    """P(|S| >= |T|) by a plain dictionary convolution in exact fractions (the reference)."""
    distribution = {0: Fraction(1)}
    observed = 0
    for d, count in table:
        observed += d * count
        for _ in range(count):
            step: dict[int, Fraction] = {}
            for value, p in distribution.items():
                for signed in (d, -d):
                    step[value + signed] = step.get(value + signed, Fraction(0)) + p / 2
            distribution = step
    return min(Fraction(1), sum(p for v, p in distribution.items() if abs(v) >= abs(observed)))


def test_a_conversation_split_is_compared_by_conversation_and_claims_use_the_same_draws(kit):
    base, adapter = _arms(kit)
    spec = parse_claims(
        {
            "schema_version": "sommelier_mlflow.claims.v1",
            "claims": [
                {
                    "id": "gain",
                    "slice": OVERALL,
                    "metric": "full_call_exact_match",
                    "kind": "superiority",
                    "margin": 0.0,
                }
            ],
        },
        source="claims",
        sha256="0" * 64,
    )
    settings = BootstrapSettings(seed=7, resamples=400, confidence=0.95)
    report, draws = compare_reports_with_draws(base, adapter, settings, spec)
    overall = report.slices[OVERALL]
    # Six resampling units: c-a, c-b, c-fa, c-fb, and fr-5, fr-6 (each a unit alone).
    assert overall.delta.clusters == 6
    assert overall.mcnemar.method == CLUSTER_TEST_METHOD
    assert overall.mcnemar.clusters == 6
    # The draws behind the published interval are those of a clustered bootstrap
    # resampling the six conversations with the slice's documented seed ...
    labels = [base.clusters[row] for row in range(base.examples)]
    again = paired_bootstrap_draws(
        base.numerators,
        base.denominators,
        adapter.numerators,
        adapter.denominators,
        resamples=400,
        seed=derive_seed(7, f"delta/{OVERALL}"),
        metric_names=base.metric_names,
        clusters=labels,
    )
    assert np.array_equal(draws[OVERALL].differences, again.differences)
    assert overall.delta == again.result
    # ... and the claim's p-value is counted from those very draws.
    (decision,) = report.claims.decisions
    column = again.column("full_call_exact_match")
    assert decision.p_value == float(bootstrap_p_value(column, 0.0))
    assert decision.draws_at_or_below == int(np.count_nonzero(column <= 1e-12))


def test_language_gaps_resample_the_roots_conversations(kit):
    base, _ = _arms(kit)
    gap = base.paired_slices["fr"]
    assert gap.bootstrap.clusters == 2  # roots en-1..en-4 lie in conversations c-a and c-b
    roots = [base.example_ids.index(root) for root, _ in gap.pairs]
    targets = [base.example_ids.index(target) for _, target in gap.pairs]
    again = paired_bootstrap_draws(
        base.numerators[roots],
        base.denominators[roots],
        base.numerators[targets],
        base.denominators[targets],
        resamples=400,
        seed=derive_seed(0, "gap/base/fr"),
        metric_names=base.metric_names,
        clusters=[CONVERSATIONS[base.example_ids[row]] for row in roots],
    ).result
    assert gap.bootstrap == again


def test_clustered_reports_record_the_method_and_read_back_byte_for_byte(kit):
    base, adapter = _arms(kit)
    document = base.to_json()
    rows = {row["example_id"]: row for row in document["per_example"]}
    assert rows["en-1"]["conversation_id"] == "c-a"
    assert "conversation_id" not in rows["fr-5"]
    provenance = document["paired_slices"]["fr"]["bootstrap"]
    assert (provenance["resampling"], provenance["clusters"]) == ("conversation", 2)
    assert canonical_json(EvaluationReport.from_json(document).to_json()) == canonical_json(
        document
    )
    settings = BootstrapSettings(seed=1, resamples=400, confidence=0.95)
    comparison = compare_reports_with_draws(base, adapter, settings)[0].to_json()
    entry = comparison["slices"][OVERALL]
    assert entry["bootstrap"]["resampling"] == "conversation"
    assert entry["mcnemar"]["method"] == CLUSTER_TEST_METHOD
    assert ComparisonReport.from_json(comparison).to_json() == comparison
    markdown = markdown_of(comparison)
    assert "resampling 6 conversations" in markdown
    assert "Sign-flip test over 6 conversations on full_call_exact_match" in markdown
    # The reader recomputes the test from its differences: an edited p-value is refused.
    entry["mcnemar"]["p_value"] = 0.123
    with pytest.raises(Exception, match="p_value"):
        ComparisonReport.from_json(comparison)


def test_clustered_comparisons_are_deterministic_for_a_seed(kit):
    base, adapter = _arms(kit)
    settings = BootstrapSettings(seed=3, resamples=300, confidence=0.95)
    first = compare_reports_with_draws(base, adapter, settings)[0].to_json()
    second = compare_reports_with_draws(*_arms(kit), settings)[0].to_json()
    assert canonical_json(first) == canonical_json(second)


def test_single_turn_reports_carry_no_clustering_fields(kit):
    split = kit.golden_split()
    document = doc(kit.score(split, kit.BASE_TEXTS, "base", resamples=50))
    text = canonical_json(document)
    assert "conversation" not in text and "clusters" not in text
    adapter = typed(doc(kit.score(split, kit.ADAPTER_TEXTS, "adapter", resamples=50)))
    settings = BootstrapSettings(seed=1, resamples=50, confidence=0.95)
    comparison = compare_reports_with_draws(typed(document), adapter, settings)[0]
    assert comparison.slices[OVERALL].mcnemar.method == "exact_binomial_two_sided"
    assert "clusters" not in canonical_json(comparison.to_json())
