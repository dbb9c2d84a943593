"""Engines shared by the backends that load the same thing, closed by their last user.

A backend object is cheap; what it loads is not: a model's weights and its
tokenizer, or an in-process inference engine that owns a GPU. ``main``
evaluates a base arm and an adapter arm of one base model, and a leaderboard
sweep several adapters of one base: each arm builds its own backend, yet all
of them can run on one engine that picks the adapter per call (peft's named
adapters, an engine's LoRA request). :func:`shared_engine` hands that engine
out by a key naming what it loads and counts its users: the factory runs for
the first, every later user gets the same object, and the engine's
``close()`` (if it has one) runs exactly once, when the last
:class:`EngineLease` is closed.

Sharing lasts while somebody holds the engine. Two arms run one after the
other never overlap, so a command that runs several arms wraps them in
:func:`keep_engines`: an engine opened inside the block stays open until the
block ends, and the next arm on the same key finds it.

The registry refers to its engines weakly: a lease dropped without being
closed (a script that builds a backend and forgets it) pins nothing, and the
engine is freed with its last holder, as it would be without sharing. Only
``close()`` promises that the engine's own ``close()`` runs.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, Final, Generic, TypeVar

from sommelier_mlflow.errors import InvariantViolationError
from sommelier_mlflow.generation._protocol import close_backend

__all__ = ["EngineLease", "shared_engine", "keep_engines", "open_engines"]

_Engine = TypeVar("_Engine")

# Re-entrant: a factory may itself ask for another shared engine.
_LOCK: Final = threading.RLock()


class _Holder:
    """One open engine, its key and how many leases hold it."""

    __slots__ = ("__weakref__", "engine", "key", "users")

    def __init__(self, key: Hashable, engine: Any) -> None:
        self.key = key
        self.engine = engine
        self.users = 0


_OPEN: Final[dict[Hashable, weakref.ref[_Holder]]] = {}


def _registered(key: Hashable) -> _Holder | None:
    """The open engine registered under ``key``, forgetting one that was garbage-collected."""
    ref = _OPEN.get(key)
    holder = None if ref is None else ref()
    if ref is not None and holder is None:
        del _OPEN[key]
    return holder


class EngineLease(Generic[_Engine]):
    """One user's hold on a shared engine; :meth:`close` it once done (or use ``with``).

    Closing is idempotent; the engine itself closes with its last lease.
    """

    __slots__ = ("_closed", "_holder")

    def __init__(self, holder: _Holder) -> None:
        self._holder = holder
        self._closed = False

    @property
    def key(self) -> Hashable:
        """What the engine loads, as its factory's caller named it."""
        return self._holder.key

    @property
    def engine(self) -> _Engine:
        """The shared engine.

        Raises:
            InvariantViolationError: The lease was closed: the engine may be gone.
        """
        if self._closed:
            raise InvariantViolationError(
                f"the engine {self._holder.key!r} was used after its lease was closed; "
                "open the backend again"
            )
        engine: _Engine = self._holder.engine
        return engine

    @property
    def closed(self) -> bool:
        """Whether this lease was closed."""
        return self._closed

    def retire(self) -> None:
        """Share this engine no more: later requests for its key open a fresh one.

        For an engine left in a state its next user must not inherit (an
        adapter that failed half-way through loading into a shared model).
        Current users keep it until they close.
        """
        with _LOCK:
            if _registered(self._holder.key) is self._holder:
                del _OPEN[self._holder.key]

    def close(self) -> None:
        """Release the engine; the last release closes it (its ``close()``, once)."""
        with _LOCK:
            if self._closed:
                return
            self._closed = True
            holder = self._holder
            holder.users -= 1
            if holder.users > 0:
                return
            if _registered(holder.key) is holder:
                del _OPEN[holder.key]
        # Outside the lock: closing an engine may take seconds, other keys need not wait.
        close_backend(holder.engine)

    def __enter__(self) -> EngineLease[_Engine]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Keeper:
    """The leases a :func:`keep_engines` block holds, one per engine opened inside it."""

    def __init__(self) -> None:
        self.leases: list[EngineLease[Any]] = []

    def hold(self, holder: _Holder) -> None:
        if all(lease._holder is not holder for lease in self.leases):
            holder.users += 1
            self.leases.append(EngineLease(holder))


_KEEPER: Final[ContextVar[_Keeper | None]] = ContextVar("sommelier_engine_keeper", default=None)


def shared_engine(key: Hashable, factory: Callable[[], _Engine]) -> EngineLease[_Engine]:
    """A lease on the engine registered under ``key``, opened by ``factory`` if none is open.

    ``key`` must name everything that makes two engines differ (source,
    revision, device, precision, ...) and nothing secret: two requests with
    equal keys get one engine. A backend name first in the key keeps two
    backends' engines apart. The factory runs under the registry's lock, so two
    threads asking for one key load it once; if it raises, nothing is
    registered.

    Raises:
        Whatever ``factory`` raises.
    """
    with _LOCK:
        holder = _registered(key)
        if holder is None:
            holder = _Holder(key, factory())
            _OPEN[key] = weakref.ref(holder)
        holder.users += 1
        lease: EngineLease[_Engine] = EngineLease(holder)
        keeper = _KEEPER.get()
        if keeper is not None:
            keeper.hold(holder)
        return lease


@contextlib.contextmanager
def keep_engines() -> Iterator[None]:
    """Keep every engine opened inside the block open until the block ends.

    Arms that run one after the other (``main``'s base then adapter, a sweep
    of adapters on one base) then share one engine although no two of them
    are open at once. The block releases its holds however it ends, and an
    engine nobody else holds closes then.
    """
    keeper = _Keeper()
    token = _KEEPER.set(keeper)
    try:
        yield
    finally:
        _KEEPER.reset(token)
        with contextlib.ExitStack() as stack:  # every lease is released, even if a close fails
            for lease in reversed(keeper.leases):
                stack.callback(lease.close)


def open_engines() -> tuple[Hashable, ...]:
    """The keys of the engines a new user would share now (open and not retired)."""
    with _LOCK:
        return tuple(key for key in list(_OPEN) if _registered(key) is not None)
