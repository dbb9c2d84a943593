from __future__ import annotations

import hashlib
import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError, DataError
from sommelier_mlflow.evaluation import (
    CLAIMS_SCHEMA,
    BootstrapDraws,
    ClaimsSpec,
    bootstrap_p_value,
    check_claims,
    decide_claims,
    holm_adjust,
    paired_bootstrap,
    paired_bootstrap_draws,
    parse_claims,
    read_claims,
)
from sommelier_mlflow.evaluation._claims import TIE_TOLERANCE

ISSUE_EXAMPLE: dict[str, Any] = {
    "schema_version": "sommelier_mlflow.claims.v1",
    "alpha": 0.05,
    "seed": 0,
    "resamples": 2000,
    "claims": [
        {
            "id": "fr-gain",
            "slice": "fr",
            "metric": "full_call_exact_match",
            "kind": "superiority",
            "margin": 0.0,
        },
        {
            "id": "en-holds",
            "slice": "en",
            "metric": "full_call_exact_match",
            "kind": "non_inferiority",
            "margin": 0.01,
        },
    ],
}
NAMES = ("full_call_exact_match", "argument_f1")


def _write(tmp_path: Path, document: object, name: str = "claims.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _example(**changes: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(ISSUE_EXAMPLE))
    document.update(changes)
    return document


def _with_claim(index: int, **changes: Any) -> dict[str, Any]:
    document = _example()
    document["claims"][index].update(changes)
    return document


# --- the file ------------------------------------------------------------------------------


def test_reads_the_issue_example_and_digests_its_exact_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path, ISSUE_EXAMPLE)
    spec = read_claims(path)
    assert spec.alpha == 0.05
    assert (spec.seed, spec.resamples) == (0, 2000)
    assert [claim.id for claim in spec.claims] == ["fr-gain", "en-holds"]
    assert spec.claims[0].threshold == 0.0
    assert spec.claims[1].threshold == -0.01
    assert spec.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # One more space is another file: preregistration is byte for byte.
    path.write_bytes(path.read_bytes() + b" ")
    assert read_claims(path).sha256 != spec.sha256
    assert ISSUE_EXAMPLE["schema_version"] == CLAIMS_SCHEMA


def test_alpha_seed_and_resamples_default(tmp_path: Path) -> None:
    document = _example()
    for key in ("alpha", "seed", "resamples"):
        del document[key]
    spec = read_claims(_write(tmp_path, document))
    assert spec.alpha == 0.05
    assert spec.seed is None
    assert spec.resamples is None


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (_example(extra=1), "'extra'"),
        (_with_claim(0, note="x"), "'note'"),
        (_with_claim(1, id="fr-gain"), "duplicate claim id 'fr-gain'"),
        (_with_claim(1, margin=-0.01), "margin"),
        (_with_claim(1, margin=True), "margin"),
        (_with_claim(1, margin=1.5), "margin"),
        (_with_claim(0, kind="equivalence"), "'equivalence'"),
        (_with_claim(0, id="has space"), "'has space'"),
        (_with_claim(0, slice=""), "'slice'"),
        (_example(alpha=0), "'alpha'"),
        (_example(alpha=1.0), "'alpha'"),
        (_example(seed=-1), "'seed'"),
        (_example(resamples=0), "'resamples'"),
        (_example(resamples=2000.0), "'resamples'"),
        (_example(schema_version="sommelier_mlflow.claims.v2"), "claims.v2"),
        (_example(claims=[]), "'claims'"),
        ([ISSUE_EXAMPLE], "one JSON object"),
    ],
)
def test_strict_validation_names_what_is_wrong(
    tmp_path: Path, document: object, named: str
) -> None:
    path = _write(tmp_path, document)
    with pytest.raises(DataError) as caught:
        read_claims(path)
    assert caught.value.exit_code == 2
    assert named in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_missing_claim_field_is_named(tmp_path: Path) -> None:
    document = _example()
    del document["claims"][0]["metric"]
    with pytest.raises(DataError, match="missing field 'metric'"):
        read_claims(_write(tmp_path, document))


def test_not_strict_json_and_missing_file_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "claims.json"
    path.write_text('{"schema_version": NaN}', encoding="utf-8")
    with pytest.raises(DataError, match="not strict JSON"):
        read_claims(path)
    with pytest.raises(DataError, match="cannot read"):
        read_claims(tmp_path / "absent.json")


def _spec(**changes: Any) -> ClaimsSpec:
    """The issue's claims with fields changed; a field given as None is left out."""
    document = _example(**changes)
    for key, value in changes.items():
        if value is None:
            del document[key]
    return parse_claims(document, source="claims.json", sha256="0" * 64)


def test_check_names_unknown_slices_and_metrics() -> None:
    spec = _spec()
    check_claims(spec, slices=("overall", "en", "fr"), metric_names=NAMES, seed=0, resamples=2000)
    with pytest.raises(DataError, match="unknown slice 'fr'") as caught:
        check_claims(spec, slices=("overall", "en"), metric_names=NAMES, seed=0, resamples=2000)
    assert caught.value.exit_code == 2
    with pytest.raises(DataError, match="unknown metric 'full_call_exact_match'"):
        check_claims(
            spec, slices=("overall", "en", "fr"), metric_names=("x",), seed=0, resamples=2000
        )


@pytest.mark.parametrize(("seed", "resamples", "field"), [(1, 2000, "seed"), (0, 999, "resamples")])
def test_check_refuses_a_seed_or_resample_count_other_than_preregistered(
    seed: int, resamples: int, field: str
) -> None:
    with pytest.raises(ComparisonRefusedError, match=f"--{field}") as caught:
        check_claims(
            _spec(),
            slices=("overall", "en", "fr"),
            metric_names=NAMES,
            seed=seed,
            resamples=resamples,
        )
    assert caught.value.exit_code == 4
    assert caught.value.field == f"claims.{field}"


def test_unregistered_seed_and_resamples_follow_the_comparison() -> None:
    document = _example()
    del document["seed"], document["resamples"]
    spec = parse_claims(document, source="c", sha256="")
    assert (spec.seed, spec.resamples) == (None, None)
    # Nothing preregistered: every comparison's own settings are accepted (a registered
    # seed 0 / 2000 resamples would refuse all but the second pair).
    for seed, resamples in ((7, 13), (0, 2000), (123456, 1)):
        check_claims(spec, slices=("en", "fr"), metric_names=NAMES, seed=seed, resamples=resamples)


# --- the decision --------------------------------------------------------------------------


def test_p_value_counts_draws_at_or_below_the_threshold_ties_against_the_claim() -> None:
    draws = np.array([-0.1, 0.0, 0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert bootstrap_p_value(draws, 0.0) == Fraction(1 + 3, 10)
    assert bootstrap_p_value(draws, -0.2) == Fraction(1, 10)
    assert bootstrap_p_value(draws, 1.0) == 1
    # A draw a few ulps above the threshold is a tie, not a win.
    assert bootstrap_p_value(np.array([0.01 + TIE_TOLERANCE / 4]), 0.01) == 1
    with pytest.raises(ConfigError):
        bootstrap_p_value(np.array([]), 0.0)


def _holm_by_definition(p_values: list[Fraction], alpha: Fraction) -> list[bool]:
    """Holm's step-down procedure as written in textbooks: reject until the first failure."""
    k = len(p_values)
    rejected = [False] * k
    for rank, index in enumerate(sorted(range(k), key=lambda i: p_values[i])):
        if p_values[index] > alpha / (k - rank):
            break
        rejected[index] = True
    return rejected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=2001), min_size=1, max_size=8),
    st.sampled_from([Fraction(1, 100), Fraction(1, 20), Fraction(1, 10)]),
)
def test_holm_adjusted_values_reject_exactly_what_the_step_down_rejects(
    counts: list[int], alpha: Fraction
) -> None:
    p_values = [Fraction(count, 2001) for count in counts]
    adjusted = holm_adjust(p_values)
    assert [value <= alpha for value in adjusted] == _holm_by_definition(p_values, alpha)
    assert all(p <= a <= 1 for p, a in zip(p_values, adjusted, strict=True))


def test_holm_hand_example() -> None:
    adjusted = holm_adjust([Fraction(1, 100), Fraction(4, 100), Fraction(3, 100)])
    assert adjusted == [Fraction(3, 100), Fraction(6, 100), Fraction(6, 100)]


def _paired(
    rng: np.random.Generator, n: int, p_base: float, p_adapter: float
) -> tuple[np.ndarray[Any, Any], ...]:
    base = np.stack([rng.random(n) < p_base, rng.random(n) < 0.5], axis=1).astype(np.int64)
    adapter = np.stack([rng.random(n) < p_adapter, rng.random(n) < 0.5], axis=1).astype(np.int64)
    ones = np.ones_like(base)
    return base, ones, adapter, ones


def _draws(seed: int, n: int, p_base: float, p_adapter: float) -> BootstrapDraws:
    base, den_b, adapter, den_a = _paired(np.random.default_rng(seed), n, p_base, p_adapter)
    return paired_bootstrap_draws(
        base, den_b, adapter, den_a, resamples=500, seed=seed, metric_names=NAMES
    )


def test_draws_reproduce_the_published_intervals_bit_for_bit() -> None:
    base, den_b, adapter, den_a = _paired(np.random.default_rng(3), 300, 0.4, 0.6)
    kwargs: dict[str, Any] = {"resamples": 400, "seed": 11, "metric_names": NAMES}
    draws = paired_bootstrap_draws(base, den_b, adapter, den_a, **kwargs)
    assert draws.result == paired_bootstrap(base, den_b, adapter, den_a, **kwargs)
    assert draws.differences.shape == (400, 2)
    tail = (1.0 - 0.95) / 2.0  # as the product computes it (not the literal 0.025)
    bounds = np.quantile(draws.differences, [tail, 1.0 - tail], axis=0, method="linear")
    for j, interval in enumerate(draws.result.intervals):
        assert (interval.lower, interval.upper) == (bounds[0, j], bounds[1, j])
    with pytest.raises(ValueError):
        draws.differences[0, 0] = 1.0
    with pytest.raises(KeyError):
        draws.column("nope")


def test_verdict_supports_a_real_gain_and_rejects_a_loss() -> None:
    draws = {
        "fr": _draws(1, 400, 0.30, 0.60),  # large real gain
        "en": _draws(2, 400, 0.70, 0.55),  # a real loss, far beyond the margin
    }
    verdict = decide_claims(_spec(seed=None, resamples=None), draws)
    by_id = {decision.claim.id: decision for decision in verdict.decisions}
    assert by_id["fr-gain"].supported
    assert by_id["fr-gain"].p_value == pytest.approx(1 / 501)
    assert not by_id["en-holds"].supported
    assert verdict.verdict == "not_supported"
    interval = draws["fr"].result.interval("full_call_exact_match")
    row = by_id["fr-gain"].to_dict()
    assert (row["estimate"], row["lower"], row["upper"]) == (
        interval.estimate,
        interval.lower,
        interval.upper,
    )
    assert row["threshold"] == 0.0
    assert row["decision"] == "supported"
    document = verdict.to_dict()
    assert document["verdict"] == "not_supported"
    assert document["sha256"] == "0" * 64
    assert [row["id"] for row in document["claims"]] == ["fr-gain", "en-holds"]


def test_verdict_is_supported_only_when_every_claim_is() -> None:
    draws = {"fr": _draws(1, 400, 0.30, 0.60), "en": _draws(2, 400, 0.55, 0.70)}
    verdict = decide_claims(_spec(), draws)
    assert [d.supported for d in verdict.decisions] == [True, True]
    assert verdict.verdict == "supported"


def test_holm_can_turn_a_marginal_claim_down_that_would_pass_alone() -> None:
    # Find a draw whose single-claim p-value lies in (alpha/2, alpha]: supported
    # alone, not when a second claim with a large p-value joins the family.
    for seed in itertools.count():
        candidate = _draws(seed, 200, 0.50, 0.58)
        p = bootstrap_p_value(candidate.column("full_call_exact_match"), 0.0)
        if Fraction(1, 40) < p <= Fraction(1, 20):
            break
    claim = _example()["claims"][0]
    alone = parse_claims(_example(claims=[claim]), source="c", sha256="")
    assert decide_claims(alone, {"fr": candidate}).supported
    family = _spec()
    result = decide_claims(family, {"fr": candidate, "en": _draws(9, 200, 0.6, 0.4)})
    assert not result.decisions[0].supported
    assert result.decisions[0].adjusted_p_value == pytest.approx(min(1.0, 2 * float(p)))


def test_decide_refuses_missing_draws() -> None:
    with pytest.raises(ConfigError, match="slice 'en'"):
        decide_claims(_spec(), {"fr": _draws(1, 50, 0.3, 0.6)})


def test_a_key_named_twice_is_refused(tmp_path: Path) -> None:
    """Before: `"alpha": 0.05, "alpha": 0.5` was decided at the last value (issue 23 #7)."""
    text = json.dumps(ISSUE_EXAMPLE).replace('"alpha": 0.05', '"alpha": 0.05, "alpha": 0.5')
    assert text.count('"alpha"') == 2
    path = tmp_path / "claims.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="duplicate key 'alpha'") as info:
        read_claims(path)
    assert info.value.exit_code == 2
