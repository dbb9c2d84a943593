"""A command killed with ``kill -9`` while logging traces, run again: each trace once.

The killed process leaves its run RUNNING with part of the traces. The rerun
(a new run, as the CLI creates) must recognise that orphan, end it KILLED,
delete its partial traces and say so, so the experiment holds every example's
trace exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from sommelier_mlflow.integration import ExampleTrace, log_example_traces
from tests.integration.integration_helpers import Store

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parents[2]
COUNT = 300

_LOGGER = """
import sys
from mlflow.tracking import MlflowClient
from tests.integration.test_traces_killed import arm
client = MlflowClient(sys.argv[1])
run_id = client.create_run(sys.argv[2]).info.run_id
print(run_id, flush=True)
from sommelier_mlflow.integration import log_example_traces
log_example_traces(run_id, arm(), client=client, workers=1)
"""


def arm() -> list[ExampleTrace]:
    """The same arm for the killed logging and the rerun."""
    return [
        ExampleTrace(
            example_id=f"k{index:04d}",
            language="en",
            query=f"Weather in city {index}?",
            raw_output=f'{{"name": "get_weather", "arguments": {{"city": "c{index}"}}}}',
            parse_status="ok",
            expected_call={"name": "get_weather", "arguments": {"city": f"c{index}"}},
            components={"full_call_exact_match": (1, 1)},
            model_kind="adapter",
        )
        for index in range(COUNT)
    ]


def _example_ids(experiment_id: str) -> Counter[str]:
    found = mlflow.search_traces(locations=[experiment_id], include_spans=False, return_type="list")
    return Counter(trace.info.request_metadata["sommelier.example_id"] for trace in found)


def test_rerun_after_kill_9_logs_each_trace_once(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment(
        "killed-while-logging-traces", artifact_location=tmp_path.as_uri()
    )
    process = subprocess.Popen(
        [sys.executable, "-c", _LOGGER, store.uri, experiment_id],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert process.stdout is not None
    killed_run = process.stdout.readline().decode().strip()
    deadline = time.monotonic() + 300
    while not _example_ids(experiment_id) and time.monotonic() < deadline:
        assert process.poll() is None, "the logging finished before it could be killed"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stdout.close()
    partial = _example_ids(experiment_id)
    assert 0 < sum(partial.values()) < COUNT
    assert client.get_run(killed_run).info.status == "RUNNING"

    rerun = client.create_run(experiment_id).info.run_id
    assert log_example_traces(rerun, arm(), client=client) == COUNT

    assert _example_ids(experiment_id) == Counter({e.example_id: 1 for e in arm()})
    orphan = client.get_run(killed_run)
    assert orphan.info.status == "KILLED"
    assert orphan.data.tags["sommelier.traces.state"] == f"superseded by run {rerun}"
    assert client.get_run(rerun).data.tags["sommelier.traces.state"] == "logged"
    warning = capsys.readouterr().err
    assert f"run {killed_run} was killed while logging these traces" in warning
    assert f"its {sum(partial.values())} partial traces deleted" in warning
