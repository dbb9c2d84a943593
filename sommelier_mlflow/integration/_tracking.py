"""Everything sommelier_mlflow records in MLflow, in one place.

Every entry point (``evaluate``, ``score``, ``compare``, ``main``) and the
``sommelier`` evaluator plugin log through these functions, so one run looks
the same whichever way it was produced: the same metric keys (see
:mod:`._keys`), the same params and tags, artifacts under ``sommelier/``.

Three rules hold for every function here:

* Metrics are logged with as few ``log_batch`` calls as MLflow allows (one per
  1,000 keys, the server's batch limit), never one request per key.
* Every string that leaves the process passes through :func:`redact`.
* MLflow and ``requests`` errors are translated where they enter: an
  unreachable tracking server or artifact store becomes
  :class:`~sommelier_mlflow.errors.TrackingError` (exit 3); a request MLflow
  refuses (a changed param, an unknown run) becomes
  :class:`~sommelier_mlflow.errors.ConfigError` (exit 2).

MLflow is imported inside the functions, so importing this module stays cheap
and the pure key functions work without the tracking client.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._json import canonical_json, dumps_pretty
from sommelier_mlflow.errors import ConfigError, DataError, SommelierError, TrackingError
from sommelier_mlflow.integration._figure import comparison_figure
from sommelier_mlflow.integration._keys import (
    comparison_metric_keys,
    evaluation_metric_keys,
    interval_label,
)
from sommelier_mlflow.integration._redact import REDACTED, is_secret_key, redact, redact_value

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.data import TestSplit

__all__ = [
    "ARTIFACT_DIR",
    "COMPARISON_FIGURE",
    "EXAMPLES_TABLE",
    "MAX_METRICS_PER_BATCH",
    "REDACTED",
    "TAG_MODEL_KIND",
    "TAG_PARSER_VERSION",
    "TAG_TEST_SPLIT_SHA256",
    "artifact_uri",
    "check_tracking_server",
    "comparison_figure",
    "comparison_metric_keys",
    "comparison_params",
    "evaluation_metric_keys",
    "evaluation_params",
    "interval_label",
    "log_artifacts_dir",
    "log_comparison_figure",
    "log_comparison_run",
    "log_evaluation_run",
    "log_example_table",
    "log_json_artifact",
    "log_metrics_batch",
    "log_params",
    "log_test_split_input",
    "log_text_artifact",
    "redact",
    "redact_value",
    "set_sommelier_tags",
    "tracking_errors",
]

ARTIFACT_DIR: Final = "sommelier"
EXAMPLES_TABLE: Final = f"{ARTIFACT_DIR}/examples.json"
COMPARISON_FIGURE: Final = f"{ARTIFACT_DIR}/comparison.png"
EVALUATION_REPORT_ARTIFACT: Final = f"{ARTIFACT_DIR}/evaluation_report.json"
COMPARISON_REPORT_ARTIFACT: Final = f"{ARTIFACT_DIR}/comparison_report.json"
COMPARISON_MARKDOWN_ARTIFACT: Final = f"{ARTIFACT_DIR}/comparison_report.md"
TAG_MODEL_KIND: Final = "sommelier.model_kind"
TAG_PARSER_VERSION: Final = "sommelier.parser_version"
TAG_TEST_SPLIT_SHA256: Final = "sommelier.test_split_sha256"
#: MLflow's server-side limits per ``log_batch`` request.
MAX_METRICS_PER_BATCH: Final = 1000
_MAX_PARAMS_PER_BATCH: Final = 100
#: The dataset digest column of MLflow's stores holds at most 36 characters.
_DATASET_DIGEST_LENGTH: Final = 16
#: Copied byte for byte; every other file is scrubbed if it decodes as UTF-8 text.
_BINARY_SUFFIXES: Final = frozenset(
    {".png", ".jpg", ".jpeg", ".webp", ".gif", ".pdf", ".parquet", ".safetensors", ".bin", ".pt"}
)
_UNREACHABLE_HINTS: Final = (
    "failed with exception",
    "failed with timeout",
    "max retries exceeded",
    "connection refused",
    "unable to open database file",
    "name or service not known",
)


# --------------------------------------------------------------------------- errors


def _tracking_uri() -> str:
    try:
        import mlflow

        return str(mlflow.get_tracking_uri())
    except Exception:  # the URI is only decoration for a message
        return "<unknown tracking URI>"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_unreachable(exc: BaseException) -> bool:
    import requests

    for link in _chain(exc):
        if isinstance(link, (requests.ConnectionError, requests.Timeout, ConnectionError)):
            return True
        if type(link).__name__ == "OperationalError":  # sqlalchemy / sqlite3: store unusable
            return True
        message = str(link).lower()
        if any(hint in message for hint in _UNREACHABLE_HINTS):
            return True
    return False


def _translate(exc: Exception, action: str, uri: str | None) -> SommelierError | None:
    from mlflow.exceptions import MlflowException

    reason = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    where = redact(uri or _tracking_uri())
    if _is_unreachable(exc):
        return TrackingError(
            f"cannot {action}: the MLflow tracking store at {where} is unreachable ({reason}); "
            "start the tracking server, or set MLFLOW_TRACKING_URI to a reachable server "
            "or a local store such as sqlite:///mlruns.db"
        )
    if isinstance(exc, MlflowException):
        code = str(getattr(exc, "error_code", ""))
        if code in {
            "INVALID_PARAMETER_VALUE",
            "RESOURCE_DOES_NOT_EXIST",
            "RESOURCE_ALREADY_EXISTS",
            "INVALID_STATE",
            "BAD_REQUEST",
        }:
            return ConfigError(f"MLflow refused to {action} ({where}): {reason}")
        return TrackingError(f"MLflow failed to {action} ({where}): {reason}")
    if isinstance(exc, OSError):
        return TrackingError(
            f"cannot {action} ({where}): {reason}; check that the tracking store and the "
            "experiment's artifact location exist and are writable"
        )
    return None


@contextmanager
def tracking_errors(action: str, tracking_uri: str | None = None) -> Iterator[None]:
    """Translate MLflow, ``requests`` and store errors raised inside the block.

    Args:
        action: What was being done, for the message ("log metrics").
        tracking_uri: The store concerned (default: MLflow's current one).

    Raises:
        TrackingError: The tracking server or artifact store is unreachable or
            failed (exit 3).
        ConfigError: MLflow refused the request, e.g. a param re-logged with a
            different value or an unknown run id (exit 2).
    """
    try:
        yield
    except SommelierError:
        raise
    except Exception as exc:
        translated = _translate(exc, action, tracking_uri)
        if translated is None:
            raise
        # Chaining would print the original message, which may hold credentials.
        cause = exc if redact(str(exc)) == str(exc) else None
        raise translated from cause


def check_tracking_server(tracking_uri: str | None = None, *, timeout: float = 10.0) -> str:
    """Fail fast, with one clear message, if the tracking store cannot be reached.

    MLflow retries an unreachable HTTP server for minutes before giving up; a
    command line should say so in seconds. For ``http(s)`` URIs this probes the
    server's ``/health`` endpoint once (any HTTP answer counts as reachable);
    for other stores it opens the store and lists one experiment.

    Returns:
        The tracking URI, redacted (safe to print).

    Raises:
        TrackingError: The store is unreachable (exit 3).
    """
    import mlflow

    uri = tracking_uri or str(mlflow.get_tracking_uri())
    shown = redact(uri)
    if uri.startswith(("http://", "https://")):
        import requests

        try:
            requests.get(f"{uri.rstrip('/')}/health", timeout=timeout)
        except requests.RequestException as exc:
            raise TrackingError(
                f"cannot reach the MLflow tracking server at {shown} "
                f"({type(exc).__name__}); start it (mlflow server ...) or set "
                "MLFLOW_TRACKING_URI to a reachable server or a local store such as "
                "sqlite:///mlruns.db"
            ) from None
        return shown
    from mlflow.tracking import MlflowClient

    with tracking_errors("open the tracking store", uri):
        MlflowClient(uri).search_experiments(max_results=1)
    return shown


# --------------------------------------------------------------------------- primitives


def _uri_of(client: MlflowClient) -> str | None:
    uri = getattr(client, "tracking_uri", None)
    return str(uri) if uri else None


def _client(client: MlflowClient | None) -> MlflowClient:
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
) -> int:
    """Log metric keys with one ``log_batch`` request per 1,000 keys.

    One request keeps a run's metrics consistent (all or nothing, in practice)
    and fast against a remote server. MLflow refuses batches of more than
    1,000 metrics, so a larger mapping is sent as consecutive full batches in
    key order; every key carries the same timestamp and ``step``.

    Returns:
        The number of ``log_batch`` requests made (0 for an empty mapping).

    Raises:
        TrackingError: The tracking store is unreachable (exit 3).
        ConfigError: MLflow refused a key or value (exit 2).
    """
    from mlflow.entities import Metric

    timestamp = int(time.time() * 1000)
    entities = [Metric(key, float(value), timestamp, step) for key, value in metrics.items()]
    tracker = _client(client)
    calls = 0
    with tracking_errors("log metrics", _uri_of(tracker)):
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
    :data:`REDACTED`; every other value goes through :func:`redact`.

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
        key: REDACTED if is_secret_key(key.rsplit(".", 1)[-1]) else redact(_param_text(value))
        for key, value in flat.items()
    }
    entities = [Param(key, value) for key, value in logged.items()]
    tracker = _client(client)
    with tracking_errors("log params", _uri_of(tracker)):
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
            tags[key] = redact(value)
    for key, value in (extra or {}).items():
        tags[key] = REDACTED if is_secret_key(key) else redact(str(value))
    if tags:
        tracker = _client(client)
        with tracking_errors("set tags", _uri_of(tracker)):
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


def log_json_artifact(
    document: Any, artifact_file: str, *, run_id: str, client: MlflowClient | None = None
) -> str:
    """Log a JSON document (redacted, pretty, sorted keys) as ``artifact_file``.

    Returns:
        The artifact's URI.
    """
    directory, name = _split_artifact_file(artifact_file)
    data = dumps_pretty(redact_value(document))
    with tempfile.TemporaryDirectory(prefix="sommelier-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        tracker = _client(client)
        with tracking_errors(f"log artifact {artifact_file}", _uri_of(tracker)):
            tracker.log_artifact(run_id, str(path), directory)
    return artifact_uri(run_id, artifact_file)


def log_text_artifact(
    text: str, artifact_file: str, *, run_id: str, client: MlflowClient | None = None
) -> None:
    """Log a text file (redacted) as ``artifact_file``."""
    tracker = _client(client)
    with tracking_errors(f"log artifact {artifact_file}", _uri_of(tracker)):
        tracker.log_text(run_id, redact(text), artifact_file)


def _copy_redacted(source: Path, target: Path) -> None:
    for path in sorted(source.rglob("*")):
        destination = target / path.relative_to(source)
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() in _BINARY_SUFFIXES:
            shutil.copyfile(path, destination)
            continue
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            destination.write_bytes(raw)
            continue
        cleaned = redact(text)
        destination.write_bytes(raw if cleaned == text else cleaned.encode("utf-8"))


def log_artifacts_dir(
    local_dir: str | os.PathLike[str],
    artifact_path: str = ARTIFACT_DIR,
    *,
    run_id: str,
    client: MlflowClient | None = None,
) -> None:
    """Log a directory tree under ``artifact_path``, text files redacted on the way.

    The files are copied (text ones scrubbed) to a temporary directory first,
    so the local outputs stay byte-exact while the logged copies carry no
    secrets.

    Raises:
        ConfigError: ``local_dir`` is not a directory (exit 2).
        TrackingError: The artifact store is unreachable (exit 3).
    """
    source = Path(local_dir)
    if not source.is_dir():
        raise ConfigError(f"cannot log artifacts from {os.fspath(local_dir)!r}: not a directory")
    with tempfile.TemporaryDirectory(prefix="sommelier-") as tmp:
        _copy_redacted(source, Path(tmp))
        tracker = _client(client)
        with tracking_errors(f"log artifacts to {artifact_path}", _uri_of(tracker)):
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
    redacted. Columns are kept as ``object`` dtype so the values are written
    exactly as given (booleans stay booleans, ints stay ints).
    """
    import pandas as pd

    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    cleaned = redact_value([dict(row) for row in rows])
    frame = pd.DataFrame(
        {
            column: pd.Series([row.get(column) for row in cleaned], dtype=object)
            for column in columns
        }
    )
    tracker = _client(client)
    with tracking_errors(f"log table {artifact_file}", _uri_of(tracker)):
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
    frame = pd.DataFrame(
        {
            "example_id": pd.Series([e.example_id for e in split.examples], dtype=object),
            "language": pd.Series([e.language for e in split.examples], dtype=object),
            "source_example_id": pd.Series(
                [e.source_example_id or "" for e in split.examples], dtype=object
            ),
            "query": pd.Series([e.query for e in split.examples], dtype=object),
            "gold_call": pd.Series(
                [canonical_json(e.gold_call) for e in split.examples], dtype=object
            ),
        }
    )
    digest = split.sha256[:_DATASET_DIGEST_LENGTH]
    tracker = _client(client)
    with tracking_errors("log the test split as a dataset input", _uri_of(tracker)):
        # An explicit source and digest: MLflow would otherwise guess the source
        # type (with a warning) and hash the frame itself.
        source = get_dataset_source_from_json(canonical_json({"uri": redact(str(path))}), "local")
        dataset = from_pandas(frame, source=source, name=redact(name or path.name), digest=digest)
        tracker.log_inputs(
            run_id,
            [
                DatasetInput(
                    dataset=dataset._to_mlflow_entity(),
                    tags=[InputTag(key=MLFLOW_DATASET_CONTEXT, value="test")],
                )
            ],
        )
    return digest


def log_comparison_figure(
    comparison_report: Mapping[str, Any],
    *,
    run_id: str,
    artifact_file: str = COMPARISON_FIGURE,
    client: MlflowClient | None = None,
) -> None:
    """Draw :func:`comparison_figure` and log it as ``sommelier/comparison.png``."""
    figure = comparison_figure(comparison_report)
    tracker = _client(client)
    with tracking_errors(f"log figure {artifact_file}", _uri_of(tracker)):
        tracker.log_figure(run_id, figure, artifact_file)


# --------------------------------------------------------------------------- params


def _get(mapping: Mapping[str, Any], *path: str) -> Any:
    current: Any = mapping
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            raise DataError(f"report lacks {'.'.join(path)}; cannot derive the run's params")
        current = current[part]
    return current


def _identity_params(
    model_identity: Mapping[str, Any], decoding: Mapping[str, Any], parser_version: object
) -> dict[str, object]:
    return {
        "base_model": model_identity.get("base_model"),
        "base_revision": model_identity.get("base_revision"),
        "tokenizer": model_identity.get("tokenizer"),
        "tokenizer_revision": model_identity.get("tokenizer_revision"),
        "parser_version": parser_version,
        **{f"decoding.{key}": decoding[key] for key in sorted(decoding)},
    }


def _bootstrap_params(settings: object) -> dict[str, object]:
    if not isinstance(settings, Mapping):
        return {}
    return {
        f"bootstrap.{key}": settings[key]
        for key in ("seed", "resamples", "confidence", "method")
        if key in settings
    }


def evaluation_params(report: Mapping[str, Any]) -> dict[str, object]:
    """The params of an arm's run, derived from its evaluation report.

    Model and tokenizer ids and revisions, the adapter's source and digest
    (``None`` for base), the parser version, every decoding field (batch size
    included) and the bootstrap seed and resamples. Names avoid the MLproject
    parameter names (``model``, ``adapter``, ``batch_size``...), which MLflow
    logs itself and would refuse to see re-logged with a resolved value.
    """
    identity = _get(report, "identity")
    adapter = identity.get("adapter")
    params = _identity_params(
        _get(identity, "model_identity"), _get(identity, "decoding"), identity.get("parser_version")
    )
    params["adapter_source"] = adapter.get("source") if isinstance(adapter, Mapping) else None
    params["adapter_sha256"] = adapter.get("sha256") if isinstance(adapter, Mapping) else None
    params.update(_bootstrap_params(report.get("bootstrap")))
    return params


def comparison_params(report: Mapping[str, Any]) -> dict[str, object]:
    """The params of a comparison run: shared identity, the adapter, bootstrap settings."""
    identity = _get(report, "identity")
    params = _identity_params(
        _get(identity, "model_identity"), _get(identity, "decoding"), identity.get("parser_version")
    )
    runs = report.get("runs")
    adapter = _get(runs, "adapter", "adapter") if isinstance(runs, Mapping) else None
    params["adapter_source"] = adapter.get("source") if isinstance(adapter, Mapping) else None
    params["adapter_sha256"] = adapter.get("sha256") if isinstance(adapter, Mapping) else None
    params.update(_bootstrap_params(report.get("bootstrap")))
    return params


# --------------------------------------------------------------------------- whole runs


def log_evaluation_run(
    report: Mapping[str, Any],
    *,
    run_id: str,
    artifacts_dir: str | os.PathLike[str] | None = None,
    test_split_path: str | os.PathLike[str] | None = None,
    split: TestSplit | None = None,
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    params: Mapping[str, object] | None = None,
    client: MlflowClient | None = None,
) -> dict[str, float]:
    """Record one arm's evaluation in an existing run.

    Logs, in order: every metric key (one batch), the params of
    :func:`evaluation_params` plus ``params``, the three ``sommelier.*`` tags,
    the test split as dataset input (if ``test_split_path``), the directory
    ``artifacts_dir`` under ``sommelier/`` (e.g. ``generations/<slice>.jsonl``),
    ``sommelier/evaluation_report.json`` and the per-example table.

    Args:
        report: The arm's ``evaluation_report.json`` document.
        run_id: The run to log into (the caller creates and ends it).
        artifacts_dir: Local output directory to log under ``sommelier/``.
        test_split_path: The test-split file to log with ``log_input``.
        split: The already-read split, to avoid reading it again.
        table_rows: Per-example rows (``ScoredRun.table_rows()``).
        params: Extra params (e.g. ``max_examples``); secrets are masked.
        client: Tracking client (default: a new one).

    Returns:
        The metric keys logged.
    """
    tracker = _client(client)
    keys = evaluation_metric_keys(report)
    identity = _get(report, "identity")
    log_metrics_batch(run_id, keys, client=tracker)
    log_params(run_id, {**evaluation_params(report), **(params or {})}, client=tracker)
    set_sommelier_tags(
        run_id,
        model_kind=str(identity.get("model_kind")),
        parser_version=str(identity.get("parser_version")),
        test_split_sha256=str(identity.get("test_split_sha256")),
        client=tracker,
    )
    if test_split_path is not None:
        log_test_split_input(test_split_path, run_id=run_id, split=split, client=tracker)
    if artifacts_dir is not None:
        log_artifacts_dir(artifacts_dir, ARTIFACT_DIR, run_id=run_id, client=tracker)
    log_json_artifact(report, EVALUATION_REPORT_ARTIFACT, run_id=run_id, client=tracker)
    if table_rows is not None:
        log_example_table(table_rows, run_id=run_id, client=tracker)
    return keys


def log_comparison_run(
    report: Mapping[str, Any],
    *,
    run_id: str,
    artifacts_dir: str | os.PathLike[str] | None = None,
    params: Mapping[str, object] | None = None,
    figure: bool = True,
    client: MlflowClient | None = None,
) -> dict[str, float]:
    """Record a comparison in an existing run (the parent run of ``main``, or ``compare``'s).

    Logs every comparison key (one batch), :func:`comparison_params` plus
    ``params``, the tags (``sommelier.model_kind`` = ``comparison``),
    ``artifacts_dir`` under ``sommelier/`` if given, the report as
    ``sommelier/comparison_report.json`` and ``.md``, and the chart
    ``sommelier/comparison.png``.

    Returns:
        The metric keys logged.
    """
    from sommelier_mlflow.evaluation import render_comparison_markdown

    tracker = _client(client)
    keys = comparison_metric_keys(report)
    identity = _get(report, "identity")
    log_metrics_batch(run_id, keys, client=tracker)
    log_params(run_id, {**comparison_params(report), **(params or {})}, client=tracker)
    set_sommelier_tags(
        run_id,
        model_kind="comparison",
        parser_version=str(identity.get("parser_version")),
        test_split_sha256=str(identity.get("test_split_sha256")),
        client=tracker,
    )
    if artifacts_dir is not None:
        log_artifacts_dir(artifacts_dir, ARTIFACT_DIR, run_id=run_id, client=tracker)
    log_json_artifact(report, COMPARISON_REPORT_ARTIFACT, run_id=run_id, client=tracker)
    log_text_artifact(
        render_comparison_markdown(dict(report)),
        COMPARISON_MARKDOWN_ARTIFACT,
        run_id=run_id,
        client=tracker,
    )
    if figure:
        log_comparison_figure(report, run_id=run_id, client=tracker)
    return keys
