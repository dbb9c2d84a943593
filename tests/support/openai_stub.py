"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for protocol edge cases.

The real server in the tests is vLLM; this one exists for what a healthy vLLM
never does (a wrong number of choices, a missing text, 503s on demand), so the
``server`` backend's handling of them can be proven. It speaks real HTTP: the
backend under test runs unchanged, through the real OpenAI client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["StubServer", "running_stub"]

#: Turns one /v1/completions request body into (status, JSON body).
Responder = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def echo_responder(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
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


def _handler(state: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

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
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
