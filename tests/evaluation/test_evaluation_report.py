from __future__ import annotations

import copy

import pytest

from sommelier_mlflow._json import canonical_json, dumps_pretty, loads
from sommelier_mlflow.data import EVALUATION_REPORT_SCHEMA
from sommelier_mlflow.errors import DataError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    BOOTSTRAP_METHOD,
    EVALUATION_REPORT_FILENAME,
    QUANTILE_METHOD,
    derive_seed,
    prompt_set_digest,
    read_evaluation_report,
    validate_evaluation_report,
    write_evaluation_report,
)
from sommelier_mlflow.toolcalls import METRIC_NAMES, PARSER_VERSION
from tests.evaluation.report_docs import doc, typed


@pytest.fixture
def base_report(kit):
    return doc(kit.score(kit.golden_split(), kit.BASE_TEXTS, seed=3))


def test_report_layout(kit, base_report):
    report = base_report
    assert report["schema_version"] == EVALUATION_REPORT_SCHEMA
    assert set(report) == {
        "schema_version",
        "identity",
        "metric_names",
        "examples",
        "metrics",
        "slices",
        "paired_slices",
        "bootstrap",
        "per_example",
    }
    identity = report["identity"]
    assert identity["model_kind"] == "base"
    assert identity["model_identity"] == kit.IDENTITY.to_dict()
    assert identity["adapter"] is None
    assert identity["parser_version"] == PARSER_VERSION
    assert identity["decoding"] == kit.DECODING.to_dict()
    assert identity["test_split_sha256"] == kit.SPLIT_SHA
    assert report["metric_names"] == list(METRIC_NAMES)
    assert list(report["metrics"]) == list(METRIC_NAMES)
    assert report["examples"] == 10
    assert report["metrics"]["full_call_exact_match"] == {
        "value": 0.4,
        "numerator": 4,
        "denominator": 10,
    }
    assert report["bootstrap"] == {
        "method": BOOTSTRAP_METHOD,
        "quantile_method": QUANTILE_METHOD,
        "seed": 3,
        "resamples": 200,
        "confidence": 0.95,
    }
    assert list(report["slices"]) == ["en", "fr"]
    assert report["slices"]["fr"]["examples"] == 6


def test_prompt_set_digest_is_over_prompt_digests_in_example_id_order(kit, base_report):
    split = kit.golden_split()
    en = sorted((e for e in split.examples if e.language == "en"), key=lambda e: e.example_id)
    expected = prompt_set_digest([e.prompt_sha256 for e in en])
    assert base_report["slices"]["en"]["prompt_set_sha256"] == expected
    assert base_report["identity"]["prompt_set_sha256"] == {
        lang: entry["prompt_set_sha256"] for lang, entry in base_report["slices"].items()
    }


def test_paired_slice_layout(base_report):
    paired = base_report["paired_slices"]["fr"]
    assert set(paired) == {
        "root_language",
        "pairs",
        "pair_ids",
        "coverage",
        "pair_set_sha256",
        "root_metrics",
        "target_metrics",
        "gaps",
        "bootstrap",
    }
    assert paired["pairs"] == 4
    assert paired["pair_ids"] == [
        ["en-1", "fr-1"],
        ["en-2", "fr-2"],
        ["en-3", "fr-3"],
        ["en-4", "fr-4"],
    ]
    assert paired["bootstrap"]["seed"] == derive_seed(3, "gap/base/fr")
    assert paired["bootstrap"]["n"] == 4
    assert set(paired["gaps"]["argument_f1"]) == {"value", "lower", "upper"}
    assert paired["gaps"]["function_name_accuracy"]["value"] == -0.25


def test_per_example_components_are_stored(base_report):
    rows = {row["example_id"]: row for row in base_report["per_example"]}
    assert rows["fr-4"] == {
        "example_id": "fr-4",
        "language": "fr",
        "prompt_sha256": rows["fr-4"]["prompt_sha256"],
        "parse_status": "ok",
        "numerators": [1, 1, 0, 4, 0],
        "denominators": [1, 1, 1, 5, 1],
    }
    assert [row["example_id"] for row in base_report["per_example"]] == sorted(rows)


def test_write_then_read_round_trips(kit, tmp_path, base_report):
    run = kit.score(kit.golden_split(), kit.BASE_TEXTS, seed=3)
    path = write_evaluation_report(tmp_path / EVALUATION_REPORT_FILENAME, run)
    assert path.read_bytes() == dumps_pretty(base_report)
    assert read_evaluation_report(path).to_json() == base_report
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_same_inputs_and_seed_give_byte_identical_reports(kit):
    first = doc(kit.score(kit.golden_split(), kit.ADAPTER_TEXTS, "adapter", seed=11))
    second = doc(kit.score(kit.golden_split(), kit.ADAPTER_TEXTS, "adapter", seed=11))
    assert dumps_pretty(first) == dumps_pretty(second)
    other = doc(kit.score(kit.golden_split(), kit.ADAPTER_TEXTS, "adapter", seed=12))
    gap_seeds = [r["paired_slices"]["fr"]["bootstrap"]["seed"] for r in (first, other)]
    assert gap_seeds[0] != gap_seeds[1]
    assert other["paired_slices"]["fr"]["gaps"] != first["paired_slices"]["fr"]["gaps"]


# --- the reader fails closed ---------------------------------------------------------------


def _write(tmp_path, document):
    path = tmp_path / EVALUATION_REPORT_FILENAME
    path.write_bytes(dumps_pretty(document))
    return path


def test_unknown_schema_version_is_refused(tmp_path, base_report):
    base_report["schema_version"] = "sommelier_mlflow.evaluation_report.v9"
    path = _write(tmp_path, base_report)
    with pytest.raises(DataError, match="unsupported") as info:
        read_evaluation_report(path)
    assert str(path) in str(info.value) and info.value.exit_code == 2


def test_missing_schema_version_is_refused(tmp_path, base_report):
    del base_report["schema_version"]
    with pytest.raises(DataError, match="schema_version: missing"):
        read_evaluation_report(_write(tmp_path, base_report))


@pytest.mark.parametrize("field", ["paired_slices", "per_example", "bootstrap"])
def test_missing_field_is_refused(tmp_path, base_report, field):
    del base_report[field]
    with pytest.raises(DataError, match=f"missing \\['{field}'\\]"):
        read_evaluation_report(_write(tmp_path, base_report))


def test_unknown_field_is_refused(tmp_path, base_report):
    base_report["identity"]["extra"] = 1
    with pytest.raises(
        DataError, match=r"identity: fields wrong: missing \[\], unexpected \['extra'\]"
    ):
        read_evaluation_report(_write(tmp_path, base_report))


def test_non_json_and_missing_files_are_data_errors(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"schema_version": NaN}')
    with pytest.raises(DataError, match="not valid JSON"):
        read_evaluation_report(path)
    with pytest.raises(DataError, match="cannot read"):
        read_evaluation_report(tmp_path / "absent.json")


def test_non_greedy_decoding_in_a_report_is_refused(base_report):
    base_report["identity"]["decoding"]["temperature"] = 0.7
    with pytest.raises(DataError, match=r"identity\.decoding"):
        validate_evaluation_report(base_report)


def test_mistyped_count_is_refused(base_report):
    base_report["per_example"][0]["numerators"][0] = True
    with pytest.raises(DataError, match=r"per_example\[0\]\.numerators"):
        validate_evaluation_report(base_report)


def test_rows_out_of_order_are_refused(base_report):
    rows = base_report["per_example"]
    rows[0], rows[1] = rows[1], rows[0]
    with pytest.raises(DataError, match="out of order"):
        validate_evaluation_report(base_report)


def _consistent_tamper_of_metric(report):
    entry = report["metrics"]["valid_json_rate"]
    entry["numerator"] += 1
    entry["value"] = entry["numerator"] / entry["denominator"]


@pytest.mark.parametrize(
    ("tamper", "where"),
    [
        (_consistent_tamper_of_metric, "metrics.valid_json_rate"),
        (lambda r: r["per_example"][0]["numerators"].__setitem__(3, 0), "metrics.argument_f1"),
        (
            lambda r: r["slices"]["en"].__setitem__("prompt_set_sha256", "0" * 64),
            "slices.en.prompt_set_sha256",
        ),
        (
            lambda r: r["identity"]["prompt_set_sha256"].__setitem__("fr", "0" * 64),
            "slices.fr.prompt_set_sha256",
        ),
        (
            lambda r: r["paired_slices"]["fr"].__setitem__("pair_set_sha256", "0" * 64),
            "paired_slices.fr.pair_set_sha256",
        ),
        (
            lambda r: r["paired_slices"]["fr"]["gaps"]["argument_f1"].__setitem__("value", 0.5),
            "paired_slices.fr.gaps.argument_f1.value",
        ),
        (
            lambda r: r["paired_slices"]["fr"]["coverage"].__setitem__("paired_roots", 3),
            "paired_slices.fr.coverage.paired_roots",
        ),
        (lambda r: r.__setitem__("examples", 9), "examples"),
    ],
)
def test_report_inconsistent_with_its_rows_is_an_invariant_violation(base_report, tamper, where):
    tamper(base_report)
    with pytest.raises(InvariantViolationError, match=where.replace(".", r"\.")) as info:
        validate_evaluation_report(base_report)
    assert info.value.exit_code == 5


def test_stored_value_disagreeing_with_counts_is_refused(base_report):
    base_report["metrics"]["valid_json_rate"]["value"] = 0.71
    with pytest.raises(DataError, match="disagrees"):
        validate_evaluation_report(base_report)


def test_write_refuses_an_inconsistent_document_and_writes_nothing(tmp_path, base_report):
    broken = copy.deepcopy(base_report)
    _consistent_tamper_of_metric(broken)
    with pytest.raises(InvariantViolationError):
        write_evaluation_report(tmp_path / EVALUATION_REPORT_FILENAME, typed(broken))
    assert list(tmp_path.iterdir()) == []
    write_evaluation_report(tmp_path / EVALUATION_REPORT_FILENAME, typed(base_report))
    assert canonical_json(loads((tmp_path / EVALUATION_REPORT_FILENAME).read_bytes())) == (
        canonical_json(base_report)
    )


def test_the_sample_and_the_skipped_prompts_round_trip_and_are_checked(base_report):
    document = copy.deepcopy(base_report)
    document["identity"]["sample"] = {
        "rule": "stratified_proportional.v1",
        "seed": 4,
        "max_examples": 3,
        "strata": ["language", "category"],
        "roots": 9,
    }
    document["identity"]["skip_overlong"] = {"context_length": 1024, "example_ids": ["en-99"]}
    report = typed(document)
    assert report.identity.sample == document["identity"]["sample"]
    assert report.identity.skip_overlong is not None
    assert report.identity.skip_overlong.example_ids == ("en-99",)
    assert canonical_json(report.to_json()) == canonical_json(document)
    scored = report.example_ids[0]
    document["identity"]["skip_overlong"]["example_ids"] = [scored]
    with pytest.raises(InvariantViolationError, match=r"skip_overlong\.example_ids"):
        typed(document)
    document["identity"]["skip_overlong"] = {"context_length": 0, "example_ids": []}
    with pytest.raises(DataError, match=r"skip_overlong\.context_length"):
        typed(document)
