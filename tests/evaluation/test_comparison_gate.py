"""One refusal per gate field, each built the way it happens in practice where possible."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sommelier_mlflow.data import DatasetRef, Decoding
from sommelier_mlflow.errors import ComparisonRefusedError, DataError
from sommelier_mlflow.evaluation import (
    GATE_FIELDS,
    run_comparison,
    write_evaluation_report,
)
from tests.evaluation.report_docs import check_docs, compare_docs, doc, typed


def _adapter_report(kit, split=None, **options):
    split = split if split is not None else kit.golden_split()
    texts = options.pop("texts", kit.ADAPTER_TEXTS)
    return doc(kit.score(split, texts, "adapter", **options))


def _drop_metric(report, name):
    """Remove one metric everywhere, keeping the report self-consistent."""
    index = report["metric_names"].index(name)
    report["metric_names"].pop(index)
    for row in report["per_example"]:
        row["numerators"].pop(index)
        row["denominators"].pop(index)
    del report["metrics"][name]
    for entry in report["slices"].values():
        del entry["metrics"][name]
    for paired in report["paired_slices"].values():
        for key in ("root_metrics", "target_metrics", "gaps"):
            del paired[key][name]
    return report


def _model_identity(field, value):
    def build(kit, base):
        identity = replace(kit.IDENTITY, **{field: value})
        return base, _adapter_report(kit, identity=identity)

    return build


def _decoding(kit, **changes):
    fields = {"max_new_tokens": 64, "batch_size": 4, **changes}
    return Decoding(**fields)


DATASET = DatasetRef(name="tool-calls-test", dataset_id="d-" + "a" * 32, digest="1a2b3c4d")


def _on_datasets(base_dataset, adapter_dataset):
    """Both arms read from MLflow evaluation datasets (``None``: from the split file)."""

    def build(kit, base):
        split = kit.golden_split()
        base = doc(kit.score(replace(split, dataset=base_dataset), kit.BASE_TEXTS, resamples=50))
        return base, _adapter_report(kit, replace(split, dataset=adapter_dataset))

    return build


def _topics(value):
    def edit(rows):
        return [replace(row, slice_values={"topic": value}) for row in rows]

    return edit


def _no_sources(rows):
    return [replace(row, source_example_id=None) for row in rows]


def _unpair_first(rows):
    return [
        replace(row, source_example_id=None) if row.example_id == "fr-1" else row for row in rows
    ]


def _rename_native_row(rows):
    # "fr-5b" sorts where "fr-5" did, so prompt-set digests stay equal: only the ids differ.
    return [replace(row, example_id="fr-5b") if row.example_id == "fr-5" else row for row in rows]


def _identity(document, **fields):
    """``document`` with ``fields`` added to its identity (optional identity fields)."""
    return {**document, "identity": {**document["identity"], **fields}}


SAMPLE = {
    "rule": "stratified_proportional.v1",
    "seed": 0,
    "max_examples": 3,
    "strata": ["language"],
    "roots": 9,
}


def _skipped(*example_ids):
    return {"skip_overlong": {"context_length": 64, "example_ids": list(example_ids)}}


def _in_conversations(rows):
    """The same rows, each English root a turn of one conversation with its neighbour."""
    return [
        replace(row, conversation_id=f"conv-{index // 2}") if row.language == "en" else row
        for index, row in enumerate(rows)
    ]


CASES = {
    "model_kind (adapter report first)": (
        "model_kind",
        lambda kit, base: (_adapter_report(kit), _adapter_report(kit)),
    ),
    "model_kind (base report second)": ("model_kind", lambda kit, base: (base, base)),
    "adapter (base arm names one)": (
        "adapter",
        lambda kit, base: (
            {**base, "identity": {**base["identity"], "adapter": kit.ADAPTER}},
            _adapter_report(kit),
        ),
    ),
    "adapter (adapter arm names none)": (
        "adapter",
        lambda kit, base: (
            base,
            {**(a := _adapter_report(kit)), "identity": {**a["identity"], "adapter": None}},
        ),
    ),
    "base_model": ("model_identity.base_model", _model_identity("base_model", "tiny/other")),
    "base_revision": ("model_identity.base_revision", _model_identity("base_revision", None)),
    "tokenizer": ("model_identity.tokenizer", _model_identity("tokenizer", "tiny/tok")),
    "tokenizer_revision": (
        "model_identity.tokenizer_revision",
        _model_identity("tokenizer_revision", "rev-2"),
    ),
    "dataset.name": ("dataset.name", _on_datasets(None, DATASET)),
    "dataset.id": (
        "dataset.id",
        _on_datasets(DATASET, replace(DATASET, dataset_id="d-" + "b" * 32)),
    ),
    "dataset.digest": (
        "dataset.digest",
        _on_datasets(DATASET, replace(DATASET, digest="5e6f7a8b")),
    ),
    "test_split_sha256": (
        "test_split_sha256",
        lambda kit, base: (base, _adapter_report(kit, kit.golden_split(sha="6" * 64))),
    ),
    "prompt_format": (
        "prompt_format",
        lambda kit, base: (
            base,
            {
                **(a := _adapter_report(kit)),
                "identity": {**a["identity"], "prompt_format": "native"},
            },
        ),
    ),
    "chat_template_kwargs": (
        "chat_template_kwargs",
        lambda kit, base: (
            base,
            {
                **(a := _adapter_report(kit)),
                "identity": {**a["identity"], "chat_template_kwargs": {"enable_thinking": False}},
            },
        ),
    ),
    "template_date": (
        "template_date",
        lambda kit, base: (
            base,
            {
                **(a := _adapter_report(kit)),
                "identity": {**a["identity"], "template_date": "2024-07-26"},
            },
        ),
    ),
    "parser_version": (
        "parser_version",
        lambda kit, base: (
            base,
            {
                **(a := _adapter_report(kit)),
                "identity": {**a["identity"], "parser_version": "sommelier.parser.v0"},
            },
        ),
    ),
    "max_new_tokens": (
        "decoding.max_new_tokens",
        lambda kit, base: (base, _adapter_report(kit, decoding=_decoding(kit, max_new_tokens=65))),
    ),
    "batch_size": (
        "decoding.batch_size",
        lambda kit, base: (base, _adapter_report(kit, decoding=_decoding(kit, batch_size=8))),
    ),
    "decoding.backend": (
        "decoding.backend",
        lambda kit, base: (base, _adapter_report(kit, decoding=_decoding(kit, backend="server"))),
    ),
    "decoding.execution": (  # a multi-turn arm played under another loop
        "decoding.execution",
        lambda kit, base: (
            base,
            _adapter_report(
                kit,
                decoding=_decoding(kit, execution={"loop": "bfcl_multi_turn", "step_limit": 20}),
            ),
        ),
    ),
    "sample": (
        "sample",
        lambda kit, base: (base, _identity(_adapter_report(kit), sample=SAMPLE)),
    ),
    "skip_overlong": (
        "skip_overlong",
        lambda kit, base: (base, _identity(_adapter_report(kit), **_skipped())),
    ),
    "skip_overlong.example_ids": (
        "skip_overlong.example_ids",
        lambda kit, base: (
            _identity(base, **_skipped("en-98")),
            _identity(_adapter_report(kit), **_skipped("en-99")),
        ),
    ),
    "slices": (
        "slices",
        lambda kit, base: (
            base,
            _adapter_report(
                kit,
                languages=["en"],
                texts={k: v for k, v in kit.ADAPTER_TEXTS.items() if k.startswith("en")},
            ),
        ),
    ),
    "scoring": (
        "scoring",
        lambda kit, base: (base, _adapter_report(kit, scoring="calls")),
    ),
    "slice_by": (
        "slice_by",
        lambda kit, base: (
            base,
            _adapter_report(kit, kit.golden_split(_topics("weather")), slice_by=["topic"]),
        ),
    ),
    "field_slices": (
        "field_slices",
        lambda kit, base: (
            doc(
                kit.score(kit.golden_split(_topics("weather")), kit.BASE_TEXTS, slice_by=["topic"])
            ),
            _adapter_report(kit, kit.golden_split(_topics("travel")), slice_by=["topic"]),
        ),
    ),
    "metric_names": (
        "metric_names",
        lambda kit, base: (base, _drop_metric(_adapter_report(kit), "argument_f1")),
    ),
    "prompt_set_sha256.en": (
        "prompt_set_sha256.en",
        lambda kit, base: (
            base,
            _adapter_report(
                kit, kit.golden_split(lambda rows: kit.with_prompt(rows, "en-2", "reworded"))
            ),
        ),
    ),
    "prompt_set_sha256.fr": (
        "prompt_set_sha256.fr",
        lambda kit, base: (
            base,
            _adapter_report(
                kit, kit.golden_split(lambda rows: kit.with_prompt(rows, "fr-5", "reworded"))
            ),
        ),
    ),
    "paired_slices": (
        "paired_slices",
        lambda kit, base: (base, _adapter_report(kit, kit.golden_split(_no_sources))),
    ),
    "pair_set_sha256.fr": (
        "pair_set_sha256.fr",
        lambda kit, base: (base, _adapter_report(kit, kit.golden_split(_unpair_first))),
    ),
    "conversation_ids": (
        "conversation_ids",
        lambda kit, base: (base, _adapter_report(kit, kit.golden_split(_in_conversations))),
    ),
    "example_ids": (
        "example_ids",
        lambda kit, base: (
            base,
            _adapter_report(
                kit,
                kit.golden_split(_rename_native_row),
                texts={("fr-5b" if k == "fr-5" else k): v for k, v in kit.ADAPTER_TEXTS.items()},
            ),
        ),
    ),
}


@pytest.fixture(scope="module")
def golden_base(kit):
    return doc(kit.score(kit.golden_split(), kit.BASE_TEXTS, "base", resamples=50))


@pytest.mark.parametrize("case", sorted(CASES))
def test_gate_refuses_naming_the_field(kit, golden_base, case):
    field, build = CASES[case]
    base, adapter = build(kit, golden_base)
    with pytest.raises(ComparisonRefusedError) as info:
        compare_docs(base, adapter, resamples=50)
    assert info.value.field == field
    assert info.value.exit_code == 4
    assert field in str(info.value) and "refusing to compare" in str(info.value)
    with pytest.raises(ComparisonRefusedError) as again:
        check_docs(base, adapter)
    assert again.value.field == field


def test_every_reachable_gate_field_has_a_case():
    covered = {field.split(".")[0] if "sha256." in field else field for field, _ in CASES.values()}
    expected = {field.split(".")[0] if "<language>" in field else field for field in GATE_FIELDS}
    # temperature and do_sample cannot differ between two valid reports: a report with
    # non-greedy decoding is refused by the reader (see the test below).
    assert expected - covered == {"decoding.temperature", "decoding.do_sample"}


@pytest.mark.parametrize(("key", "value"), [("temperature", 0.5), ("do_sample", True)])
def test_non_greedy_decoding_is_refused_before_the_gate(kit, golden_base, key, value):
    adapter = _adapter_report(kit)
    adapter["identity"]["decoding"][key] = value
    with pytest.raises(DataError, match=r"adapter report: identity\.decoding") as info:
        compare_docs(golden_base, adapter)
    assert info.value.exit_code == 2


def test_the_first_difference_in_gate_order_is_named(kit, golden_base):
    adapter = _adapter_report(
        kit,
        kit.golden_split(lambda rows: kit.with_prompt(rows, "en-2", "reworded"), sha="7" * 64),
        decoding=_decoding(kit, batch_size=2),
    )
    with pytest.raises(ComparisonRefusedError) as info:
        compare_docs(golden_base, adapter)
    assert info.value.field == "test_split_sha256"


def test_refused_comparison_writes_nothing(kit, golden_base, tmp_path):
    base_path = write_evaluation_report(
        tmp_path / "base" / "evaluation_report.json", typed(golden_base)
    )
    adapter = _adapter_report(kit, decoding=_decoding(kit, batch_size=8))
    adapter_path = write_evaluation_report(
        tmp_path / "adapter" / "evaluation_report.json", typed(adapter)
    )
    out = tmp_path / "comparison"
    with pytest.raises(ComparisonRefusedError) as info:
        run_comparison(base_path, adapter_path, out)
    assert info.value.field == "decoding.batch_size"
    assert str(base_path) in str(info.value)
    assert not out.exists()


def test_identical_conditions_pass_the_gate_and_one_difference_does_not(kit, golden_base):
    check_docs(golden_base, _adapter_report(kit))
    # The same pair with only the batch size changed is refused: the pass above is the
    # gate's judgement, not a gate that lets everything through.
    with pytest.raises(ComparisonRefusedError) as info:
        check_docs(golden_base, _adapter_report(kit, decoding=_decoding(kit, batch_size=8)))
    assert info.value.field == "decoding.batch_size"
