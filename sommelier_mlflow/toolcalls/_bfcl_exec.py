"""BFCL's multi-turn API classes, run on decoded calls in a worker that never evaluates text.

BFCL's own runner turns each model call into a Python string and evaluates
it, so a model that writes ``__import__('os').system(...)`` runs a shell
command. Here nothing the model wrote is ever evaluated: a decoded call
``{"name", "arguments"}`` runs only when ``name`` is a public bound method of
one of the example's involved instances (the methods BFCL itself maps: found
by ``inspect`` on the instance, names not starting with ``_``), with the
decoded values passed as keywords. Anything else (an unknown name, a dunder,
an attribute chain, arguments that are not an object, a bad argument, an
exception inside the method) becomes an error result handed back to the
model, worded as BFCL words its own (``Error during execution: ...``).

The classes come from BFCL's installed package (``bfcl-eval``, installed
without its provider SDKs, plus ``mpmath``: :data:`BFCL_INSTALL_COMMAND`);
they are loaded at run time, never copied, and their absence is a
:class:`~sommelier_mlflow.errors.DependencyError` (exit 3) naming the
command.

They run in one worker process per :class:`BfclSandbox`, so a hostile
argument cannot stall or exhaust the process that scores: the worker caps
its own address space (``RLIMIT_AS``), each call runs under a time limit
(``SIGALRM``, which stops Python-level loops), and the parent waits at most
twice that long for each result; a worker stuck in C code (a huge integer
power, say) is killed and replaced, and every open environment is rebuilt by
replaying its log of calls (fresh instances from the initial configuration,
then every earlier call: BFCL's classes draw their randomness from seeded
generators, so the replay is exact). A call that hits a limit becomes an
error result and leaves no trace in the state (its environment is rebuilt
without it); the run goes on. A result longer than the size limit is cut,
with a note saying so (the longest legitimate result over BFCL's 800
multi-turn questions, ``get_transaction_history`` on a ``long_context``
question, has 84,503 characters).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from copy import deepcopy
from dataclasses import dataclass, field
from functools import lru_cache
from types import TracebackType
from typing import IO, Any, Final

from sommelier_mlflow.errors import DataError, DependencyError, InvariantViolationError

__all__ = [
    "BFCL_ERROR_PREFIX",
    "BFCL_STEP_LIMIT",
    "BFCL_ADDED_TOOLS_PROMPT",
    "BFCL_INSTALL_COMMAND",
    "BFCL_CLASS_MODULES",
    "BFCL_CALL_SECONDS",
    "BFCL_MEMORY_BYTES",
    "BFCL_RESULT_CHARS",
    "BfclSandbox",
    "gold_call_parts",
    "parse_gold_call",
]

#: Steps a model may take in one turn: BFCL ends the question (a failure) once a
#: turn has made calls in more steps than this (``MAXIMUM_STEP_LIMIT``).
BFCL_STEP_LIMIT: Final = 20
#: The user message of a turn where held-back functions are added (BFCL's
#: ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``, verbatim: models are
#: compared with the leaderboard on the same conversation).
BFCL_ADDED_TOOLS_PROMPT: Final = (
    "I have updated some more functions you can choose from. What about now?"
)
#: What provides BFCL's multi-turn classes (its package without the provider
#: SDKs it declares, and the one module its classes import beyond the stdlib).
BFCL_INSTALL_COMMAND: Final = "pip install --no-deps bfcl-eval==2026.3.23 mpmath"
_PACKAGE: Final = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: BFCL's multi-turn classes and the modules of its package that define them.
BFCL_CLASS_MODULES: Final[Mapping[str, str]] = {
    "GorillaFileSystem": f"{_PACKAGE}.gorilla_file_system",
    "MathAPI": f"{_PACKAGE}.math_api",
    "MessageAPI": f"{_PACKAGE}.message_api",
    "TwitterAPI": f"{_PACKAGE}.posting_api",
    "TicketAPI": f"{_PACKAGE}.ticket_api",
    "TradingBot": f"{_PACKAGE}.trading_bot",
    "TravelAPI": f"{_PACKAGE}.travel_booking",
    "VehicleControlAPI": f"{_PACKAGE}.vehicle_control",
}
# Built with no scenario, as BFCL builds them.
_STATELESS: Final = frozenset({"MathAPI"})
#: Seconds one call may run (legitimate calls take milliseconds); the parent
#: gives up on the worker after twice as long.
BFCL_CALL_SECONDS: Final = 10.0
#: The worker's address-space cap in bytes.
BFCL_MEMORY_BYTES: Final = 4 * 1024**3
#: Characters of one result handed back; longer results are cut with a note
#: (about twelve times the longest legitimate result, 84,503 characters).
BFCL_RESULT_CHARS: Final = 1_000_000
# Building an environment runs BFCL's scenario loader on trusted data: no soft
# limit, only a generous deadline.
_OPEN_SECONDS: Final = 120.0
#: How every error result begins (BFCL's wording), refused calls and stopped ones included.
BFCL_ERROR_PREFIX: Final = "Error during execution: "
_ERROR: Final = BFCL_ERROR_PREFIX
_HEADER: Final = struct.Struct(">Q")


def _dependency_error(exc: BaseException) -> DependencyError:
    return DependencyError(
        f"BFCL's multi-turn classes cannot be loaded ({exc}): they come from BFCL's own "
        f"package, installed without its provider SDKs; run `{BFCL_INSTALL_COMMAND}`"
    )


def _load_class(name: str, module: str) -> type:
    """BFCL's class ``name`` from ``module`` (a DependencyError when the package is missing)."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise _dependency_error(exc) from exc
    found = getattr(loaded, name, None)
    if not isinstance(found, type):
        raise DependencyError(
            f"{module} defines no class {name}: install the BFCL version this product "
            f"supports: `{BFCL_INSTALL_COMMAND}`"
        )
    return found


def _environment_classes(
    environment: Mapping[str, Any], modules: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """``(class, module)`` of each involved class, in the order BFCL maps their methods."""
    involved = environment.get("involved_classes") if isinstance(environment, Mapping) else None
    if not isinstance(involved, list) or not all(isinstance(name, str) for name in involved):
        raise DataError(
            f"a BFCL environment needs 'involved_classes', a list of class names, got {involved!r}"
        )
    unknown = [name for name in involved if name not in modules]
    if unknown:
        raise DataError(
            f"BFCL environment names {', '.join(unknown)}, not a multi-turn class "
            f"(known: {', '.join(sorted(modules))})"
        )
    return tuple((name, modules[name]) for name in involved)


# ---------------------------------------------------------------- ground truth


@lru_cache(maxsize=64)
def _signatures(classes: tuple[tuple[str, str], ...]) -> dict[str, list[inspect.Parameter]]:
    """Each public method's parameters after ``self``; a later class wins a name, as in BFCL."""
    found: dict[str, list[inspect.Parameter]] = {}
    for name, module in classes:
        cls = _load_class(name, module)
        for method, member in vars(cls).items():
            if not method.startswith("_") and inspect.isfunction(member):
                found[method] = list(inspect.signature(member).parameters.values())[1:]
    return found


def _is_json_like(value: object) -> bool:
    """A literal a tool-call argument can be: JSON's values (a tuple reads as a list)."""
    if isinstance(value, float):
        return math.isfinite(value)  # 1e999 reads as infinity, which JSON cannot hold
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json_like(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_like(v) for k, v in value.items())
    return False


def gold_call_parts(text: str) -> tuple[str, list[Any], dict[str, Any]] | str:
    """A ground-truth string's function name, positional and keyword values, read with ``ast``.

    Nothing is evaluated: each argument must be a literal JSON value. Both the
    import (which checks the call against the function docs, without BFCL's
    classes) and :func:`parse_gold_call` (which names positional arguments
    through the class's signature) read the strings here.

    Returns:
        ``(name, positional, keywords)``, or the phrase saying what is wrong
        (it follows the quoted string: ``'cd(*x)' unpacks a sequence ...``).
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "is not Python call syntax"
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return "is not one call of a function by its name"
    keywords: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return "unpacks a mapping (**); arguments must be written out"
        if keyword.arg in keywords:
            return f"passes {keyword.arg!r} twice"
        keywords[keyword.arg] = keyword.value
    values: list[Any] = []
    for value in [*node.args, *keywords.values()]:
        if isinstance(value, ast.Starred):
            return "unpacks a sequence (*); arguments must be written out"
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return "has an argument that is not a literal"
        if not _is_json_like(literal):
            return "has an argument that is not a JSON value (a set, bytes, infinity, ...)"
        values.append(literal)
    positional = values[: len(node.args)]
    return node.func.id, positional, dict(zip(keywords, values[len(node.args) :], strict=True))


def parse_gold_call(text: str, environment: Mapping[str, Any]) -> dict[str, Any]:
    """One of BFCL's ground-truth strings as a decoded call, without evaluating it.

    BFCL writes its ground truth as Python calls (``"cd(folder='document')"``,
    sometimes positional: ``"sort('final_report.pdf')"``). The string is
    parsed with :mod:`ast`; each argument must be a literal
    (:func:`ast.literal_eval`), and positional arguments are named through the
    signature of the method on the involved class that BFCL would dispatch to.

    Args:
        text: The ground-truth call.
        environment: The question's environment (``involved_classes`` is read).

    Returns:
        ``{"name": ..., "arguments": {...}}`` with keyword arguments only.

    Raises:
        DataError: The string is not a call of a public method of an involved
            class with literal arguments that fit its signature.
        DependencyError: BFCL's package is not installed.
    """
    signatures = _signatures(_environment_classes(environment, BFCL_CLASS_MODULES))
    parts = gold_call_parts(text)
    if isinstance(parts, str):
        raise DataError(f"ground-truth call {text!r} {parts}")
    name, positional, keywords = parts
    if name not in signatures:
        raise DataError(
            f"ground-truth call {text!r} names no public method of "
            f"{', '.join(environment['involved_classes'])}"
        )
    parameters = signatures[name]
    arguments: dict[str, Any] = {}
    for index, value in enumerate(positional):
        if (
            index >= len(parameters)
            or parameters[index].kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD
        ):
            raise DataError(
                f"ground-truth call {text!r}: positional argument {index + 1} fits no "
                f"parameter of {name}"
            )
        arguments[parameters[index].name] = value
    for keyword, value in keywords.items():
        if keyword in arguments:
            raise DataError(f"ground-truth call {text!r} passes {keyword} twice")
        arguments[keyword] = value
    return {"name": name, "arguments": arguments}


# ---------------------------------------------------------------- the worker's side


class _OverTime(BaseException):
    """Raised by the alarm inside a call (BFCL's ``except Exception`` does not catch it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _OverTime


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if not hasattr(signal, "setitimer"):  # no alarms here: the parent's deadline still holds
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _render(value: Any) -> str:
    """A method's return value as BFCL hands it to the model."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:
            return str(value)
    return str(value)


@dataclass
class _Environment:
    instances: dict[str, Any]
    methods: dict[str, Callable[..., Any]]


def _build(
    classes: Sequence[tuple[str, str]], initial_config: Mapping[str, Any], long_context: bool
) -> _Environment:
    instances: dict[str, Any] = {}
    methods: dict[str, Callable[..., Any]] = {}
    for name, module in classes:
        instance = _load_class(name, module)()
        if name not in _STATELESS:
            instance._load_scenario(
                deepcopy(initial_config.get(name, {})), long_context=long_context
            )
        instances[name] = instance
        for method, bound in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not method.startswith("_"):
                methods[method] = bound
    return _Environment(instances, methods)


class _Worker:
    """The worker's loop: requests in (pickled by the parent), JSON frames out."""

    def __init__(self, read_fd: int, write_fd: int, call_seconds: float, result_chars: int):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.call_seconds = call_seconds
        self.result_chars = result_chars
        self.environments: dict[str, _Environment] = {}

    def send(self, frame: Mapping[str, Any]) -> None:
        data = json.dumps(frame).encode()
        _write_all(self.write_fd, _HEADER.pack(len(data)) + data)

    def receive(self) -> tuple[Any, ...] | None:
        header = _read_exact(self.read_fd, _HEADER.size, None)
        if header is None:
            return None
        body = _read_exact(self.read_fd, _HEADER.unpack(header)[0], None)
        return None if body is None else tuple(pickle.loads(body))

    def serve(self) -> None:
        signal.signal(signal.SIGALRM, _on_alarm)
        while (request := self.receive()) is not None:
            operation, *arguments = request
            getattr(self, f"do_{operation}")(*arguments)

    def do_open(
        self,
        key: str,
        classes: Sequence[tuple[str, str]],
        initial_config: Mapping[str, Any],
        long_context: bool,
    ) -> None:
        self.environments.pop(key, None)
        try:
            self.environments[key] = _build(classes, initial_config, long_context)
        except DependencyError as exc:
            self.send({"error": str(exc), "kind": "dependency"})
        except Exception as exc:
            self.send({"error": f"{type(exc).__name__}: {exc}", "kind": "data"})
        else:
            self.send({"ok": None})

    def do_discard(self, key: str) -> None:  # no reply: nothing can fail, nobody waits
        self.environments.pop(key, None)

    def do_execute(self, key: str, calls: Sequence[Any]) -> None:
        environment = self.environments[key]
        for call in calls:
            result, undone = self.call(environment, call)
            self.send({"result": result, "undone": undone})
            if undone:  # the parent rebuilds this environment before going on
                return

    def call(self, environment: _Environment, call: Any) -> tuple[str, bool]:
        """One decoded call's result, and whether it hit a limit (and so must be undone)."""
        name = call.get("name") if isinstance(call, Mapping) else None
        arguments = call.get("arguments") if isinstance(call, Mapping) else None
        if not isinstance(name, str) or name not in environment.methods:
            return f"{_ERROR}{name!r} is not a function of this environment", False
        if not isinstance(arguments, Mapping) or not all(type(k) is str for k in arguments):
            return f"{_ERROR}the arguments of {name} must be an object of named values", False
        method = environment.methods[name]
        try:
            with _time_limit(self.call_seconds):
                try:
                    text = _render(method(**arguments))
                except MemoryError:
                    raise
                except Exception as exc:  # a bad argument or a failure inside the method
                    text = f"{_ERROR}{exc}"
                if len(text) > self.result_chars:
                    text = (
                        f"{text[: self.result_chars]}\n[result cut: {len(text):,} characters, "
                        f"the first {self.result_chars:,} shown]"
                    )
        except _OverTime:
            return (
                f"{_ERROR}{name} ran past its {self.call_seconds:g} s limit and was stopped; "
                "its effects were undone"
            ), True
        except MemoryError:
            return (
                f"{_ERROR}{name} ran out of memory and was stopped; its effects were undone",
                True,
            )
        return text, False

    def do_differences(self, key: str, reference_key: str) -> None:
        """First public attribute where ``key``'s instances differ from ``reference_key``'s."""
        found = None
        try:
            with _time_limit(self.call_seconds):
                found = _first_difference(
                    self.environments[key].instances, self.environments[reference_key].instances
                )
        except _OverTime:
            found = f"comparing the states ran past {self.call_seconds:g} s"
        except Exception as exc:  # a comparison BFCL's classes cannot make
            found = f"comparing the states failed: {type(exc).__name__}"
        self.send({"ok": found})


def _first_difference(model: Mapping[str, Any], reference: Mapping[str, Any]) -> str | None:
    """BFCL's state rule: every public attribute of the reference instance, compared with ==."""
    for class_name, expected in reference.items():
        got = model[class_name]
        for attribute, value in vars(expected).items():
            if not attribute.startswith("_") and getattr(got, attribute) != value:
                return f"{class_name}.{attribute}"
    return None


def _serve(read_fd: int, write_fd: int, call_seconds: float, memory_bytes: int, chars: int) -> None:
    """The worker process's entry point (started by :class:`BfclSandbox`)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ImportError, ValueError, OSError):  # no such limit on this platform: time limits hold
        pass
    _Worker(read_fd, write_fd, call_seconds, chars).serve()


# ---------------------------------------------------------------- framing


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes | None:
    """``size`` bytes from ``fd``; ``None`` at end of file or once ``deadline`` passed."""
    chunks = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------- the parent's side


@dataclass
class _Log:
    """What rebuilds an environment: how it was opened and every call it kept."""

    classes: tuple[tuple[str, str], ...]
    initial_config: Mapping[str, Any]
    long_context: bool
    calls: list[Any] = field(default_factory=list)


class _WorkerGone(Exception):
    """The worker missed its deadline or died (it is killed and replaced)."""


class BfclSandbox:
    """BFCL's multi-turn classes in one worker process, driven by decoded calls.

    Use it as a context manager; it is not thread-safe. Environments are
    named by a key chosen by the caller (two at once per question when
    checking: the model's and the ground truth's).

    Args:
        call_seconds: Time limit of one call (the parent waits twice as long).
        memory_bytes: The worker's address-space cap.
        result_chars: Results longer than this are cut, with a note.
        class_modules: Test hook: more classes, ``{class name: module}``, the
            module importable in the worker (it receives this process's
            ``sys.path``), its class built with no arguments and, unless
            stateless, loaded with ``_load_scenario(config, long_context=...)``
            like BFCL's own.

    Attributes:
        restarts: How often the worker was killed and replaced.
    """

    def __init__(
        self,
        *,
        call_seconds: float = BFCL_CALL_SECONDS,
        memory_bytes: int = BFCL_MEMORY_BYTES,
        result_chars: int = BFCL_RESULT_CHARS,
        class_modules: Mapping[str, str] | None = None,
    ) -> None:
        self.call_seconds = call_seconds
        self.memory_bytes = memory_bytes
        self.result_chars = result_chars
        self.modules = {**BFCL_CLASS_MODULES, **(class_modules or {})}
        self.restarts = 0
        self._logs: dict[str, _Log] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._to_worker = -1
        self._from_worker = -1

    def __enter__(self) -> BfclSandbox:
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ---- public operations

    def open(self, key: str, environment: Mapping[str, Any]) -> None:
        """Fresh instances of the environment's classes under ``key`` (replacing any).

        Args:
            key: The caller's name for this environment.
            environment: ``{"initial_config", "involved_classes", "long_context"}``.

        Raises:
            DataError: An unknown class, or a configuration BFCL's loader refuses.
            DependencyError: BFCL's package is not installed.
        """
        classes = _environment_classes(environment, self.modules)
        config = environment.get("initial_config", {})
        if not isinstance(config, Mapping):
            raise DataError(f"BFCL environment {key!r}: 'initial_config' must be an object")
        # Copies: a replay must not see what the caller changes afterwards.
        log = _Log(classes, deepcopy(config), bool(environment.get("long_context", False)))
        self._logs.pop(key, None)
        try:
            self._open(key, log)
        except _WorkerGone:
            said = self._worker_said()
            self._replace_worker()
            raise DataError(
                f"BFCL environment {key!r}: building its instances took over "
                f"{_OPEN_SECONDS:g} s or ended the worker" + (f"; it said: {said}" if said else "")
            ) from None
        self._logs[key] = log

    def execute(self, key: str, calls: Sequence[Mapping[str, Any]]) -> list[str]:
        """Run decoded calls in order on ``key``'s instances; one result string per call.

        Raises:
            KeyError: No environment is open under ``key``.
        """
        log = self._logs[key]
        results: list[str] = []
        pending = list(calls)
        while pending:
            done, undone = self._execute(key, pending, log)
            results.extend(done)
            pending = pending[len(done) :]
            if undone is not None:
                results.append(undone)
                pending = pending[1:]
        return results

    def state_difference(self, key: str, reference_key: str) -> str | None:
        """``Class.attribute`` where ``key``'s state first differs from ``reference_key``'s.

        BFCL's rule: every public attribute (not starting with ``_``) of each
        reference instance must equal the same attribute of the instance of
        the same class, compared with ``==``. ``None`` when all are equal.
        """
        for open_key in (key, reference_key):
            if open_key not in self._logs:
                raise KeyError(open_key)
        try:
            frame = self._request(("differences", key, reference_key), self._hard_seconds)
        except _WorkerGone:
            self._replace_worker()
            return f"comparing the states ended the worker or ran past {self._hard_seconds:g} s"
        found = frame["ok"]
        return None if found is None else str(found)

    def discard(self, key: str) -> None:
        """Forget ``key``'s environment (nothing if none is open)."""
        if self._logs.pop(key, None) is not None and self._process is not None:
            # A dead worker is found and replaced by the next request.
            with suppress(_WorkerGone):
                self._send(("discard", key))

    def close(self) -> None:
        """Stop the worker and forget every environment."""
        self._logs.clear()
        self._stop()

    # ---- the worker

    @property
    def _hard_seconds(self) -> float:
        return 2 * self.call_seconds

    def _start(self) -> None:
        if self._process is not None:
            return
        # The parent checks first, so a missing package fails before any worker starts.
        try:
            importlib.import_module(_PACKAGE)
        except ImportError as exc:
            raise _dependency_error(exc) from exc
        worker_in, to_worker = os.pipe()
        from_worker, worker_out = os.pipe()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _stop)
        code = (
            "import sys; from sommelier_mlflow.toolcalls._bfcl_exec import _serve; "
            "_serve(*map(int, sys.argv[1:3]), float(sys.argv[3]), *map(int, sys.argv[4:6]))"
        )
        path = os.pathsep.join(entry for entry in sys.path if entry)
        try:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    code,
                    str(worker_in),
                    str(worker_out),
                    repr(self.call_seconds),
                    str(self.memory_bytes),
                    str(self.result_chars),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=(worker_in, worker_out),
                env={**os.environ, "PYTHONPATH": path},
            )
        finally:
            os.close(worker_in)
            os.close(worker_out)
        self._to_worker, self._from_worker = to_worker, from_worker

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            os.close(self._to_worker)  # end of file: the worker's loop ends
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            os.close(self._from_worker)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _worker_said(self) -> str:
        """The end of what the worker wrote to stderr (why it could not start, say)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(self._stderr.tell() - 2000, 0))
        return self._stderr.read().decode(errors="replace").strip()

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._stop()

    def _replace_worker(self) -> None:
        """Kill the worker, start a fresh one and rebuild every open environment."""
        self._kill()
        self.restarts += 1
        self._start()
        for key, log in list(self._logs.items()):
            self._rebuild(key, log)

    def _rebuild(self, key: str, log: _Log) -> None:
        try:
            self._open(key, log)
            undone = self._execute(key, list(log.calls), None)[1]
        except _WorkerGone:
            undone = "the worker"
        if undone is not None:
            raise InvariantViolationError(
                f"BFCL environment {key!r} could not be rebuilt by replaying its calls: a call "
                "that had completed hit a limit on replay; rerun with a longer call limit"
            )

    def _open(self, key: str, log: _Log) -> None:
        frame = self._request(
            ("open", key, log.classes, log.initial_config, log.long_context), _OPEN_SECONDS
        )
        if "error" in frame:
            if frame["kind"] == "dependency":
                raise DependencyError(frame["error"])
            raise DataError(f"BFCL environment {key!r} cannot be built: {frame['error']}")

    def _execute(
        self, key: str, calls: list[Any], log: _Log | None
    ) -> tuple[list[str], str | None]:
        """Results of the calls the worker completed, and the error of one it stopped, if any.

        Completed calls join ``log``; after a stopped call ``key`` is rebuilt
        without it (a killed worker is replaced, rebuilding every environment).
        """
        done: list[str] = []
        try:
            self._send(("execute", key, calls))
        except (pickle.PicklingError, TypeError, ValueError, RecursionError):
            return done, f"{_ERROR}the arguments could not be passed to the function"
        except _WorkerGone:
            self._replace_worker()
            return done, f"{_ERROR}the call could not reach the worker; it did not run"
        for call in calls:
            try:
                frame = self._receive(time.monotonic() + self._hard_seconds)
            except _WorkerGone:
                name = call.get("name") if isinstance(call, Mapping) else None
                if log is not None:
                    self._replace_worker()
                return done, (
                    f"{_ERROR}{name} ran past {self._hard_seconds:g} s or ended the process "
                    "running it, and was stopped; its effects were undone"
                )
            if frame["undone"]:
                if log is not None:
                    self._rebuild(key, log)
                return done, str(frame["result"])
            done.append(str(frame["result"]))
            if log is not None:
                log.calls.append(deepcopy(call))
        return done, None

    def _request(self, request: tuple[Any, ...], seconds: float) -> dict[str, Any]:
        self._send(request)
        return self._receive(time.monotonic() + seconds)

    def _send(self, request: tuple[Any, ...]) -> None:
        if self._process is not None and self._process.poll() is not None:
            self._replace_worker()  # it died between requests (killed from outside, say)
        self._start()
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _write_all(self._to_worker, _HEADER.pack(len(data)) + data)
        except BrokenPipeError as exc:
            raise _WorkerGone from exc

    def _receive(self, deadline: float) -> dict[str, Any]:
        header = _read_exact(self._from_worker, _HEADER.size, deadline)
        body = (
            None
            if header is None
            else _read_exact(self._from_worker, _HEADER.unpack(header)[0], deadline)
        )
        if body is None:
            raise _WorkerGone
        frame: dict[str, Any] = json.loads(body)
        return frame
