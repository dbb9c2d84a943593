"""Generation backends by name: one decorator to register, one call to build.

A backend is a module with a factory decorated by :func:`register_backend`;
the command line (``--backend NAME``) and the MLproject (``backend``) reach it
through :func:`create_backend`. The built-in backends register themselves
when :mod:`sommelier_mlflow.generation` is imported, so the catalog is
complete whichever module a caller imports first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeVar

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.generation._protocol import BackendRequest, GenerationBackend

__all__ = ["BackendFactory", "backend_names", "create_backend", "register_backend"]

BackendFactory = Callable[[BackendRequest], GenerationBackend]
_Factory = TypeVar("_Factory", bound=BackendFactory)

# Names are recorded in decodings and params and typed on command lines.
_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")
_FACTORIES: dict[str, BackendFactory] = {}


def register_backend(name: str) -> Callable[[_Factory], _Factory]:
    """Register a backend factory under ``name``; use as a decorator.

    Registering a second factory under a taken name is refused instead of
    replacing the first: the recorded backend name must mean one thing.

    Raises:
        ConfigError: A malformed or already registered name.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"backend name {name!r} must be lower-case letters, digits and '_', "
            "starting with a letter"
        )

    def decorate(factory: _Factory) -> _Factory:
        existing = _FACTORIES.get(name)
        if existing is not None and existing is not factory:
            raise ConfigError(f"a generation backend named {name!r} is already registered")
        _FACTORIES[name] = factory
        return factory

    return decorate


def backend_names() -> tuple[str, ...]:
    """The registered backend names, sorted."""
    return tuple(sorted(_FACTORIES))


def create_backend(name: str, request: BackendRequest) -> GenerationBackend:
    """Build the backend registered as ``name`` for ``request``.

    Raises:
        ConfigError: No backend has that name (the message lists them), or the
            backend refuses the request.
        InvariantViolationError: The factory returned something that is not a
            :class:`GenerationBackend`, or a fingerprint that does not carry
            the backend's own identity (generations could then not be
            re-scored from their manifest).
        DependencyError: The backend's model, adapter or package is missing.
    """
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown generation backend {name!r}; choose one of {', '.join(backend_names())}"
        )
    backend = factory(request)
    if not isinstance(backend, GenerationBackend):
        raise InvariantViolationError(
            f"the factory of backend {name!r} returned {type(backend).__name__}, which does "
            "not implement GenerationBackend"
        )
    fingerprint = backend.fingerprint()
    expected = {
        "model_identity": backend.model_identity().to_dict(),
        "adapter": backend.adapter_info(),
    }
    for key, value in expected.items():
        if key not in fingerprint or canonical_json(fingerprint[key]) != canonical_json(value):
            raise InvariantViolationError(
                f"backend {name!r}: fingerprint()[{key!r}] must equal the backend's own "
                f"{key}, so that its generations can be re-scored from their manifest"
            )
    return backend
