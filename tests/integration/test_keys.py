from __future__ import annotations

import copy

import pytest

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.evaluation import ComparisonReport, EvaluationReport
from sommelier_mlflow.integration import (
    comparison_metric_keys,
    evaluation_metric_keys,
    interval_label,
)
from sommelier_mlflow.toolcalls import METRIC_NAMES
from tests.integration.integration_helpers import Arms


def _counted(section: str) -> set[str]:
    keys = set()
    for name in METRIC_NAMES:
        keys |= {
            f"{section}/{name}",
            f"{section}/counts/{name}.numerator",
            f"{section}/counts/{name}.denominator",
        }
    return keys


def _interval(section: str) -> set[str]:
    keys = set()
    for name in METRIC_NAMES:
        keys |= {
            f"{section}/{name}",
            f"{section}/ci95/{name}.lower",
            f"{section}/ci95/{name}.upper",
        }
    return keys


def test_evaluation_keys_follow_the_contract_exactly(arms: Arms) -> None:
    keys = evaluation_metric_keys(arms.base_typed)
    expected = _counted("overall") | _counted("en") | _counted("fr") | _interval("gap/fr")
    assert set(keys) == expected | {"gap/fr/pairs"}
    assert all(type(value) is float for value in keys.values())


def test_evaluation_key_values_are_the_reports_exact_counts(arms: Arms) -> None:
    keys = evaluation_metric_keys(arms.base_typed)
    # The worked example of the metrics spec is the English slice.
    assert keys["en/valid_json_rate"] == 0.75
    assert (
        keys["en/counts/valid_json_rate.numerator"],
        keys["en/counts/valid_json_rate.denominator"],
    ) == (3.0, 4.0)
    assert keys["en/function_name_accuracy"] == 0.5
    assert keys["en/argument_exact_match"] == 0.5
    assert (keys["en/counts/argument_f1.numerator"], keys["en/counts/argument_f1.denominator"]) == (
        10.0,
        14.0,
    )
    assert keys["en/argument_f1"] == 10 / 14
    assert keys["en/full_call_exact_match"] == 0.25
    # Overall adds the French rows: one unparsable, one exact.
    assert (
        keys["overall/counts/argument_f1.numerator"],
        keys["overall/counts/argument_f1.denominator"],
    ) == (14.0, 20.0)
    assert keys["overall/full_call_exact_match"] == 2 / 6
    assert keys["fr/valid_json_rate"] == 0.5
    # Matched pairs (e1, f1) and (e3, f3): target minus root.
    assert keys["gap/fr/pairs"] == 2.0
    assert keys["gap/fr/valid_json_rate"] == pytest.approx(-0.5)
    assert keys["gap/fr/function_name_accuracy"] == pytest.approx(0.0)
    assert keys["gap/fr/argument_f1"] == pytest.approx(4 / 6 - 1)
    gaps = arms.base_report["paired_slices"]["fr"]["gaps"]
    for name in METRIC_NAMES:
        assert keys[f"gap/fr/{name}"] == gaps[name]["value"]
        assert keys[f"gap/fr/ci95/{name}.lower"] == gaps[name]["lower"]
        assert keys[f"gap/fr/ci95/{name}.upper"] == gaps[name]["upper"]
        assert keys[f"gap/fr/ci95/{name}.lower"] <= keys[f"gap/fr/ci95/{name}.upper"]


def test_comparison_keys_follow_the_contract_exactly(arms: Arms) -> None:
    keys = comparison_metric_keys(arms.comparison_typed)
    expected = set()
    for slice_name in ("overall", "en", "fr"):
        expected |= _interval(f"delta/{slice_name}") | {f"mcnemar/{slice_name}/p_value"}
    for kind in ("base", "adapter"):
        expected |= _interval(f"gap/{kind}/fr")
        expected |= {f"marginal_gap/{kind}/fr/{name}" for name in METRIC_NAMES}
    assert set(keys) == expected


def test_comparison_key_values(arms: Arms) -> None:
    keys = comparison_metric_keys(arms.comparison_typed)
    assert keys["delta/overall/full_call_exact_match"] == pytest.approx(1 - 2 / 6)
    assert keys["delta/overall/argument_f1"] == pytest.approx(1 - 14 / 20)
    assert keys["delta/en/valid_json_rate"] == pytest.approx(0.25)
    # The adapter fixes e2, e3, e4 and f1 and breaks nothing: b=0, c=4, p = 2 * 0.5**4.
    assert keys["mcnemar/overall/p_value"] == pytest.approx(0.125)
    assert keys["gap/base/fr/valid_json_rate"] == pytest.approx(-0.5)
    assert keys["gap/adapter/fr/valid_json_rate"] == pytest.approx(0.0)
    assert keys["marginal_gap/base/fr/valid_json_rate"] == pytest.approx(0.5 - 0.75)
    delta = arms.comparison["slices"]["fr"]["delta"]["argument_f1"]
    assert keys["delta/fr/argument_f1"] == delta["value"]
    assert keys["delta/fr/ci95/argument_f1.lower"] == delta["lower"]
    assert keys["delta/fr/ci95/argument_f1.upper"] == delta["upper"]


@pytest.mark.parametrize(
    ("confidence", "label"), [(0.95, "ci95"), (0.9, "ci90"), (0.995, "ci99.5"), (0.99, "ci99")]
)
def test_interval_label_names_the_recorded_coverage(confidence: float, label: str) -> None:
    assert interval_label(confidence) == label


def test_interval_keys_use_the_reports_confidence(arms: Arms) -> None:
    report = copy.deepcopy(arms.base_report)
    report["paired_slices"]["fr"]["bootstrap"]["confidence"] = 0.9
    keys = evaluation_metric_keys(EvaluationReport.from_json(report))
    assert "gap/fr/ci90/argument_f1.lower" in keys
    assert not any("/ci95/" in key for key in keys)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("metrics", "argument_f1", "numerator"), None),
        (("metrics", "argument_f1", "value"), float("nan")),
        (("slices", "fr", "metrics"), "oops"),
        (("paired_slices", "fr", "pairs"), True),
    ],
)
def test_malformed_reports_never_become_keys(
    arms: Arms, path: tuple[str, ...], value: object
) -> None:
    # Keys are built from typed reports only, and the one reader refuses the document.
    report = copy.deepcopy(arms.base_report)
    target = report
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    with pytest.raises(DataError, match=".".join(path[:-1]) if path[-1] != "metrics" else path[1]):
        evaluation_metric_keys(EvaluationReport.from_json(report))


def test_comparison_without_overall_slice_is_refused(arms: Arms) -> None:
    report = copy.deepcopy(arms.comparison)
    del report["slices"]["overall"]
    with pytest.raises(DataError, match="slices"):
        comparison_metric_keys(ComparisonReport.from_json(report))
