from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import Decoding, GenerationRecord
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from sommelier_mlflow.evaluation import derive_seed, paired_bootstrap, score_run
from sommelier_mlflow.evaluation._serialise import coverage_to_dict, intervals_to_dict
from sommelier_mlflow.toolcalls import METRIC_NAMES, PARSER_VERSION
from tests.evaluation.report_docs import doc


def counts(metrics):
    return {name: (metric.numerator, metric.denominator) for name, metric in metrics.items()}


# --- the spec's worked example ------------------------------------------------------------


def test_worked_example_from_the_spec(kit):
    weather = {"name": "get_weather", "arguments": {"city": "Paris", "units": "celsius"}}
    rows = [
        kit.example("ex-1", weather),
        kit.example("ex-2", weather),
        kit.example(
            "ex-3", {"name": "get_weather", "arguments": {"city": "Oslo", "units": "celsius"}}
        ),
        kit.example(
            "ex-4", {"name": "get_weather", "arguments": {"city": "Rome", "units": "celsius"}}
        ),
    ]
    split = kit.make_split(rows)
    texts = {
        "ex-1": kit.call("get_weather", {"city": "Paris", "units": "celsius"}),
        "ex-2": kit.call("get_weather", {"city": "Paris", "units": "kelvin"}),
        "ex-3": kit.call("fetch_weather", {"city": "Oslo", "units": "celsius"}),
        "ex-4": "The weather in Rome is sunny.",
    }
    run = kit.score(split, texts)

    assert counts(run.metrics) == {
        "valid_json_rate": (3, 4),
        "function_name_accuracy": (2, 4),
        "argument_exact_match": (2, 4),
        "argument_f1": (10, 14),
        "full_call_exact_match": (1, 4),
    }
    values = {name: metric.value for name, metric in run.metrics.items()}
    assert values["valid_json_rate"] == 0.75
    assert values["function_name_accuracy"] == 0.5
    assert values["argument_exact_match"] == 0.5
    assert round(values["argument_f1"], 4) == 0.7143
    assert values["full_call_exact_match"] == 0.25
    assert [example.parse_status for example in run.examples] == ["ok", "ok", "ok", "no_json"]
    assert run.paired_slices == {}
    assert list(run.slices) == ["en"]
    report = doc(run)
    assert report["metrics"]["argument_f1"] == {
        "value": 10 / 14,
        "numerator": 10,
        "denominator": 14,
    }


# --- the golden arms -----------------------------------------------------------------------


def test_golden_base_arm_counts_per_slice(kit):
    run = kit.score(kit.golden_split(), kit.BASE_TEXTS)
    assert counts(run.metrics) == {
        "valid_json_rate": (7, 10),
        "function_name_accuracy": (6, 10),
        "argument_exact_match": (5, 10),
        "argument_f1": (26, 36),
        "full_call_exact_match": (4, 10),
    }
    assert counts(run.slices["en"].metrics) == {
        "valid_json_rate": (3, 4),
        "function_name_accuracy": (3, 4),
        "argument_exact_match": (2, 4),
        "argument_f1": (10, 15),
        "full_call_exact_match": (2, 4),
    }
    assert counts(run.slices["fr"].metrics) == {
        "valid_json_rate": (4, 6),
        "function_name_accuracy": (3, 6),
        "argument_exact_match": (3, 6),
        "argument_f1": (16, 21),
        "full_call_exact_match": (2, 6),
    }
    assert [run.slices[lang].examples for lang in run.slices] == [4, 6]


def test_components_are_int64_rows_in_example_id_order(kit):
    run = kit.score(kit.golden_split(), kit.BASE_TEXTS)
    ids = [example.example_id for example in run.examples]
    assert ids == sorted(ids)
    assert run.numerators.dtype == np.int64 and run.denominators.dtype == np.int64
    assert run.numerators.shape == run.denominators.shape == (10, len(METRIC_NAMES))
    fr4 = ids.index("fr-4")  # convert with "to" missing: 2 predicted pairs, both right
    assert run.numerators[fr4].tolist() == [1, 1, 0, 4, 0]
    assert run.denominators[fr4].tolist() == [1, 1, 1, 5, 1]
    assert run.numerators.sum(axis=0).tolist() == [7, 6, 5, 26, 4]


def test_matched_pairs_coverage_digest_and_gaps(kit):
    run = kit.score(kit.golden_split(), kit.BASE_TEXTS, seed=7, resamples=300)
    paired = run.paired_slices["fr"]
    assert paired.root_language == "en"
    assert paired.pairs == (("en-1", "fr-1"), ("en-2", "fr-2"), ("en-3", "fr-3"), ("en-4", "fr-4"))
    coverage = coverage_to_dict(paired.coverage)
    assert coverage == {
        "target_rows": 6,
        "paired_targets": 4,
        "target": 4 / 6,
        "root_rows": 4,
        "paired_roots": 4,
        "root": 1.0,
        "unmatched_targets": 1,
    }
    by_id = {example.example_id: example for example in run.examples}
    expected_digest = sha256_text(
        canonical_json(
            [
                [root, target, by_id[root].prompt_sha256, by_id[target].prompt_sha256]
                for root, target in paired.pairs
            ]
        )
    )
    assert paired.pair_set_sha256 == expected_digest
    assert counts(paired.target_metrics) == {
        "valid_json_rate": (3, 4),
        "function_name_accuracy": (2, 4),
        "argument_exact_match": (2, 4),
        "argument_f1": (12, 15),
        "full_call_exact_match": (1, 4),
    }
    assert counts(paired.root_metrics) == counts(run.slices["en"].metrics)

    gaps = intervals_to_dict(paired.bootstrap)
    assert gaps["full_call_exact_match"]["value"] == 0.25 - 0.5
    assert gaps["argument_f1"]["value"] == 12 / 15 - 10 / 15
    # Every pair has the same argument_exact_match outcome in both languages: a zero-width gap.
    assert gaps["argument_exact_match"] == {"value": 0.0, "lower": 0.0, "upper": 0.0}
    assert paired.bootstrap.seed == derive_seed(7, "gap/base/fr")
    assert paired.bootstrap.resamples == 300 and paired.bootstrap.n == 4

    # The gap is exactly the stats module's paired bootstrap over (root rows, target rows).
    rows = [example.example_id for example in run.examples]
    roots = [rows.index(root) for root, _ in paired.pairs]
    targets = [rows.index(target) for _, target in paired.pairs]
    direct = paired_bootstrap(
        run.numerators[roots],
        run.denominators[roots],
        run.numerators[targets],
        run.denominators[targets],
        resamples=300,
        seed=derive_seed(7, "gap/base/fr"),
        metric_names=METRIC_NAMES,
    )
    assert direct.to_dict() == paired.bootstrap.to_dict()


def test_several_target_languages_each_get_a_paired_slice(kit):
    rows = [
        kit.example("en-1", kit.G1),
        kit.example("en-2", kit.G2),
        kit.example("de-1", kit.G1, language="de", source="en-1"),
        kit.example("fr-1", kit.G1, language="fr", source="en-1"),
        kit.example("fr-2", kit.G2, language="fr", source="en-2"),
    ]
    split = kit.make_split(rows)
    texts = {
        "en-1": kit.call("get_weather", kit.G1["arguments"]),
        "en-2": kit.call("get_weather", kit.G2["arguments"]),
        "de-1": "nein",
        "fr-1": kit.call("get_weather", kit.G1["arguments"]),
        "fr-2": "non",
    }
    run = kit.score(split, texts, "adapter")
    assert list(run.slices) == ["de", "en", "fr"]
    assert list(run.paired_slices) == ["de", "fr"]
    assert run.paired_slices["de"].pairs == (("en-1", "de-1"),)
    assert run.paired_slices["de"].coverage.paired_roots == 1
    assert run.paired_slices["fr"].root_language == "en"
    assert (
        intervals_to_dict(run.paired_slices["fr"].bootstrap)["full_call_exact_match"]["value"]
        == -0.5
    )
    assert run.paired_slices["de"].bootstrap.seed == derive_seed(0, "gap/adapter/de")


def test_configured_languages_select_slices(kit):
    split = kit.golden_split()
    en_texts = {key: value for key, value in kit.BASE_TEXTS.items() if key.startswith("en")}
    run = kit.score(split, en_texts, languages=["en"])
    assert list(run.slices) == ["en"]
    assert run.paired_slices == {}
    assert counts(run.metrics) == counts(run.slices["en"].metrics)


def test_generation_order_does_not_matter(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    common = {"model_kind": "base", "model_identity": kit.IDENTITY, "adapter": None}
    first = doc(score_run(split, records, **common))
    second = doc(score_run(split, shuffled, **common))
    assert canonical_json(first) == canonical_json(second)


def test_identity_fields_of_the_run(kit):
    run = kit.score(kit.golden_split(), kit.ADAPTER_TEXTS, "adapter")
    assert run.model_kind == "adapter"
    assert run.adapter == kit.ADAPTER
    assert run.parser_version == PARSER_VERSION
    assert run.decoding == kit.DECODING
    assert run.test_split_sha256 == kit.SPLIT_SHA
    assert run.model_identity == kit.IDENTITY


def test_stored_decoding_is_used_when_none_is_declared(kit):
    split = kit.golden_split()
    decoding = Decoding(max_new_tokens=32, batch_size=1)
    records = kit.generations(split, kit.BASE_TEXTS, decoding=decoding)
    run = score_run(split, records, model_kind="base", model_identity=kit.IDENTITY, adapter=None)
    assert run.decoding == decoding


def test_per_example_table_rows(kit):
    run = kit.score(kit.golden_split(), kit.BASE_TEXTS)
    rows = {row["example_id"]: row for row in run.table_rows()}
    assert rows["fr-4"] == {
        "example_id": "fr-4",
        "language": "fr",
        "parse_status": "ok",
        "name_correct": True,
        "arguments_correct": False,
        "full_call_correct": False,
        "argument_f1_numerator": 4,
        "argument_f1_denominator": 5,
        "raw_text": kit.BASE_TEXTS["fr-4"],
    }
    assert rows["fr-2"]["parse_status"] == "invalid_json"
    assert rows["fr-5"]["parse_status"] == "invalid_shape"
    assert rows["en-4"]["parse_status"] == "no_json"
    assert rows["fr-1"]["arguments_correct"] and not rows["fr-1"]["name_correct"]
    assert sum(row["full_call_correct"] for row in rows.values()) == 4


# --- refusals ------------------------------------------------------------------------------


def _score(kit, split, records, **overrides):
    options = {"model_kind": "base", "model_identity": kit.IDENTITY, "adapter": None}
    options.update(overrides)
    return score_run(split, records, **options)


def test_unknown_example_id_is_an_input_error(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    stray = replace(records[0], example_id="zz-404")
    with pytest.raises(InputError, match="zz-404") as info:
        _score(kit, split, [*records, stray])
    assert info.value.exit_code == 2


def test_missing_generation_is_an_input_error_naming_ids(kit):
    split = kit.golden_split()
    records = [r for r in kit.generations(split, kit.BASE_TEXTS) if r.example_id != "fr-3"]
    with pytest.raises(InputError, match=r"1 example\(s\) have no generation: 'fr-3'") as info:
        _score(kit, split, records)
    assert info.value.exit_code == 2


def test_many_missing_ids_are_previewed(kit):
    split = kit.golden_split()
    records = kit.generations(split, {"en-1": "x"})
    with pytest.raises(InputError, match=r"9 example\(s\).*'en-2'.*and 4 more"):
        _score(kit, split, records)


def test_duplicate_generation_is_an_input_error(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    with pytest.raises(InputError, match="more than one generation: 'en-2'") as info:
        _score(kit, split, [*records, records[1]])
    assert info.value.exit_code == 2


# One record altered after generation: its prompt digest, its language, its decoding
# (now unlike the others'), or the parse it stores (status or call).
@pytest.mark.parametrize(
    ("index", "change", "match"),
    [
        pytest.param(
            4, {"prompt_sha256": sha256_text("another prompt")}, "fr-1", id="wrong-prompt-digest"
        ),
        pytest.param(0, {"language": "fr"}, "en-1", id="language-mismatch"),
        pytest.param(
            3,
            {"decoding": Decoding(max_new_tokens=64, batch_size=8).to_dict()},
            "2 different decodings",
            id="mixed-decoding",
        ),
        pytest.param(
            0,
            {"parse_status": "no_json", "parsed_call": None},
            "stores parse 'no_json'",
            id="stored-parse-the-parser-disagrees-with",
        ),
        pytest.param(
            0,
            {"parsed_call": {"name": "get_weather", "arguments": {}}},
            "en-1",
            id="stored-call-that-differs-from-the-fresh-parse",
        ),
    ],
)
def test_an_altered_record_is_an_invariant_violation(kit, index, change, match):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    records[index] = replace(records[index], **change)
    with pytest.raises(InvariantViolationError, match=match) as info:
        _score(kit, split, records)
    assert info.value.exit_code == 5


def test_declared_decoding_must_match_the_records(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    with pytest.raises(InvariantViolationError, match="declares") as info:
        _score(kit, split, records, decoding=Decoding(max_new_tokens=128, batch_size=4))
    assert info.value.exit_code == 5


def test_invalid_recorded_decoding_is_a_config_error(kit):
    split = kit.golden_split()
    bad = {"temperature": 0.7, "do_sample": False, "max_new_tokens": 64, "batch_size": 4}
    records = [replace(r, decoding=bad) for r in kit.generations(split, kit.BASE_TEXTS)]
    with pytest.raises(ConfigError, match="temperature") as info:
        _score(kit, split, records)
    assert info.value.exit_code == 2


def test_pair_with_different_gold_calls_is_an_invariant_violation(kit):
    def swap_gold(rows):
        return [replace(r, gold_call=kit.G2) if r.example_id == "fr-1" else r for r in rows]

    split = kit.golden_split(swap_gold)
    with pytest.raises(InvariantViolationError, match="'fr-1' and its root 'en-1'") as info:
        _score(kit, split, kit.generations(split, kit.BASE_TEXTS))
    assert info.value.exit_code == 5


def test_configured_language_without_rows_is_an_error_not_an_empty_slice(kit):
    split = kit.golden_split()
    with pytest.raises(InputError, match=r"\['de'\] have no rows") as info:
        _score(kit, split, kit.generations(split, kit.BASE_TEXTS), languages=["en", "fr", "de"])
    assert info.value.exit_code == 2


def test_generation_outside_configured_languages_is_refused(kit):
    split = kit.golden_split()
    with pytest.raises(InputError, match="outside the configured slices"):
        _score(kit, split, kit.generations(split, kit.BASE_TEXTS), languages=["en"])


def test_generation_from_the_other_arm_is_refused(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS, model_kind="adapter")
    with pytest.raises(InputError, match="'adapter' arm") as info:
        _score(kit, split, records)
    assert info.value.exit_code == 2


def test_translations_without_any_evaluated_root_are_refused(kit):
    rows = [
        kit.example("en-1", kit.G1),
        kit.example("fr-1", kit.G1, language="fr", source="en-404"),
    ]
    split = kit.make_split(rows)
    records = kit.generations(split, {"en-1": "a", "fr-1": "b"})
    with pytest.raises(InputError, match="none of their roots is evaluated") as info:
        _score(kit, split, records)
    assert info.value.exit_code == 2


def test_unformatted_examples_are_refused(kit):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS)
    bare = kit.make_split(replace(r, prompt_text=None, prompt_sha256=None) for r in split.examples)
    with pytest.raises(InputError, match="no prompt_sha256"):
        _score(kit, bare, records)


@pytest.mark.parametrize(
    ("model_kind", "adapter"),
    [("base", {"source": "a", "sha256": "b"}), ("adapter", None), ("adapter", {"source": "a"})],
)
def test_adapter_must_match_the_model_kind(kit, model_kind, adapter):
    split = kit.golden_split()
    records = kit.generations(split, kit.BASE_TEXTS, model_kind=model_kind)
    with pytest.raises(ConfigError, match="adapter") as info:
        _score(kit, split, records, model_kind=model_kind, adapter=adapter)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("option", "value"), [("resamples", 0), ("confidence", 1.0), ("seed", 1.5)]
)
def test_bad_bootstrap_settings_fail_before_scoring(kit, option, value):
    split = kit.golden_split()
    with pytest.raises(ConfigError, match=option):
        _score(kit, split, kit.generations(split, kit.BASE_TEXTS), **{option: value})


def test_non_record_generation_is_refused(kit):
    split = kit.golden_split()
    records: list[object] = list(kit.generations(split, kit.BASE_TEXTS))
    records[0] = records[0].to_json()  # type: ignore[union-attr]
    with pytest.raises(InputError, match="GenerationRecord"):
        _score(kit, split, records)
    assert isinstance(records[1], GenerationRecord)
