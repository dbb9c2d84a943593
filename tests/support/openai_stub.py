"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for protocol edge cases.

The real server in the tests is vLLM; this one exists for what a healthy vLLM
never does (a wrong number of choices, a missing text, 503s on demand, a body
that is not JSON, an answer trickled one byte at a time, a key echoed back),
so the ``server`` backend's handling of them can be proven. It speaks real HTTP: the
backend under test runs unchanged, through the real OpenAI client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["StubServer", "finishes_within", "running_stub"]

_R = TypeVar("_R")

#: Turns one /v1/completions request body into (status, body): a JSON object,
#: or raw bytes sent as they are (an empty or non-JSON answer).
Responder = Callable[[dict[str, Any]], tuple[int, "dict[str, Any] | bytes"]]


def echo_responder(body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes]:
    """One choice per prompt: the prompt's last 8 characters, reversed."""
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    choices = [
        {"index": i, "text": p[-8:][::-1], "finish_reason": "stop", "logprobs": None}
        for i, p in enumerate(prompts)
    ]
    usage = {"prompt_tokens": 10 * len(prompts), "completion_tokens": 3 * len(prompts)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return 200, {
        "id": "cmpl-stub",
        "object": "text_completion",
        "created": 0,
        "model": body["model"],
        "choices": choices,
        "usage": usage,
    }


@dataclass
class StubServer:
    """The running stub: its URL, what it lists, and every request it received."""

    url: str
    models: list[dict[str, Any]]
    responder: Responder = echo_responder
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    version: str | None = "0.0-stub"
    #: Paths (``/version``, ``/v1/models``, ``/v1/completions``) whose answers are
    #: sent one byte every :attr:`trickle_s` seconds instead of at once.
    trickle: frozenset[str] = frozenset()
    trickle_s: float = 2.0
    stopping: threading.Event = field(default_factory=threading.Event)


def _handler(state: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, body: dict[str, Any] | bytes) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.path not in state.trickle:
                self.wfile.write(data)
                return
            try:
                for byte in data:
                    if state.stopping.wait(state.trickle_s):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            except OSError:
                return  # the client gave up: what a deadline is for

        def do_GET(self) -> None:
            state.headers.append((self.path, dict(self.headers)))
            if self.path.endswith("/v1/models"):
                self._send(200, {"object": "list", "data": state.models})
            elif self.path == "/version" and state.version is not None:
                self._send(200, {"version": state.version})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            state.headers.append((self.path, dict(self.headers)))
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            state.requests.append(body)
            status, answer = state.responder(body)
            self._send(status, answer)

    return Handler


@contextmanager
def running_stub(
    models: list[dict[str, Any]], responder: Responder = echo_responder
) -> Iterator[StubServer]:
    """Serve ``models`` on a free loopback port until the block ends."""
    state = StubServer(url="", models=models, responder=responder)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def finishes_within(seconds: float, work: Callable[[], _R]) -> _R:
    """``work()``'s result; a ``TimeoutError`` instead of a hung suite if it runs past ``seconds``.

    A client without a total deadline never returns from a trickling stub; the
    test must fail, not wait for the CI job's own timeout.
    """
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(work).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)
