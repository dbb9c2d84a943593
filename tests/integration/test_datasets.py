"""MLflow evaluation datasets against a real SQLite tracking store: push, read, refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow.data import (
    BFCL_MULTI_TURN_CATEGORIES,
    TestSplit,
    import_bfcl,
    read_test_split,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, DependencyError
from sommelier_mlflow.integration import push_dataset_split, read_dataset_split
from tests.cli.cli_helpers import examples
from tests.integration.integration_helpers import Store
from tests.support.bfcl_reference import bfcl_package_root


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> TestSplit:
    return read_test_split(write_test_split(tmp_path_factory.mktemp("ds") / "t.jsonl", examples()))


def test_a_pushed_split_reads_back_by_name_and_by_id(store: Store, split: TestSplit) -> None:
    pushed = push_dataset_split(split, "round-trip")
    assert (pushed.records, pushed.replaced) == (len(split.examples), ())
    assert pushed.tracking_uri == store.uri
    by_name = read_dataset_split("mlflow-dataset:round-trip")
    by_id = read_dataset_split(f"mlflow-dataset:{pushed.dataset.dataset_id}")
    assert by_name.dataset == by_id.dataset == pushed.dataset
    assert pushed.dataset.name == "round-trip" and pushed.dataset.dataset_id.startswith("d-")
    assert by_name.examples == by_id.examples
    assert list(by_name.examples) == sorted(split.examples, key=lambda e: e.example_id)
    assert by_name.path == "mlflow-dataset:round-trip"


def test_a_taken_name_is_refused_unless_replaced(store: Store, split: TestSplit) -> None:
    first = push_dataset_split(split, "taken")
    with pytest.raises(ConfigError, match=r"already exists .* pass --replace") as info:
        push_dataset_split(split, "taken")
    assert info.value.exit_code == 2 and first.dataset.dataset_id in str(info.value)
    second = push_dataset_split(split, "taken", replace=True)
    assert second.replaced == (first.dataset.dataset_id,)
    assert read_dataset_split("mlflow-dataset:taken").dataset == second.dataset
    with pytest.raises(DependencyError):
        read_dataset_split(f"mlflow-dataset:{first.dataset.dataset_id}")


def test_a_missing_dataset_is_exit_3_naming_the_store_and_the_fix(store: Store) -> None:
    with pytest.raises(DependencyError) as info:
        read_dataset_split("mlflow-dataset:no-such-dataset")
    message = str(info.value)
    assert info.value.exit_code == 3 and store.uri in message
    assert "sommelier-mlflow dataset push SPLIT --name no-such-dataset" in message
    with pytest.raises(ConfigError, match="names no dataset"):
        read_dataset_split("mlflow-dataset: ")


def test_a_file_store_is_exit_2_with_its_uri_scrubbed(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file://ana:s3cret-pw@{tmp_path / 'mlruns'}")
    try:
        with pytest.raises(ConfigError) as info:
            read_dataset_split("mlflow-dataset:anything")
    finally:
        mlflow.set_tracking_uri(store.uri)
    message = str(info.value)
    assert info.value.exit_code == 2 and "s3cret-pw" not in message
    assert f"file://**********@{tmp_path / 'mlruns'}" in message
    assert "keeps no evaluation datasets" in message and "sqlite:///mlflow.db" in message


def test_a_name_shaped_like_an_id_is_refused_at_push_saying_why(
    store: Store, split: TestSplit
) -> None:
    # Every reader takes d-<32 hex digits> for an id, so a dataset of that name could never
    # be read by its name: it must not be written.
    id_shaped = "d-" + "0123456789abcdef" * 2
    with pytest.raises(ConfigError, match=r"looks like a dataset id .* choose a --name") as info:
        push_dataset_split(split, id_shaped)
    assert info.value.exit_code == 2
    from mlflow.genai.datasets import search_datasets

    assert not [found for found in search_datasets() if found.name == id_shaped]
    # An unknown id is not a name to push under: the message says so.
    with pytest.raises(DependencyError) as missing:
        read_dataset_split(f"mlflow-dataset:{id_shaped}")
    assert "--name" not in str(missing.value) and "no MLflow evaluation dataset with id" in str(
        missing.value
    )


def test_multi_turn_rows_keep_their_turns_and_answers_through_a_store(
    store: Store, tmp_path: Path
) -> None:
    data = bfcl_package_root() / "bfcl_eval" / "data"
    imported = import_bfcl(data, tmp_path / "mt.jsonl", categories=BFCL_MULTI_TURN_CATEGORIES)
    whole = read_test_split(imported.split_path, slice_by=["category"])
    # One question per category, long_context's large initial_config among them.
    chosen = [whole.examples[index] for index in (0, 200, 400, 600)]
    split = read_test_split(
        write_test_split(tmp_path / "four.jsonl", chosen), slice_by=["category"]
    )
    push_dataset_split(split, "multi-turn")
    back = read_dataset_split("mlflow-dataset:multi-turn", slice_by=["category"])
    assert list(back.examples) == sorted(chosen, key=lambda e: e.example_id)
    assert all(example.multi_turn is not None for example in back.examples)
