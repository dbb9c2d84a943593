"""MLflow evaluation datasets as test splits: read one (``mlflow-dataset:NAME``), push one.

Teams keep evaluation data in MLflow evaluation datasets (records of
``inputs``, ``expectations`` and ``tags`` on a SQL-backed tracking store).
This module is the only place that talks to them: it fetches a dataset's
records and hands them, as plain mappings, to the data layer, which checks
them exactly as it checks a split file (the record layout is documented in
:mod:`sommelier_mlflow.data._dataset_records`); and it writes a split's
examples into a new dataset.

A dataset is named by its name or by its id (``d-`` and 32 hex digits); a
reference of the id's shape is always an id, so ``push`` refuses to give a
dataset a name of that shape (it could never be read by it). Its
name, id and MLflow's digest of it travel with the split into the
evaluation report, where the comparison gate holds them equal between arms.

Importing this module stays cheap: MLflow is imported inside the functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._redact import redact
from sommelier_mlflow.data import DatasetRef, dataset_records, read_dataset_records
from sommelier_mlflow.errors import ConfigError, DependencyError, TrackingError
from sommelier_mlflow.integration._store_errors import tracking_errors

if TYPE_CHECKING:
    from mlflow.genai.datasets import EvaluationDataset

    from sommelier_mlflow.data import TestSplit

__all__ = [
    "DATASET_PREFIX",
    "is_dataset_reference",
    "read_dataset_split",
    "PushedDataset",
    "push_dataset_split",
]

#: ``--test-split mlflow-dataset:<name or id>`` reads an MLflow evaluation dataset.
DATASET_PREFIX: Final = "mlflow-dataset:"
_DATASET_ID: Final = re.compile(r"d-[0-9a-f]{32}")
_SQL_STORE_HINT: Final = (
    "evaluation datasets need a SQL-backed tracking store: set MLFLOW_TRACKING_URI to one "
    "such as sqlite:///mlflow.db, or to a server started with "
    "--backend-store-uri sqlite:///mlflow.db"
)


def is_dataset_reference(value: object) -> bool:
    """Whether a ``--test-split`` value names an MLflow evaluation dataset."""
    return isinstance(value, str) and value.startswith(DATASET_PREFIX)


def _store_uri() -> str:
    import mlflow

    return redact(str(mlflow.get_tracking_uri()))


@contextmanager
def _dataset_errors(action: str) -> Iterator[None]:
    """:func:`tracking_errors`, plus the one refusal it cannot word: a store without datasets.

    A file store (or a server in front of one) answers every dataset call
    with MLflow's ``FEATURE_DISABLED``.
    """
    from mlflow.exceptions import MlflowException

    uri = _store_uri()
    with tracking_errors(action, uri):
        try:
            yield
        except MlflowException as exc:
            if str(getattr(exc, "error_code", "")) != "FEATURE_DISABLED":
                raise
            raise ConfigError(
                f"cannot {action}: the MLflow tracking store at {uri} keeps no evaluation "
                f"datasets (a file store); {_SQL_STORE_HINT}"
            ) from None


def _name_filter(name: str) -> str:
    if "'" not in name:
        return f"name = '{name}'"
    if '"' not in name:
        return f'name = "{name}"'
    raise ConfigError(
        f"dataset name {name!r} holds both quote characters, which MLflow's search cannot "
        "express; name the dataset by its id (mlflow-dataset:d-...)"
    )


def _named(name: str) -> list[EvaluationDataset]:
    """Every dataset of the store with exactly this name (MLflow does not keep names unique)."""
    from mlflow.genai.datasets import search_datasets

    found = search_datasets(filter_string=_name_filter(name), max_results=50)
    return [dataset for dataset in found if dataset.name == name]


def _find(reference: str) -> EvaluationDataset:
    """The one dataset a name or id names.

    Raises:
        DependencyError: No such dataset (exit 3).
        ConfigError: Several datasets share the name (exit 2).
    """
    from mlflow.exceptions import MlflowException
    from mlflow.genai.datasets import get_dataset

    if _DATASET_ID.fullmatch(reference):
        try:
            found: EvaluationDataset = get_dataset(dataset_id=reference)
            return found
        except MlflowException as exc:
            if str(getattr(exc, "error_code", "")) != "RESOURCE_DOES_NOT_EXIST":
                raise
        matches = []
    else:
        matches = _named(reference)
    if not matches:
        if _DATASET_ID.fullmatch(reference):
            raise DependencyError(
                f"no MLflow evaluation dataset with id {reference!r} in the tracking store at "
                f"{_store_uri()}; check MLFLOW_TRACKING_URI, or copy the id `dataset push` "
                "printed (a deleted dataset's id is gone for good)"
            )
        raise DependencyError(
            f"no MLflow evaluation dataset {reference!r} in the tracking store at "
            f"{_store_uri()}; check MLFLOW_TRACKING_URI, or create it from a split file with "
            f"`sommelier-mlflow dataset push SPLIT --name {reference}`"
        )
    if len(matches) > 1:
        ids = ", ".join(sorted(dataset.dataset_id for dataset in matches))
        raise ConfigError(
            f"{len(matches)} MLflow evaluation datasets are named {reference!r} ({ids}); "
            f"name the one to use by its id: --test-split {DATASET_PREFIX}<id>"
        )
    return matches[0]


def _ref(dataset: EvaluationDataset) -> DatasetRef:
    """The name, id and digest a report records; a store that gives no digest cannot be used."""
    if not dataset.digest:
        raise TrackingError(
            f"the tracking store at {_store_uri()} gives no digest for the MLflow evaluation "
            f"dataset {dataset.name!r}, so a report could not prove which records it scored"
        )
    return DatasetRef(dataset.name, dataset.dataset_id, dataset.digest)


def _plain_records(dataset: EvaluationDataset) -> list[dict[str, Any]]:
    return [
        {
            "record_id": row["dataset_record_id"],
            "inputs": row["inputs"],
            "expectations": row["expectations"],
            "tags": row["tags"],
        }
        for row in dataset.to_df().to_dict(orient="records")
    ]


def read_dataset_split(reference: str, *, slice_by: Iterable[str] = ()) -> TestSplit:
    """Read ``mlflow-dataset:<name or id>`` from the current tracking store as a test split.

    Args:
        reference: The ``--test-split`` value (with its ``mlflow-dataset:`` prefix).
        slice_by: Declared slice fields, read from the records' tags.

    Returns:
        The split, its ``dataset`` the name, id and digest read.

    Raises:
        ConfigError: An empty name, a store that keeps no datasets (a file
            store), or a name several datasets share (exit 2).
        DependencyError: No such dataset (exit 3).
        TrackingError: The store is unreachable, or the dataset changed while
            it was read (exit 3).
        DataError: A record without the needed keys, or any row a split file
            would be refused for, naming the record id (exit 2).
    """
    name = reference.removeprefix(DATASET_PREFIX).strip()
    if not name:
        raise ConfigError(
            f"{reference!r} names no dataset: write {DATASET_PREFIX}<name or id>, "
            "e.g. mlflow-dataset:tool-calls-test"
        )
    with _dataset_errors(f"read the MLflow evaluation dataset {name!r}"):
        dataset = _find(name)
        records = _plain_records(dataset)
        # MLflow's digest changes with every edit: reading it again proves the
        # records fetched in between belong to the digest the report records.
        after = _find(dataset.dataset_id).digest
    if after != dataset.digest:
        raise TrackingError(
            f"the MLflow evaluation dataset {dataset.name!r} ({dataset.dataset_id}) changed "
            "while it was read; run the command again once nobody is editing it"
        )
    return read_dataset_records(
        records,
        source=f"{DATASET_PREFIX}{dataset.name}",
        dataset=_ref(dataset),
        slice_by=slice_by,
    )


@dataclass(frozen=True)
class PushedDataset:
    """A dataset written by :func:`push_dataset_split`.

    Attributes:
        dataset: Its name, id and digest after the records were written.
        records: How many records it holds.
        replaced: Ids of the same-named datasets deleted (``replace=True``).
        tracking_uri: The store it lives in (credentials redacted).
    """

    dataset: DatasetRef
    records: int
    replaced: tuple[str, ...]
    tracking_uri: str


def push_dataset_split(
    split: TestSplit, name: str, *, replace: bool = False, experiment_id: str | None = None
) -> PushedDataset:
    """Write a split's examples into a new MLflow evaluation dataset named ``name``.

    A name already in use is refused unless ``replace`` is set; the new
    dataset is then written in full before the old ones are deleted, so a
    failure leaves the old dataset in place.

    Args:
        split: The split to write (as :func:`~sommelier_mlflow.data.read_test_split` read it).
        name: The new dataset's name.
        replace: Delete the datasets already named ``name`` once the new one is written.
        experiment_id: The experiment to associate it with (default: MLflow's
            current experiment).

    Raises:
        ConfigError: The name is taken (without ``replace``), has the shape of
            a dataset id, or the store keeps no datasets (exit 2).
        DataError: Two examples with the same inputs (exit 2).
        TrackingError: The store is unreachable or failed (exit 3).
    """
    from mlflow.genai.datasets import create_dataset, delete_dataset, get_dataset

    if not name.strip() or name != name.strip():
        raise ConfigError(f"dataset name {name!r} must be non-empty, without outer spaces")
    if _DATASET_ID.fullmatch(name):
        raise ConfigError(
            f"dataset name {name!r} looks like a dataset id (d- and 32 hex digits), and "
            f"{DATASET_PREFIX}{name} is always read as an id, so the dataset could never be "
            "found by this name; choose a --name of another shape (MLflow gives the dataset "
            "an id of its own)"
        )
    records = dataset_records(split.examples, source=split.path)
    with _dataset_errors(f"write the MLflow evaluation dataset {name!r}"):
        existing = _named(name)
        if existing and not replace:
            ids = ", ".join(sorted(dataset.dataset_id for dataset in existing))
            raise ConfigError(
                f"an MLflow evaluation dataset named {name!r} already exists ({ids}) in the "
                f"tracking store at {_store_uri()}; choose another --name, or pass --replace to "
                "write a new one and delete the old"
            )
        created = create_dataset(
            name=name,
            experiment_id=experiment_id,
            tags={"sommelier.source_sha256": split.sha256},
        )
        try:
            created.merge_records(records)
        except BaseException:
            delete_dataset(dataset_id=created.dataset_id)  # no half-written dataset stays
            raise
        for old in existing:
            delete_dataset(dataset_id=old.dataset_id)
        written = get_dataset(dataset_id=created.dataset_id)
    return PushedDataset(
        dataset=_ref(written),
        records=len(records),
        replaced=tuple(sorted(old.dataset_id for old in existing)),
        tracking_uri=_store_uri(),
    )
