"""Every scored example as an MLflow trace with assessments: MLflow 3's evaluation view.

MLflow 3 shows an evaluation run example by example (and two such runs side by
side) from *traces* linked to the run, each carrying *assessments*: the
expectation (here the gold call) and feedback (here the parse status, each
metric's per-example component and the raw output). ``mlflow.genai.evaluate``
builds those by calling scorers one row at a time and logging every assessment
with its own request, which costs minutes per thousand examples against a
tracking server. The scores already exist here, exactly, so this module writes
the same entities in bulk instead:

* one ``start_trace`` request per example that carries all its assessments,
  sent from a few threads so a remote server's latency overlaps (MLflow 3.17
  has no request that creates several traces or assessments at once);
* then the spans of many traces in one ``log_spans`` request per 500
  examples: each trace's root span (request and output) and one ``TOOL`` span
  per decoded call, which with the ``expected_tool_calls`` expectation lets
  MLflow's own ``ToolCallCorrectness`` scorer judge the same traces. This
  order matters: a ``start_trace`` for a trace that ``log_spans`` already
  created is a conflict MLflow resolves by rollback and merge, which doubled
  the time per trace.

Trace ids are derived from the run id and the example id, so logging the same
run again updates its traces instead of duplicating them. The run is tagged
``mlflow.runType = genai_evaluate``, the tag ``mlflow.genai.evaluate`` sets, so
the UI lists it under the experiment's evaluation runs.

What one trace holds is built, offline, by
:mod:`sommelier_mlflow.integration._trace_entities`; this module gathers the
examples, sends the traces and keeps a rerun from duplicating them.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, Literal

from sommelier_mlflow._progress import progress_bar
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.integration._store_errors import tracking_errors
from sommelier_mlflow.integration._trace_entities import ExampleTrace, prepare_trace, trace_ids

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.data import TestSplit
    from sommelier_mlflow.evaluation import EvaluationReport, ScoredRun

__all__ = [
    "AUTO_TRACE_LIMIT",
    "LogTraces",
    "should_log_traces",
    "arm_example_traces",
    "log_example_traces",
]

#: ``log_traces=auto`` logs traces for arms up to this many examples.
AUTO_TRACE_LIMIT: Final = 5000
LogTraces = Literal["auto", "true", "false"]
_LOG_TRACES_VALUES: Final = ("auto", "true", "false")
#: The run tag (and value) ``mlflow.genai.evaluate`` sets on its runs.
_RUN_TYPE_TAG: Final = "mlflow.runType"
_RUN_TYPE_EVALUATION: Final = "genai_evaluate"
#: Run tags, all under one prefix, that let a rerun recognise the run of a
#: command killed while it logged the same arm's traces (state, arm digest,
#: logging process).
_TAGS: Final = "sommelier.traces."
_STATE_TAG: Final = f"{_TAGS}state"
_STATE_LOGGING: Final = "logging"
_STATE_LOGGED: Final = "logged"
_KEY_TAG: Final = f"{_TAGS}key"
_OWNER_TAG: Final = f"{_TAGS}owner"
#: Items per request: spans per ``log_spans``, trace ids per link or delete.
_SPANS_PER_REQUEST: Final = 500
_LINKS_PER_REQUEST: Final = 100


def should_log_traces(setting: str, examples: int) -> bool:
    """Decide from the ``log_traces`` setting whether an arm of ``examples`` gets traces.

    ``auto`` keeps the default affordable: traces for arms up to
    :data:`AUTO_TRACE_LIMIT` examples, where the per-example view is browsable
    and the logging time small next to generation.

    Raises:
        ConfigError: ``setting`` is not ``auto``, ``true`` or ``false`` (exit 2).
    """
    value = setting.strip().lower()
    if value not in _LOG_TRACES_VALUES:
        raise ConfigError(f"log_traces must be one of auto, true, false; got {setting!r}")
    if value == "auto":
        return examples <= AUTO_TRACE_LIMIT
    return value == "true"


def arm_example_traces(
    report: EvaluationReport,
    scored: ScoredRun,
    split: TestSplit,
    seconds: Mapping[str, float] | None = None,
) -> list[ExampleTrace]:
    """One :class:`ExampleTrace` per scored example of an arm, in ``example_id`` order.

    The components come from the report's per-example rows (the numbers the
    metrics were summed from), the request and gold call(s) from the split,
    and each trace's duration from ``seconds`` (``example_id`` to its share of
    its batch's generation time, as ``generation.read_example_seconds`` reads
    it; an example without one gets 0).

    Raises:
        ConfigError: The report, the scored run and the split disagree on the
            examples (they must come from the same arm).
    """
    names = list(report.metric_names)
    by_id = split.by_id()
    rows = {example_id: row for row, example_id in enumerate(report.example_ids)}
    traces: list[ExampleTrace] = []
    for example in scored.examples:
        row = rows.get(example.example_id)
        source = by_id.get(example.example_id)
        if row is None or source is None:
            raise ConfigError(
                f"example {example.example_id!r} is missing from the report or the split; "
                "log traces from one arm's own report, scores and split"
            )
        components = {
            name: (int(report.numerators[row, column]), int(report.denominators[row, column]))
            for column, name in enumerate(names)
        }
        gold = list(source.gold_calls)
        traces.append(
            ExampleTrace(
                example_id=example.example_id,
                language=example.language,
                query=source.query,
                raw_output=example.raw_text,
                parse_status=example.parse_status,
                expected_call=gold[0] if len(gold) == 1 else {"calls": gold},
                components=components,
                model_kind=report.identity.model_kind,
                parsed_call=example.parsed_call,
                decoded_calls=_decoded(example.parsed_call, example.parsed_calls),
                gold_calls=tuple(gold),
                seconds=(seconds or {}).get(example.example_id, 0.0),
            )
        )
    return traces


def _decoded(
    parsed_call: Mapping[str, Any] | None, parsed_calls: Sequence[Mapping[str, Any]] | None
) -> tuple[Mapping[str, Any], ...]:
    """The calls an output decoded to, whichever scoring mode decoded them."""
    if parsed_calls is not None:
        return tuple(parsed_calls)
    return () if parsed_call is None else (parsed_call,)


def log_example_traces(
    run_id: str,
    examples: Sequence[ExampleTrace],
    *,
    client: MlflowClient | None = None,
    workers: int = 4,
    progress: bool = False,
    source_id: str = "sommelier_mlflow",
) -> int:
    """Record one trace per example, with its assessments, in an existing run.

    Args:
        run_id: The arm's run (the caller created it; it may still be active).
        examples: What each trace shows (:func:`arm_example_traces`).
        client: Tracking client (default: MLflow's current tracking URI).
        workers: Concurrent ``start_trace`` requests.
        progress: Show a progress bar (traces/s, ETA) on stderr.
        source_id: Recorded as the assessments' code source.

    Returns:
        The number of traces logged.

    Raises:
        TrackingError: The tracking store is unreachable or failed (exit 3).
        ConfigError: MLflow refused a request (exit 2).
    """
    from mlflow.entities import RunTag, TraceData
    from mlflow.tracing.client import TracingClient
    from mlflow.tracking import MlflowClient

    if not examples:
        return 0
    tracker = client if client is not None else MlflowClient()
    uri = str(tracker.tracking_uri)
    tracing = TracingClient(uri)
    key = _arm_key(examples)
    with tracking_errors("prepare the run for traces", uri):
        experiment_id = str(tracker.get_run(run_id).info.experiment_id)
        _supersede_killed_runs(tracker, experiment_id, run_id, key, examples)
        tracker.log_batch(
            run_id,
            tags=[
                RunTag(_RUN_TYPE_TAG, _RUN_TYPE_EVALUATION),
                RunTag(_STATE_TAG, _STATE_LOGGING),
                RunTag(_KEY_TAG, key),
                RunTag(_OWNER_TAG, _owner()),
            ],
        )
    now_ms = int(time.time() * 1000)
    prepared = [prepare_trace(ex, run_id, experiment_id, now_ms, source_id) for ex in examples]
    # Trace infos (with their assessments) first, spans after: start_trace on a
    # trace that log_spans already created takes MLflow's conflict path (a
    # rollback, a locked re-read and a merge per row), several times the cost
    # of its plain insert. log_spans then marks the spans' location itself.
    returned: list[Any] = [None] * len(prepared)

    def write(index: int) -> None:
        returned[index] = tracing.start_trace(prepared[index].info)

    with (
        tracking_errors("log traces", uri),
        progress_bar(len(prepared), "log traces", enabled=progress, unit="trace") as bar,
        ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
    ):
        for _ in pool.map(write, range(len(prepared))):
            bar.update(1)
    with tracking_errors("log trace spans", uri):
        try:
            for start in range(0, len(prepared), _SPANS_PER_REQUEST):
                batch = prepared[start : start + _SPANS_PER_REQUEST]
                tracing.log_spans(experiment_id, [span for item in batch for span in item.spans])
        except NotImplementedError:  # an older server: spans go to the artifact store
            for info, item in zip(returned, prepared, strict=True):
                tracing._upload_trace_data(info, TraceData(spans=item.spans))
    with tracking_errors("link traces to the run", uri):
        ids = [item.trace_id for item in prepared]
        for start in range(0, len(ids), _LINKS_PER_REQUEST):
            tracker.link_traces_to_run(ids[start : start + _LINKS_PER_REQUEST], run_id=run_id)
        tracker.set_tag(run_id, _STATE_TAG, _STATE_LOGGED)
    return len(prepared)


def _arm_key(examples: Sequence[ExampleTrace]) -> str:
    """What makes two trace loggings the same arm: model kind, examples and requests."""
    digest = hashlib.sha256()
    for example in examples:
        for part in (example.model_kind, example.example_id, example.query):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()


def _owner() -> str:
    """This process, as ``host:pid``: who is logging a run's traces."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_is_gone(owner: str) -> bool:
    """Whether the process that tagged a run is known to be dead (same host, no such pid).

    A run logged from another machine cannot be checked from here; it is left
    alone rather than risk removing the traces of a logging still under way.
    """
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False


def _supersede_killed_runs(
    tracker: MlflowClient,
    experiment_id: str,
    run_id: str,
    key: str,
    examples: Sequence[ExampleTrace],
) -> None:
    """Retire the run of a killed earlier attempt at the same arm, so each trace exists once.

    A command killed (``kill -9``, OOM) while logging traces leaves its run
    RUNNING with part of the traces; run again, it creates a new run and would
    log a second set. A run tagged as still logging the same arm, by a process
    on this host that no longer exists, is such an orphan: its partial traces
    are deleted, it is ended ``KILLED``, tagged with the run that replaced it,
    and a warning says so on stderr.
    """
    query = f"tags.`{_KEY_TAG}` = '{key}' and tags.`{_STATE_TAG}` = '{_STATE_LOGGING}'"
    for orphan in tracker.search_runs([experiment_id], filter_string=query):
        orphan_id = str(orphan.info.run_id)
        owner = orphan.data.tags.get(_OWNER_TAG, "")
        if orphan_id == run_id or not _owner_is_gone(owner):
            continue
        ids = [trace_ids(orphan_id, example.example_id).trace_id for example in examples]
        deleted = 0
        for start in range(0, len(ids), _LINKS_PER_REQUEST):
            deleted += tracker.delete_traces(
                experiment_id, trace_ids=ids[start : start + _LINKS_PER_REQUEST]
            )
        if orphan.info.status == "RUNNING":
            tracker.set_terminated(orphan_id, status="KILLED")
        tracker.set_tag(orphan_id, _STATE_TAG, f"superseded by run {run_id}")
        print(
            f"warning: run {orphan_id} was killed while logging these traces (process "
            f"{owner} is gone): ended KILLED, its {deleted} partial traces deleted; "
            f"run {run_id} logs every trace again",
            file=sys.stderr,
        )
