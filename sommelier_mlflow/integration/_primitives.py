r"""The single MLflow calls sommelier_mlflow makes: metrics, params, tags, artifacts, inputs.

Each function does one kind of write and keeps the rules every write obeys:

* Metrics are logged with as few ``log_batch`` calls as MLflow allows (one per
  1,000 keys, the server's batch limit), never one request per key.
* Every string that leaves the process passes through :func:`redact`; every
  string the store keeps (params, tags, the per-example table) then through
  :func:`~sommelier_mlflow.integration._store_text.store_text`, which escapes
  what no store can hold (NUL, lone surrogates) as ``\uXXXX``.
* Errors are translated by :func:`tracking_errors` (exit 3 unreachable, exit 2
  refused).

MLflow is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._json import canonical_json, dumps_pretty
from sommelier_mlflow._redact import REDACTED, is_secret_key, redact, redact_value
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.evaluation import ComparisonReport
from sommelier_mlflow.integration._figure import comparison_figure, gaps_figure
from sommelier_mlflow.integration._store_errors import tracking_errors
from sommelier_mlflow.integration._store_text import store_text, store_value

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.data import TestSplit

__all__ = [
    "ARTIFACT_DIR",
    "EXAMPLES_TABLE",
    "COMPARISON_FIGURE",
    "GAPS_FIGURE",
    "EVALUATION_REPORT_ARTIFACT",
    "COMPARISON_REPORT_ARTIFACT",
    "COMPARISON_MARKDOWN_ARTIFACT",
    "TAG_MODEL_KIND",
    "TAG_PARSER_VERSION",
    "TAG_TEST_SPLIT_SHA256",
    "TAG_REPORT_SHA256",
    "MAX_METRICS_PER_BATCH",
    "dataset_digest",
    "client_uri",
    "resolve_client",
    "log_metrics_batch",
    "log_params",
    "set_sommelier_tags",
    "artifact_uri",
    "json_artifact_bytes",
    "read_active_run",
    "check_logged_report",
    "log_json_artifact",
    "log_text_artifact",
    "log_artifact_files",
    "log_example_table",
    "log_test_split_input",
    "log_comparison_figure",
]

ARTIFACT_DIR: Final = "sommelier"
EXAMPLES_TABLE: Final = f"{ARTIFACT_DIR}/examples.json"
COMPARISON_FIGURE: Final = f"{ARTIFACT_DIR}/comparison.png"
GAPS_FIGURE: Final = f"{ARTIFACT_DIR}/gaps.png"
EVALUATION_REPORT_ARTIFACT: Final = f"{ARTIFACT_DIR}/evaluation_report.json"
COMPARISON_REPORT_ARTIFACT: Final = f"{ARTIFACT_DIR}/comparison_report.json"
COMPARISON_MARKDOWN_ARTIFACT: Final = f"{ARTIFACT_DIR}/comparison_report.md"
TAG_MODEL_KIND: Final = "sommelier.model_kind"
TAG_PARSER_VERSION: Final = "sommelier.parser_version"
TAG_TEST_SPLIT_SHA256: Final = "sommelier.test_split_sha256"
#: SHA-256 of the report artifact's bytes as logged: a report copied over the
#: artifact later no longer matches it (see :func:`check_logged_report`).
TAG_REPORT_SHA256: Final = "sommelier.report_sha256"
#: MLflow's server-side limits per ``log_batch`` request.
MAX_METRICS_PER_BATCH: Final = 1000
_MAX_PARAMS_PER_BATCH: Final = 100
#: The dataset digest column of MLflow's stores holds at most 36 characters.
_DATASET_DIGEST_LENGTH: Final = 16
#: Copied byte for byte; every other file is scrubbed if it decodes as UTF-8 text.
_BINARY_SUFFIXES: Final = frozenset(
    {".png", ".jpg", ".jpeg", ".webp", ".gif", ".pdf", ".parquet", ".safetensors", ".bin", ".pt"}
)


def dataset_digest(split_sha256: str) -> str:
    """The digest MLflow shows for a test split: the start of its file's SHA-256."""
    return split_sha256[:_DATASET_DIGEST_LENGTH]


def client_uri(client: MlflowClient) -> str | None:
    uri = getattr(client, "tracking_uri", None)
    return str(uri) if uri else None


def resolve_client(client: MlflowClient | None) -> MlflowClient:
    if client is not None:
        return client
    from mlflow.tracking import MlflowClient

    return MlflowClient()


def log_metrics_batch(
    run_id: str,
    metrics: Mapping[str, float],
    *,
    client: MlflowClient | None = None,
    step: int = 0,
    model_id: str | None = None,
    dataset: tuple[str, str] | None = None,
) -> int:
    """Log metric keys with one ``log_batch`` request per 1,000 keys.

    One request keeps a run's metrics consistent (all or nothing, in practice)
    and fast against a remote server. MLflow refuses batches of more than
    1,000 metrics, so a larger mapping is sent as consecutive full batches in
    key order; every key carries the same timestamp and ``step``. With
    ``model_id`` (and ``dataset``, its name and digest) MLflow also records
    every metric on that LoggedModel, for that dataset.

    Returns:
        The number of ``log_batch`` requests made (0 for an empty mapping).

    Raises:
        TrackingError: The tracking store is unreachable (exit 3).
        ConfigError: MLflow refused a key or value (exit 2).
    """
    from mlflow.entities import Metric

    timestamp = int(time.time() * 1000)
    name, digest = dataset if dataset is not None else (None, None)
    entities = [
        Metric(key, float(value), timestamp, step, model_id, name, digest)
        if model_id is not None
        else Metric(key, float(value), timestamp, step)
        for key, value in metrics.items()
    ]
    tracker = resolve_client(client)
    calls = 0
    with tracking_errors("log metrics", client_uri(tracker)):
        for start in range(0, len(entities), MAX_METRICS_PER_BATCH):
            tracker.log_batch(run_id, metrics=entities[start : start + MAX_METRICS_PER_BATCH])
            calls += 1
    return calls


def _flatten(prefix: str, value: object, out: dict[str, object]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    else:
        out[prefix] = value


def _param_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return canonical_json(list(value))
    return str(value)


def log_params(
    run_id: str, params: Mapping[str, object], *, client: MlflowClient | None = None
) -> dict[str, str]:
    """Log params (nested mappings flattened with ``.``), redacted, in batches of 100.

    A key that names a secret (``hf_token``, ``*_password``, ...) is logged as
    :data:`REDACTED`; every other value goes through :func:`redact`, then
    :func:`store_text` (a NUL in a value fails a PostgreSQL store).

    Returns:
        The params exactly as logged.

    Raises:
        TrackingError: The tracking store is unreachable (exit 3).
        ConfigError: A param already logged in this run with another value (exit 2).
    """
    from mlflow.entities import Param

    flat: dict[str, object] = {}
    _flatten("", params, flat)
    logged = {
        key: (
            REDACTED
            if is_secret_key(key.rsplit(".", 1)[-1])
            else store_text(redact(_param_text(value)))
        )
        for key, value in flat.items()
    }
    entities = [Param(key, value) for key, value in logged.items()]
    tracker = resolve_client(client)
    with tracking_errors("log params", client_uri(tracker)):
        for start in range(0, len(entities), _MAX_PARAMS_PER_BATCH):
            tracker.log_batch(run_id, params=entities[start : start + _MAX_PARAMS_PER_BATCH])
    return logged


def set_sommelier_tags(
    run_id: str,
    *,
    model_kind: str | None = None,
    parser_version: str | None = None,
    test_split_sha256: str | None = None,
    extra: Mapping[str, str] | None = None,
    client: MlflowClient | None = None,
) -> dict[str, str]:
    """Set the ``sommelier.*`` tags (those given) plus ``extra`` tags, redacted, in one request.

    Values are store-safe (:func:`store_text`), like params.

    Returns:
        The tags exactly as set.
    """
    from mlflow.entities import RunTag

    tags: dict[str, str] = {}
    for key, value in (
        (TAG_MODEL_KIND, model_kind),
        (TAG_PARSER_VERSION, parser_version),
        (TAG_TEST_SPLIT_SHA256, test_split_sha256),
    ):
        if value is not None:
            tags[key] = store_text(redact(value))
    for key, value in (extra or {}).items():
        tags[key] = REDACTED if is_secret_key(key) else store_text(redact(str(value)))
    if tags:
        tracker = resolve_client(client)
        with tracking_errors("set tags", client_uri(tracker)):
            tracker.log_batch(run_id, tags=[RunTag(key, value) for key, value in tags.items()])
    return tags


def artifact_uri(run_id: str, artifact_path: str) -> str:
    """The full URI of a run's artifact (for ``EvaluationArtifact`` and messages)."""
    from mlflow.tracking.artifact_utils import get_artifact_uri

    with tracking_errors("resolve an artifact URI"):
        uri = get_artifact_uri(  # type: ignore[no-untyped-call]
            run_id=run_id, artifact_path=artifact_path
        )
    return str(uri)


def _split_artifact_file(artifact_file: str) -> tuple[str | None, str]:
    directory, _, name = artifact_file.rpartition("/")
    if not name:
        raise ConfigError(f"artifact file {artifact_file!r} must name a file")
    return (directory or None), name


def json_artifact_bytes(document: Any) -> bytes:
    """The exact bytes :func:`log_json_artifact` logs for ``document``."""
    return dumps_pretty(redact_value(document))


def read_active_run(run_id: str, *, client: MlflowClient | None = None) -> Any:
    """The MLflow ``Run`` of ``run_id``, refusing one that was deleted.

    MLflow keeps a deleted run in its trash, hidden from the UI and from
    searches, but still answers for it by id. A command that read it anyway
    would show or compare results the user threw away, without a word; so
    every run a command is given by id comes through here.

    Raises:
        ConfigError: The run is deleted (exit 2), naming it and how to restore it,
            or MLflow does not know it.
        TrackingError: The tracking store is unreachable (exit 3).
    """
    tracker = resolve_client(client)
    with tracking_errors(f"read run {run_id}", client_uri(tracker)):
        run = tracker.get_run(run_id)
    if run.info.lifecycle_stage == "deleted":
        raise ConfigError(
            f"run {run_id} is deleted (it is in the MLflow trash), so its results are not "
            f"used; restore it with `mlflow runs restore --run-id {run_id}` if it should "
            "count, or pass another run"
        )
    return run


def check_logged_report(run: Any, local: Path, overall: Mapping[str, float] | None = None) -> None:
    """Refuse a downloaded report that is not the one its run logged.

    A report is checked for internal consistency by its reader, but a
    self-consistent report from other outputs copied over the artifact would
    pass that. So the bytes are held to the digest tag set when the run was
    logged, and (for an arm) its overall values to the metrics the run logged.

    Args:
        run: The MLflow ``Run`` the report was downloaded from.
        local: The downloaded report file.
        overall: Metric name to overall value, from the report (an arm's).

    Raises:
        InvariantViolationError: The bytes or a value differ from what the run
            logged (exit 5), naming both.
    """
    run_id = run.info.run_id
    logged = run.data.tags.get(TAG_REPORT_SHA256)
    actual = hashlib.sha256(local.read_bytes()).hexdigest()
    if logged is not None and logged != actual:
        raise InvariantViolationError(
            f"run {run_id}: its report artifact has SHA-256 {actual}, but the run logged a "
            f"report with SHA-256 {logged} (tag {TAG_REPORT_SHA256}); the artifact was "
            "replaced after logging, so it is not trusted"
        )
    for name, value in (overall or {}).items():
        metric = run.data.metrics.get(f"overall/{name}")
        if metric is not None and abs(float(metric) - value) > 1e-12:
            raise InvariantViolationError(
                f"run {run_id}: its report says overall {name} = {value}, but the run logged "
                f"overall/{name} = {metric}; the report artifact is not the run's own"
            )


def log_json_artifact(
    document: Any, artifact_file: str, *, run_id: str, client: MlflowClient | None = None
) -> str:
    """Log a JSON document (redacted, pretty, sorted keys) as ``artifact_file``.

    Returns:
        The artifact's URI.
    """
    directory, name = _split_artifact_file(artifact_file)
    data = json_artifact_bytes(document)
    with tempfile.TemporaryDirectory(prefix="sommelier-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        tracker = resolve_client(client)
        with tracking_errors(f"log artifact {artifact_file}", client_uri(tracker)):
            tracker.log_artifact(run_id, str(path), directory)
    return artifact_uri(run_id, artifact_file)


def log_text_artifact(
    text: str, artifact_file: str, *, run_id: str, client: MlflowClient | None = None
) -> None:
    """Log a text file (redacted) as ``artifact_file``."""
    tracker = resolve_client(client)
    with tracking_errors(f"log artifact {artifact_file}", client_uri(tracker)):
        tracker.log_text(run_id, redact(text), artifact_file)


def _copy_redacted(path: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in _BINARY_SUFFIXES:
        shutil.copyfile(path, destination)
        return
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        destination.write_bytes(raw)
        return
    cleaned = redact(text)
    destination.write_bytes(raw if cleaned == text else cleaned.encode("utf-8"))


def log_artifact_files(
    files: Sequence[str | os.PathLike[str]],
    artifact_path: str = ARTIFACT_DIR,
    *,
    root: str | os.PathLike[str],
    run_id: str,
    client: MlflowClient | None = None,
) -> None:
    """Log exactly ``files`` under ``artifact_path``, at their paths relative to ``root``.

    An explicit list, never a walk of the folder: an output folder may also
    hold files the command did not write (keys, notes, other runs), and those
    must not be uploaded. The files are copied (text ones scrubbed) to a
    temporary directory first, so the local outputs stay byte-exact while the
    logged copies carry no secrets; one upload request follows.

    Raises:
        ConfigError: A file is missing or lies outside ``root`` (exit 2).
        TrackingError: The artifact store is unreachable (exit 3).
    """
    base = Path(root).resolve()
    with tempfile.TemporaryDirectory(prefix="sommelier-") as tmp:
        for name in files:
            path = Path(name).resolve()
            if not path.is_file() or not path.is_relative_to(base):
                raise ConfigError(
                    f"cannot log {os.fspath(name)!r} as an artifact: it is not a file "
                    f"inside {os.fspath(root)!r}"
                )
            _copy_redacted(path, Path(tmp) / path.relative_to(base))
        tracker = resolve_client(client)
        with tracking_errors(f"log artifacts to {artifact_path}", client_uri(tracker)):
            tracker.log_artifacts(run_id, tmp, artifact_path)


def log_example_table(
    rows: Sequence[Mapping[str, Any]],
    *,
    run_id: str,
    artifact_file: str = EXAMPLES_TABLE,
    client: MlflowClient | None = None,
) -> None:
    """Log the per-example table with ``log_table`` (shown in the UI's artifact view).

    Columns are the union of the rows' keys in first-seen order; strings are
    redacted, then made store-safe (:func:`store_value`: a lone surrogate in
    one output would otherwise fail the whole table). Columns are kept as
    ``object`` dtype so the values are written exactly as given (booleans stay
    booleans, ints stay ints).
    """
    import pandas as pd

    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    cleaned = store_value(redact_value([dict(row) for row in rows]))
    frame = pd.DataFrame(
        {
            column: pd.Series([row.get(column) for row in cleaned], dtype=object)
            for column in columns
        }
    )
    tracker = resolve_client(client)
    with tracking_errors(f"log table {artifact_file}", client_uri(tracker)):
        tracker.log_table(run_id, data=frame, artifact_file=artifact_file)


def log_test_split_input(
    split_path: str | os.PathLike[str],
    *,
    run_id: str,
    split: TestSplit | None = None,
    name: str | None = None,
    client: MlflowClient | None = None,
) -> str:
    """Log the test split as the run's dataset input with context ``test``.

    MLflow stores the dataset's schema, profile, digest and source (the local
    path), not its rows. The digest is the start of the split file's SHA-256,
    so the UI shows the same identity the comparison gate checks.

    Args:
        split_path: The test-split file.
        run_id: The run to attach it to.
        split: The already-read split (read from ``split_path`` if omitted).
        name: Dataset name (default: the file name).
        client: Tracking client (default: a new one).

    Returns:
        The dataset digest logged.
    """
    import pandas as pd
    from mlflow.data.dataset_source_registry import get_dataset_source_from_json
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    from sommelier_mlflow.data import read_test_split

    path = Path(split_path).resolve()
    split = split if split is not None else read_test_split(path)
    # A single-call split keeps its one-call column; a split with zero or several
    # calls per example logs each example's list of calls instead.
    single = all(len(e.gold_calls) == 1 for e in split.examples)
    gold_column, gold_values = (
        ("gold_call", [canonical_json(e.gold_calls[0]) for e in split.examples])
        if single
        else ("gold_calls", [canonical_json(list(e.gold_calls)) for e in split.examples])
    )
    frame = pd.DataFrame(
        {
            "example_id": pd.Series([e.example_id for e in split.examples], dtype=object),
            "language": pd.Series([e.language for e in split.examples], dtype=object),
            "source_example_id": pd.Series(
                [e.source_example_id or "" for e in split.examples], dtype=object
            ),
            "query": pd.Series([e.query for e in split.examples], dtype=object),
            gold_column: pd.Series(gold_values, dtype=object),
        }
    )
    if any(e.messages is not None for e in split.examples):
        # Conversation turns: the history each turn answers, as the evaluator's
        # messages column reads it (query stays the last user message, a label).
        frame["conversation_id"] = [e.conversation_id or "" for e in split.examples]
        frame["turn"] = [e.turn or 0 for e in split.examples]
        frame["messages"] = [
            "" if e.messages is None else canonical_json(list(e.messages)) for e in split.examples
        ]
    digest = dataset_digest(split.sha256)
    tracker = resolve_client(client)
    with tracking_errors("log the test split as a dataset input", client_uri(tracker)):
        # An explicit source and digest: MLflow would otherwise guess the source
        # type (with a warning) and hash the frame itself.
        source = get_dataset_source_from_json(canonical_json({"uri": redact(str(path))}), "local")
        dataset = from_pandas(frame, source=source, name=redact(name or path.name), digest=digest)
        inputs = [
            DatasetInput(
                dataset=dataset._to_mlflow_entity(),
                tags=[InputTag(key=MLFLOW_DATASET_CONTEXT, value="test")],
            )
        ]
        try:
            tracker.log_inputs(run_id, inputs)
        except Exception as exc:
            # Runs logging the same split at once race to insert one dataset row;
            # the loser's insert fails on the key. The row exists now, so one
            # retry links this run to it.
            if not _lost_dataset_insert_race(exc):
                raise
            time.sleep(0.5)
            tracker.log_inputs(run_id, inputs)
    return digest


#: How each store words a second insert of one dataset key, as MLflow passes it on
#: (also through a tracking server): PostgreSQL names the key, SQLite its columns.
_DUPLICATE_DATASET_HINTS: Final = (
    "dataset_pk",
    "UniqueViolation",
    "UNIQUE constraint failed: datasets.",
)


def _lost_dataset_insert_race(exc: BaseException) -> bool:
    message = str(exc)
    return any(hint in message for hint in _DUPLICATE_DATASET_HINTS)


def log_comparison_figure(
    comparison_report: ComparisonReport,
    *,
    run_id: str,
    artifact_file: str = COMPARISON_FIGURE,
    client: MlflowClient | None = None,
) -> list[str]:
    """Log the forest plot of the deltas and, if there are pairs, the gaps chart.

    ``sommelier/comparison.png`` always; ``sommelier/gaps.png`` when the
    report has matched-pair language gaps (a split with translations).

    Returns:
        The artifact files logged.
    """
    figures = [(artifact_file, comparison_figure(comparison_report))]
    if any(comparison_report.gaps.get(kind) for kind in ("base", "adapter")):
        figures.append((GAPS_FIGURE, gaps_figure(comparison_report)))
    tracker = resolve_client(client)
    for name, figure in figures:
        with tracking_errors(f"log figure {name}", client_uri(tracker)):
            tracker.log_figure(run_id, figure, name)
    return [name for name, _ in figures]
