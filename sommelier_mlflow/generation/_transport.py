"""The HTTP side of every served backend: deadlines, retries, JSON, model listing, identity.

A served backend (the ``server`` completions client, or a chat-completions one
written later) needs the same things from the wire, and each is a trap when
left to a general-purpose HTTP client:

* **A total deadline per call.** Socket timeouts bound each read, so a server
  that trickles one byte every two seconds keeps a request alive forever. Here
  every call -- completions, ``/models``, ``/version`` -- ends at
  ``request_timeout`` seconds after it started, connect and read together: a
  watchdog shuts the socket down at the deadline, which wakes the blocked read.
* **Bounded retries** of what a retry can fix (429, 5xx, timeouts, refused
  connections, a body that is not JSON), with exponential backoff, reported as
  exit 3 when the server stays down; what a retry cannot fix (a refused key,
  an unknown model) is exit 2 at once.
* **One error line, never a traceback**, for an empty or non-JSON answer.
* **The key stays secret whatever its variable is called.** The value of the
  variable named by ``api_key_env`` is registered with
  :mod:`sommelier_mlflow._redact`, so every later redaction in the process
  replaces it, and every string the server sends back (model names,
  ``/version``, completions) has it replaced before anything else sees it.

Only the standard library is used (``http.client``), so the deadline is ours
to enforce and no HTTP package is needed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from sommelier_mlflow._redact import redact_registered, register_secret
from sommelier_mlflow.errors import ConfigError, DependencyError

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MAX_RETRIES",
    "ENV_NAME_PATTERN",
    "redact_url",
    "ServedModel",
    "ServerTransport",
]

DEFAULT_REQUEST_TIMEOUT: Final = 300.0
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
#: Retries of a failed call before the server counts as down (attempts = 1 + retries).
DEFAULT_MAX_RETRIES: Final = 4
_BACKOFF_FIRST_S: Final = 0.5
_BACKOFF_CAP_S: Final = 8.0
#: What an environment variable's name may be (``api_key_env``).
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_NAME: Final = re.compile(ENV_NAME_PATTERN)
#: ``/version`` is optional information: it never waits longer than this.
_VERSION_TIMEOUT_S: Final = 10.0
_DETAIL_CHARS: Final = 500


def redact_url(url: str) -> str:
    """``url`` without user-info (``user:password@``), safe to print and to log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class ServedModel:
    """One entry of the server's model list (``/v1/models``).

    Attributes:
        id: The name requests use.
        root: What the server loaded it from (vLLM reports the path or Hub id).
        parent: For a LoRA adapter, the ``id`` of the base it was loaded onto.
        max_model_len: The context the server gives it (vLLM's ``max_model_len``:
            prompt and completion tokens together), ``None`` where it does not say.
    """

    id: str
    root: str | None
    parent: str | None
    max_model_len: int | None = None


class _Retryable(Exception):
    """A failure a later attempt may not repeat; its text is the reason shown."""


class _Watchdog:
    """Shuts a connection's socket down when its call's deadline passes.

    ``shutdown`` wakes a read blocked in another thread at once, which a socket
    timeout (re-armed on every byte received) never does for a trickling peer.
    """

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._sock is not None:
                # An already closed socket means the call has ended anyway.
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)

    def attach(self, sock: socket.socket) -> None:
        """Watch ``sock``; refuse it when the deadline passed while it was connecting."""
        with self._lock:
            if self.fired:
                raise TimeoutError("deadline passed while connecting")
            self._sock = sock

    def stop(self) -> None:
        self._timer.cancel()


class _HTTPConnection(http.client.HTTPConnection):
    watchdog: _Watchdog

    def connect(self) -> None:
        super().connect()
        self.watchdog.attach(self.sock)


class _HTTPSConnection(http.client.HTTPSConnection):
    watchdog: _Watchdog

    def connect(self) -> None:
        super().connect()
        self.watchdog.attach(self.sock)


class ServerTransport:
    """JSON over HTTP to one OpenAI-compatible server, each call under a total deadline.

    Construction checks the options and reads the key; it sends nothing.
    """

    def __init__(
        self,
        base_url: str,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        """Check the options, read the key from ``$api_key_env`` and register it as a secret.

        Args:
            base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
            request_timeout: Seconds one call may take in all (connect, send,
                wait, read) before it is abandoned and retried.
            api_key_env: Name of the environment variable holding the API key.
            max_retries: Retries of a call after a 429, a 5xx, a timeout, a
                connection error or a non-JSON answer, with exponential backoff.

        Raises:
            ConfigError: A malformed URL, timeout, retry count or variable name.
        """
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got "
                f"{redact_url(str(base_url))!r}"
            )
        if isinstance(request_timeout, bool) or not (
            isinstance(request_timeout, (int, float)) and 0 < request_timeout < math.inf
        ):
            raise ConfigError(f"request_timeout must be a positive number, got {request_timeout!r}")
        if type(max_retries) is not int or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not isinstance(api_key_env, str) or not _ENV_NAME.fullmatch(api_key_env):
            raise ConfigError(
                f"api_key_env must name an environment variable (letters, digits, _), got "
                f"{api_key_env!r}; put the key itself in that variable, never on the command line"
            )
        self.shown_url = redact_url(base_url.rstrip("/"))
        self.timeout = float(request_timeout)
        self.api_key_env = api_key_env
        self._max_retries = max_retries
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._root = parts.path.rstrip("/")
        key = os.environ.get(api_key_env) or None
        # From here on every redaction in this process replaces the key, whatever
        # the variable is called; the key itself lives only in these headers.
        register_secret(key)
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "sommelier-mlflow",
        }
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    def __repr__(self) -> str:
        return f"ServerTransport({self.shown_url!r}, request_timeout={self.timeout:g})"

    # -- one call ----------------------------------------------------------------------

    def _exchange(
        self, method: str, path: str, payload: bytes | None, seconds: float
    ) -> tuple[int, bytes]:
        """Send one request and read the whole answer, all within ``seconds``.

        Raises:
            _Retryable: The deadline passed, or the connection failed.
        """
        watchdog = _Watchdog(seconds)
        kind = _HTTPSConnection if self._https else _HTTPConnection
        connection = kind(self._host, self._port, timeout=seconds)
        connection.watchdog = watchdog
        try:
            connection.request(method, path, body=payload, headers=self._headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            if watchdog.fired or isinstance(exc, TimeoutError):
                raise _Retryable(f"timed out: no complete answer within {seconds:g} s") from None
            raise _Retryable(f"unreachable: {redact_registered(str(exc))[:200]}") from None
        finally:
            watchdog.stop()
            connection.close()

    def _decode(self, status: int, body: bytes, what: str) -> dict[str, Any]:
        """The JSON object of a 2xx answer, with the key replaced wherever it was echoed.

        Raises:
            ConfigError: A refusal a retry cannot fix (401/403, other 4xx).
            _Retryable: 429, 5xx, or a 2xx whose body is not a JSON object.
        """
        if status in (401, 403):
            raise ConfigError(
                f"the server at {self.shown_url} refused the API key ({status}) while trying "
                f"to {what}: put a valid key in ${self.api_key_env}"
            )
        if status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status}")
        text = body.decode("utf-8", errors="replace")
        if status >= 300:
            detail = redact_registered(text)[:_DETAIL_CHARS]
            raise ConfigError(
                f"the server at {self.shown_url} rejected the request to {what} ({status}): "
                f"{detail}"
            )
        try:
            value = redact_registered(json.loads(text))
        except (ValueError, RecursionError):  # not JSON, or nested past any real answer
            value = None
        if not isinstance(value, dict):
            if not body.strip():
                raise _Retryable(f"HTTP {status} with an empty body")
            raise _Retryable(
                f"HTTP {status} with a body that is not a JSON object ({len(body)} bytes)"
            )
        return value

    def call(self, method: str, path: str, what: str, body: object = None) -> dict[str, Any]:
        """Send ``body`` (JSON) to ``path`` under the API root; return the answer's JSON object.

        Each attempt has :attr:`timeout` seconds in all; failures a retry may fix
        are retried with backoff.

        Raises:
            DependencyError: The server stayed unreachable, slow, overloaded or
                broken through every attempt (exit 3).
            ConfigError: The server refused the request for a reason a retry
                cannot fix (bad key, unknown model, prompt too long).
        """
        payload = None if body is None else json.dumps(body).encode("utf-8")
        attempt = 0
        while True:
            try:
                status, raw = self._exchange(method, f"{self._root}{path}", payload, self.timeout)
                return self._decode(status, raw, what)
            except _Retryable as exc:
                last = str(exc)
            if attempt >= self._max_retries:
                raise DependencyError(
                    f"the server at {self.shown_url} did not answer the request to {what} after "
                    f"{attempt + 1} attempts (last: {last}); check that it is running, then "
                    "re-run the same command: what was generated so far is kept and resumed"
                )
            time.sleep(min(_BACKOFF_CAP_S, _BACKOFF_FIRST_S * 2**attempt))
            attempt += 1

    # -- what the server says about itself ----------------------------------------------

    def list_models(self) -> dict[str, ServedModel]:
        """The server's models by ``id`` (``GET /models``), retried like any call.

        Raises:
            DependencyError: The server did not answer (exit 3).
        """
        page = self.call("GET", "/models", "list its models (/models)")
        served: dict[str, ServedModel] = {}
        for item in page.get("data") or []:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            root, parent = item.get("root"), item.get("parent")
            limit = item.get("max_model_len")
            served[item["id"]] = ServedModel(
                item["id"],
                root if isinstance(root, str) else None,
                parent if isinstance(parent, str) else None,
                limit if type(limit) is int and limit > 0 else None,
            )
        return served

    def find_model(self, served: dict[str, ServedModel], name: str, option: str) -> ServedModel:
        """The entry named ``name``.

        Raises:
            DependencyError: The server does not list it (the message lists what it does).
        """
        if name not in served:
            listed = ", ".join(sorted(served)) or "nothing"
            raise DependencyError(
                f"the server at {self.shown_url} does not serve {option} {name!r} (it lists: "
                f"{listed}); pass one of those names, or start the server with it"
            )
        return served[name]

    def server_version(self) -> str | None:
        """The server's ``/version`` (vLLM, SGLang and TGI report one), else ``None``.

        Asked once, at the server's root (the API root without ``/v1``), under
        the same total deadline as any call (at most 10 s): a server that does
        not answer it in time is simply of unknown version.
        """
        path = re.sub(r"/v1$", "", self._root) + "/version"
        try:
            status, body = self._exchange("GET", path, None, min(self.timeout, _VERSION_TIMEOUT_S))
            answer = self._decode(status, body, "report its version (/version)")
        except (_Retryable, ConfigError):
            return None
        version = answer.get("version")
        return version if isinstance(version, str) else None
