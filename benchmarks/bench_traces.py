"""Time added by logging one trace with assessments per example (``log_traces``).

Run: ``python benchmarks/bench_traces.py [--n 1000] [--store sqlite|server|both]``.

Each run logs ``n`` synthetic examples (request, raw output, expected call,
parse status and the five metric components, i.e. 8 assessments per trace)
into a fresh run, with the same code path ``evaluate``/``score``/``main`` use,
then reads them back with ``mlflow.search_traces`` and checks the count. It
reports seconds per 1,000 examples against a local SQLite store and against a
local ``mlflow server`` (HTTP, SQLite behind it), the two set-ups the README
describes. Target: at most 30 s per 1,000 examples.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sommelier_mlflow.integration import ExampleTrace, log_example_traces
from sommelier_mlflow.toolcalls import METRIC_NAMES


def synthetic(n: int) -> list[ExampleTrace]:
    rows = []
    for index in range(n):
        call = {"name": "get_weather", "arguments": {"city": f"City {index}", "units": "celsius"}}
        right = index % 3 != 0
        components = {name: (int(right), 1) for name in METRIC_NAMES}
        components["argument_f1"] = (4 if right else 2, 4)
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
            )
        )
    return rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    process = subprocess.Popen(
        [
            mlflow,
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return process, url
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("mlflow server did not start")


def measure(uri: str, examples: list[ExampleTrace], workers: int) -> float:
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    experiment = client.create_experiment(f"bench-traces-{time.time_ns()}")
    run_id = client.create_run(experiment).info.run_id
    start = time.perf_counter()
    logged = log_example_traces(run_id, examples, client=client, workers=workers)
    seconds = time.perf_counter() - start
    found = mlflow.search_traces(locations=[experiment], run_id=run_id, return_type="list")
    if logged != len(examples) or len(found) != len(examples):
        raise SystemExit(f"logged {logged}, found {len(found)} of {len(examples)} traces")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--store", choices=["sqlite", "server", "both"], default="both")
    args = parser.parse_args()
    examples = synthetic(args.n)
    load = os.getloadavg()[0]
    print(f"{args.n} examples, {len(METRIC_NAMES) + 3} assessments each, load avg {load:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        root = Path(tmp)
        if args.store in ("sqlite", "both"):
            seconds = measure(f"sqlite:///{root / 'local.db'}", examples, args.workers)
            print(f"sqlite store: {seconds:.1f} s ({seconds / args.n * 1000:.1f} s per 1,000)")
        if args.store in ("server", "both"):
            process, url = _start_server(root)
            try:
                seconds = measure(url, examples, args.workers)
            finally:
                process.terminate()
                process.wait(timeout=30)
            print(f"mlflow server: {seconds:.1f} s ({seconds / args.n * 1000:.1f} s per 1,000)")


if __name__ == "__main__":
    main()
