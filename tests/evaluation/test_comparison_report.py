"""The golden comparison: hand-scored base and adapter arms over en roots and fr translations.

Hand scoring (numerators/denominators per example, metric order as METRIC_NAMES):

base                                       adapter
en-1 ok right        1 1 1 4 1 / 1 1 1 4 1   right                1 1 1 4 1 / 1 1 1 4 1
en-2 units wrong     1 1 0 2 0 / 1 1 1 4 1   right                1 1 1 4 1 / 1 1 1 4 1
en-3 right           1 1 1 4 1 / 1 1 1 4 1   people "2" (string)  1 1 0 2 0 / 1 1 1 4 1
en-4 no_json         0 0 0 0 0 / 1 1 1 3 1   right                1 1 1 6 1 / 1 1 1 6 1
fr-1 wrong name      1 0 1 4 0 / 1 1 1 4 1   right                1 1 1 4 1 / 1 1 1 4 1
fr-2 invalid_json    0 0 0 0 0 / 1 1 1 2 1   right                1 1 1 4 1 / 1 1 1 4 1
fr-3 right           1 1 1 4 1 / 1 1 1 4 1   right                1 1 1 4 1 / 1 1 1 4 1
fr-4 "to" missing    1 1 0 4 0 / 1 1 1 5 1   right, in prose      1 1 1 6 1 / 1 1 1 6 1
fr-5 invalid_shape   0 0 0 0 0 / 1 1 1 2 1   "units" missing      1 1 0 2 0 / 1 1 1 3 1
fr-6 right           1 1 1 4 1 / 1 1 1 4 1   no_json              0 0 0 0 0 / 1 1 1 2 1

Full-call McNemar: b (base right, adapter wrong) = en-3, fr-6; c (base wrong, adapter
right) = en-2, en-4, fr-1, fr-2, fr-4.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, dumps_pretty, loads, sha256_text
from sommelier_mlflow.data import COMPARISON_REPORT_SCHEMA
from sommelier_mlflow.evaluation import (
    BOOTSTRAP_METHOD,
    COMPARISON_MARKDOWN_FILENAME,
    COMPARISON_REPORT_FILENAME,
    MARGINAL_GAP_NOTE,
    derive_seed,
    render_comparison_markdown,
    run_comparison,
    write_evaluation_report,
)
from sommelier_mlflow.evaluation._markdown import format_delta, format_metric, format_p_value
from sommelier_mlflow.toolcalls import METRIC_NAMES, MetricValue
from tests.evaluation.report_docs import compare_docs, doc, markdown_of, typed

BASE = {
    "overall": [(7, 10), (6, 10), (5, 10), (26, 36), (4, 10)],
    "en": [(3, 4), (3, 4), (2, 4), (10, 15), (2, 4)],
    "fr": [(4, 6), (3, 6), (3, 6), (16, 21), (2, 6)],
}
ADAPTER = {
    "overall": [(9, 10), (9, 10), (7, 10), (36, 41), (7, 10)],
    "en": [(4, 4), (4, 4), (3, 4), (16, 18), (3, 4)],
    "fr": [(5, 6), (5, 6), (4, 6), (20, 23), (4, 6)],
}
MCNEMAR = {
    "overall": (2, 5, 10, 2 * (1 + 7 + 21) / 2**7),
    "en": (1, 2, 4, 1.0),
    "fr": (1, 3, 6, 2 * (1 + 4) / 2**4),
}


def _format_metric(entry: dict[str, Any]) -> str:
    return format_metric(MetricValue.from_dict(entry))


def _dig(document, keys):
    for key in keys:
        document = document[key]
    return document


def _counts(metrics):
    return [(metrics[name]["numerator"], metrics[name]["denominator"]) for name in METRIC_NAMES]


@pytest.fixture(scope="module")
def reports(kit):
    return kit.golden_reports(resamples=200)


@pytest.fixture(scope="module")
def comparison(reports):
    base, adapter = reports
    return compare_docs(base, adapter, seed=5, resamples=400)


def test_per_slice_metrics_with_exact_counts(comparison):
    assert list(comparison["slices"]) == ["overall", "en", "fr"]
    for name in ("overall", "en", "fr"):
        entry = comparison["slices"][name]
        assert _counts(entry["base"]) == BASE[name]
        assert _counts(entry["adapter"]) == ADAPTER[name]
        assert entry["examples"] == BASE[name][0][1]


def test_deltas_are_adapter_minus_base_with_recorded_intervals(comparison):
    for name in ("overall", "en", "fr"):
        entry = comparison["slices"][name]
        for index, metric in enumerate(METRIC_NAMES):
            (bn, bd), (an, ad) = BASE[name][index], ADAPTER[name][index]
            delta = entry["delta"][metric]
            assert delta["value"] == an / ad - bn / bd
            assert delta["lower"] <= delta["upper"]
            assert set(delta) == {"value", "lower", "upper"}
        assert entry["bootstrap"] == {
            "method": BOOTSTRAP_METHOD,
            "quantile_method": "linear",
            "seed": derive_seed(5, f"delta/{name}"),
            "resamples": 400,
            "confidence": 0.95,
            "n": entry["examples"],
        }
    assert comparison["slices"]["overall"]["delta"]["full_call_exact_match"]["value"] == (
        pytest.approx(0.3)
    )


def test_exact_mcnemar_per_slice_and_overall(comparison):
    for name, (b, c, n, p_value) in MCNEMAR.items():
        mcnemar = comparison["slices"][name]["mcnemar"]
        assert mcnemar == {
            "metric": "full_call_exact_match",
            "method": "exact_binomial_two_sided",
            "b": b,
            "c": c,
            "n": n,
            "p_value": p_value,
        }
    assert comparison["slices"]["overall"]["mcnemar"]["p_value"] == 0.453125


def test_primary_gaps_are_copied_from_each_arm(reports, comparison):
    base, adapter = reports
    for kind, report in (("base", base), ("adapter", adapter)):
        gap = comparison["gaps"][kind]["fr"]
        source = report["paired_slices"]["fr"]
        assert gap == {key: value for key, value in source.items() if key != "pair_ids"}
    base_gap = comparison["gaps"]["base"]["fr"]
    assert _counts(base_gap["target_metrics"]) == [(3, 4), (2, 4), (2, 4), (12, 15), (1, 4)]
    assert _counts(base_gap["root_metrics"]) == BASE["en"]
    adapter_gap = comparison["gaps"]["adapter"]["fr"]
    assert _counts(adapter_gap["target_metrics"]) == [(4, 4), (4, 4), (4, 4), (18, 18), (4, 4)]
    assert adapter_gap["gaps"]["full_call_exact_match"]["value"] == 0.25
    assert base_gap["gaps"]["full_call_exact_match"]["value"] == -0.25
    assert base_gap["coverage"]["unmatched_targets"] == 1


def test_marginal_full_slice_gaps_are_descriptive(comparison):
    marginal = comparison["marginal_full_slices"]
    assert marginal["note"] == MARGINAL_GAP_NOTE
    assert "Descriptive" in marginal["note"]
    for kind, counts in (("base", BASE), ("adapter", ADAPTER)):
        entry = marginal[kind]["fr"]
        assert entry["root_language"] == "en"
        for index, metric in enumerate(METRIC_NAMES):
            (tn, td), (rn, rd) = counts["fr"][index], counts["en"][index]
            item = entry["metrics"][metric]
            assert set(item) == {"value", "target", "root"}  # no interval
            assert item["value"] == tn / td - rn / rd
            assert (item["target"]["numerator"], item["target"]["denominator"]) == (tn, td)
            assert (item["root"]["numerator"], item["root"]["denominator"]) == (rn, rd)


def test_identity_and_runs(kit, reports, comparison):
    base, adapter = reports
    assert comparison["schema_version"] == COMPARISON_REPORT_SCHEMA
    identity = comparison["identity"]
    assert identity["model_identity"] == kit.IDENTITY.to_dict()
    assert identity["decoding"] == kit.DECODING.to_dict()
    assert identity["test_split_sha256"] == kit.SPLIT_SHA
    assert identity["slices"] == ["en", "fr"]
    assert identity["metric_names"] == list(METRIC_NAMES)
    assert identity["prompt_set_sha256"] == base["identity"]["prompt_set_sha256"]
    assert identity["pair_set_sha256"] == {"fr": base["paired_slices"]["fr"]["pair_set_sha256"]}
    assert comparison["runs"] == {
        "base": {
            "model_kind": "base",
            "adapter": None,
            "examples": 10,
            "report_sha256": sha256_text(canonical_json(base)),
        },
        "adapter": {
            "model_kind": "adapter",
            "adapter": kit.ADAPTER,
            "examples": 10,
            "report_sha256": sha256_text(canonical_json(adapter)),
        },
    }
    assert comparison["bootstrap"]["seed"] == 5


def test_same_inputs_and_seed_give_byte_identical_reports(reports, comparison):
    base, adapter = reports
    again = compare_docs(base, adapter, seed=5, resamples=400)
    assert dumps_pretty(again) == dumps_pretty(comparison)
    other = compare_docs(base, adapter, seed=6, resamples=400)
    seed_key = ("slices", "overall", "bootstrap", "seed")
    assert _dig(other, seed_key) != _dig(comparison, seed_key)


def test_run_comparison_writes_identical_files_from_report_files(kit, tmp_path, reports):
    base, adapter = reports
    base_path = write_evaluation_report(tmp_path / "base.json", typed(base))
    adapter_path = write_evaluation_report(tmp_path / "adapter.json", typed(adapter))
    first = run_comparison(base_path, adapter_path, tmp_path / "one", seed=9, resamples=100)
    second = run_comparison(base_path, adapter_path, tmp_path / "two", seed=9, resamples=100)
    assert first.json_path.name == COMPARISON_REPORT_FILENAME
    assert first.markdown_path.name == COMPARISON_MARKDOWN_FILENAME
    assert first.json_path.read_bytes() == second.json_path.read_bytes()
    assert first.markdown_path.read_bytes() == second.markdown_path.read_bytes()
    assert loads(first.json_path.read_bytes()) == first.report.to_json()
    assert first.report.to_json() == compare_docs(base, adapter, seed=9, resamples=100)
    assert first.markdown_path.read_text(encoding="utf-8") == render_comparison_markdown(
        first.report
    )
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == sorted(
        [COMPARISON_MARKDOWN_FILENAME, COMPARISON_REPORT_FILENAME]
    )


def test_comparison_of_a_single_language_without_pairs(kit):
    split = kit.make_split(kit.golden_examples()[:4])
    en = {key: value for key, value in kit.BASE_TEXTS.items() if key.startswith("en")}
    en_adapter = {key: value for key, value in kit.ADAPTER_TEXTS.items() if key.startswith("en")}
    base = doc(kit.score(split, en))
    adapter = doc(kit.score(split, en_adapter, "adapter"))
    report = compare_docs(base, adapter, resamples=100)
    assert list(report["slices"]) == ["overall", "en"]
    assert report["gaps"] == {"base": {}, "adapter": {}}
    assert _counts(report["slices"]["overall"]["adapter"]) == ADAPTER["en"]
    assert "No translated rows" in markdown_of(report)


# --- markdown ------------------------------------------------------------------------------


def test_markdown_shows_the_json_numbers(comparison):
    text = markdown_of(comparison)
    for name, entry in comparison["slices"].items():
        assert f"### {name} ({entry['examples']} examples)" in text
        for metric in METRIC_NAMES:
            delta = entry["delta"][metric]
            row = (
                f"| {metric} | {_format_metric(entry['base'][metric])} | "
                f"{_format_metric(entry['adapter'][metric])} | {format_delta(delta['value'])} | "
                f"[{format_delta(delta['lower'])}, {format_delta(delta['upper'])}] |"
            )
            assert row in text
        mcnemar = entry["mcnemar"]
        assert (
            f"b = {mcnemar['b']} (base right, adapter wrong), c = {mcnemar['c']} "
            f"(base wrong, adapter right), n = {mcnemar['n']}, "
            f"p = {format_p_value(mcnemar['p_value'])}."
        ) in text
        assert f"seed {entry['bootstrap']['seed']}" in text
    assert "0.7000 (7/10) | 0.9000 (9/10) | +0.2000" in text  # overall valid_json_rate
    assert "p = 0.4531." in text
    for kind in ("base", "adapter"):
        gap = comparison["gaps"][kind]["fr"]
        assert f"### {kind}: fr - en\n" in text
        for metric in METRIC_NAMES:
            interval = gap["gaps"][metric]
            assert (
                f"| {format_delta(interval['value'])} | "
                f"[{format_delta(interval['lower'])}, {format_delta(interval['upper'])}] |"
            ) in text
        marginal = comparison["marginal_full_slices"][kind]["fr"]["metrics"]
        for metric in METRIC_NAMES:
            item = marginal[metric]
            assert (
                f"| {metric} | {_format_metric(item['root'])} | {_format_metric(item['target'])} | "
                f"{format_delta(item['value'])} |"
            ) in text
    assert "primary: matched pairs" in text
    assert "marginal_full_slices (descriptive, no interval)" in text
    assert MARGINAL_GAP_NOTE in text
    assert comparison["identity"]["test_split_sha256"] in text
    assert comparison["runs"]["adapter"]["adapter"]["sha256"] in text


def test_markdown_numbers_all_come_from_the_json(comparison):
    """Every number printed is a JSON number (rounded) or a count the JSON holds."""
    text = markdown_of(comparison)
    json_numbers: set[str] = set()

    def collect(value):
        if isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            return
        elif isinstance(value, int):
            json_numbers.add(str(value))
        else:
            json_numbers.update(
                {f"{value:.4f}", f"{value:+.4f}", f"{value:.4g}", f"{value * 100:g}", repr(value)}
            )

    collect(comparison)

    stripped = re.sub(r"`[^`]*`", "", text)  # digests and ids in code spans
    stripped = re.sub(r"[A-Za-z_]+[0-9]+[A-Za-z_0-9]*", "", stripped)  # names such as argument_f1
    numbers = re.findall(r"[+-]?\d+(?:\.\d+)?", stripped)
    unknown = {number for number in numbers if number not in json_numbers}
    assert unknown <= {"95"}  # the heading "95% interval" is confidence * 100
    assert not math.isnan(comparison["slices"]["overall"]["mcnemar"]["p_value"])


def test_markdown_is_a_pure_function_of_the_json(comparison):
    copy = loads(dumps_pretty(comparison))
    assert markdown_of(copy) == markdown_of(comparison)


def test_slice_values_cannot_inject_markdown(kit: Any) -> None:
    """Issue 23 #10: a slice value was written raw, so a newline started a heading or HTML."""
    from dataclasses import replace

    hostile = "x\n# injected <script>alert(1)</script> | *bold*"
    split = kit.golden_split(
        lambda rows: [
            replace(row, slice_values={"topic": hostile if index % 2 else "plain"})
            for index, row in enumerate(rows)
        ]
    )
    base = doc(kit.score(split, kit.BASE_TEXTS, "base", slice_by=["topic"]))
    adapter = doc(kit.score(split, kit.ADAPTER_TEXTS, "adapter", slice_by=["topic"]))
    markdown = markdown_of(compare_docs(base, adapter, resamples=50))
    assert "topic:plain" in markdown
    assert not any(line.startswith("# injected") for line in markdown.splitlines())
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    assert "\\*bold\\*" in markdown and "\\|" in markdown
