"""Time added by logging one trace with assessments per example, against the floor MLflow allows.

Run: ``python benchmarks/bench_traces.py [--n 1000] [--store sqlite|server|both] [--rounds 1]``.

Each round, on each store, times side by side (alternating which goes first):

* ``package``: :func:`log_example_traces`, the code path ``evaluate``/``score``/``main``
  use (one ``start_trace`` per example carrying its assessments, the spans of up to
  500 traces per ``log_spans`` request, links to the run);
* ``floor``: :func:`start_trace_floor`, only the one ``start_trace`` per example that
  any path must send while MLflow (3.17 and 3.18 alike) has no request creating several
  traces or assessments at once. No spans, no links: a lower bound, not a usable path.
  The package path cannot be more than ``package / floor`` times faster without such a
  request.

``n`` synthetic examples (request, raw output, one or two decoded calls as ``TOOL``
spans, 9 assessments each) go into a fresh run per timing. After the package path the
script reads the run back and checks that nothing is missing: ``n`` traces, every
``TOOL`` span, every assessment. It reports seconds per 1,000 examples, examples/s and
the CPU seconds per trace of this process and, for ``server``, of the server's
request workers (the load average beside each line, since the development machine is shared).
The server is a local ``mlflow server`` (HTTP, SQLite behind it) on a free port,
``--server-workers`` worker processes (default 1, as the issue's 65 s figure was taken).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sommelier_mlflow.integration import ExampleTrace, log_example_traces
from sommelier_mlflow.toolcalls import METRIC_NAMES

#: Assessments per trace: expected_call, expected_tool_calls, parse_status, one per
#: metric, raw_output.
ASSESSMENTS_PER_TRACE = 3 + len(METRIC_NAMES) + 1
WORKERS = 4  # what log_example_traces uses by default


def synthetic(n: int) -> list[ExampleTrace]:
    """``n`` examples; every third decodes two calls, so TOOL spans number ``n + n // 3``-ish."""
    rows = []
    for index in range(n):
        call = {"name": "get_weather", "arguments": {"city": f"City {index}", "units": "celsius"}}
        right = index % 3 != 0
        components = {name: (int(right), 1) for name in METRIC_NAMES}
        components["argument_f1"] = (4 if right else 2, 4)
        decoded = (call,) if right else (call, {"name": "get_time", "arguments": {"tz": "UTC"}})
        rows.append(
            ExampleTrace(
                example_id=f"ex-{index:06d}",
                language="en" if index % 2 else "fr",
                query=f"What is the weather in City {index}? Answer with one tool call.",
                raw_output=f'{{"name": "get_weather", "arguments": {{"city": "City {index}"}}}}',
                parse_status="ok",
                expected_call=call,
                components=components,
                model_kind="base",
                parsed_call=call if right else None,
                decoded_calls=decoded,
                gold_calls=(call,),
            )
        )
    return rows


def start_trace_floor(uri: str, run_id: str, examples: list[ExampleTrace]) -> int:
    """Only the unavoidable part: one ``start_trace`` per example with its assessments.

    Builds the same trace infos as the package (its private ``_prepare``) and sends them
    with the same concurrency, but logs no spans and links nothing: the bound below which
    no path that keeps one trace with its assessments per example can go.
    """
    from mlflow.tracing.client import TracingClient
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration._traces import _prepare

    experiment_id = str(MlflowClient(uri).get_run(run_id).info.experiment_id)
    now_ms = int(time.time() * 1000)
    infos = [_prepare(ex, run_id, experiment_id, now_ms, "bench").info for ex in examples]
    tracing = TracingClient(uri)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return len(list(pool.map(tracing.start_trace, infos)))


def package_path(uri: str, run_id: str, examples: list[ExampleTrace]) -> int:
    from mlflow.tracking import MlflowClient

    return log_example_traces(run_id, examples, client=MlflowClient(uri))


@dataclass(frozen=True)
class Timing:
    seconds: float
    client_cpu: float
    server_cpu: float | None


def _server_cpu(pid: int | None) -> float | None:
    """CPU seconds used so far by the server's request workers (needs psutil).

    Only the ``uvicorn`` process and its workers count: the server's job runner and
    its queue consumers poll on their own, so their CPU grows with the wall time.
    """
    if pid is None:
        return None
    try:
        import psutil
    except ImportError:
        return None
    serving = [
        process
        for process in psutil.Process(pid).children(recursive=True)
        if "uvicorn" in " ".join(process.cmdline())
    ]
    total = 0.0
    for process in [p for root in serving for p in [root, *root.children(recursive=True)]]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def timed(
    path: Callable[[str, str, list[ExampleTrace]], int],
    uri: str,
    examples: list[ExampleTrace],
    server_pid: int | None,
) -> tuple[Timing, str, str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.create_experiment(f"bench-traces-{time.time_ns()}")
    run_id = client.create_run(experiment).info.run_id
    server_before = _server_cpu(server_pid)
    cpu_before = time.process_time()
    start = time.perf_counter()
    logged = path(uri, run_id, examples)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_before
    server_after = _server_cpu(server_pid)
    if logged != len(examples):
        raise SystemExit(f"{path.__name__} logged {logged} of {len(examples)} traces")
    server = None
    if server_before is not None and server_after is not None:
        server = server_after - server_before
    return Timing(seconds, cpu, server), experiment, run_id


def check_nothing_lost(uri: str, experiment: str, run_id: str, examples: list[ExampleTrace]) -> str:
    """Read the run back: every trace, every TOOL span, every assessment, each once."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    found = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
    ids = [trace.info.request_metadata["sommelier.example_id"] for trace in found]
    tools = sum(1 for t in found for span in t.data.spans if span.span_type == "TOOL")
    assessments = sum(len(t.info.assessments) for t in found)
    want_tools = sum(len(example.decoded_calls) for example in examples)
    want_assessments = len(examples) * ASSESSMENTS_PER_TRACE
    got = (sorted(ids), tools, assessments)
    want = (sorted(example.example_id for example in examples), want_tools, want_assessments)
    if got != want:
        raise SystemExit(
            f"lost or duplicated: {len(ids)} traces ({len(set(ids))} distinct), {tools} TOOL "
            f"spans, {assessments} assessments; expected {len(examples)}, {want_tools}, "
            f"{want_assessments}"
        )
    return f"{len(ids)} traces, {tools} TOOL spans, {assessments} assessments: all there"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_server(root: Path, workers: int) -> Iterator[tuple[str, int]]:
    """A local ``mlflow server`` (SQLite backend) on a free port, in its own process group."""
    port = _free_port()
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    command = [mlflow, "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend-store-uri", f"sqlite:///{root / 'server.db'}"]
    command += ["--artifacts-destination", str(root / "artifacts"), "--workers", str(workers)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("mlflow server did not start") from None
                time.sleep(0.5)
        yield url, process.pid
    finally:
        # The server's workers and job consumers share its process group: end them all.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _line(store: str, name: str, n: int, timing: Timing) -> str:
    server = ""
    if timing.server_cpu is not None:
        server = f", server CPU {timing.server_cpu / n * 1000:.1f} ms/trace"
    return (
        f"{store:<7} {name:<8} {timing.seconds:7.1f} s  {timing.seconds / n * 1000:6.1f} s per "
        f"1,000  {n / timing.seconds:6.1f} examples/s  client CPU "
        f"{timing.client_cpu / n * 1000:.1f} ms/trace{server}  load {os.getloadavg()[0]:.1f}"
    )


def compare(store: str, uri: str, examples: list[ExampleTrace], rounds: int, pid: Any) -> None:
    paths = {"package": package_path, "floor": start_trace_floor}
    # Untimed warm-up: a fresh server imports lazily on its first requests, and
    # whichever path ran first paid for it (1.6x to 2.3x, against 1.1x after it).
    timed(package_path, uri, examples[: min(100, len(examples))], pid)
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for round_index in range(rounds):
        order = list(paths) if round_index % 2 == 0 else list(reversed(paths))
        for name in order:
            timing, experiment, run_id = timed(paths[name], uri, examples, pid)
            print(_line(store, name, len(examples), timing), flush=True)
            seconds[name].append(timing.seconds)
            if name == "package":
                print(f"        {check_nothing_lost(uri, experiment, run_id, examples)}")
    ratios = [p / f for p, f in zip(seconds["package"], seconds["floor"], strict=True)]
    print(f"{store:<7} package / floor: " + ", ".join(f"{r:.2f}" for r in ratios), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--store", choices=["sqlite", "server", "both"], default="both")
    parser.add_argument("--server-workers", type=int, default=1)
    args = parser.parse_args()
    examples = synthetic(args.n)
    print(
        f"{args.n} examples, {ASSESSMENTS_PER_TRACE} assessments and "
        f"{sum(len(e.decoded_calls) for e in examples)} TOOL spans in all; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        root = Path(tmp)
        if args.store in ("sqlite", "both"):
            compare("sqlite", f"sqlite:///{root / 'local.db'}", examples, args.rounds, None)
        if args.store in ("server", "both"):
            with local_server(root, args.server_workers) as (url, pid):
                compare("server", url, examples, args.rounds, pid)


if __name__ == "__main__":
    main()
