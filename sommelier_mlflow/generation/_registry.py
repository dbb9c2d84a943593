"""Generation backends by name, each with a typed model of its options.

A backend is one module: a factory decorated by :func:`register_backend`,
naming a pydantic model of the options it takes. The command line
(``--backend NAME --backend-options KEY=VALUE``), the MLproject (``backend``,
``backend_options``) and ``sommelier-mlflow backends`` all read that model,
so a new backend's options are checked, typed, defaulted and documented
without touching the CLI. The built-in backends register themselves when
:mod:`sommelier_mlflow.generation` is imported, so the catalog is complete
whichever module a caller imports first; another installed package adds its
own through the ``sommelier_mlflow.backends`` entry-point group (its entry
point names a module that calls :func:`register_backend`), loaded on the
first listing or lookup (see :mod:`sommelier_mlflow._plugins`).
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow._plugins import BACKENDS_GROUP, Registry
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.generation._protocol import (
    BackendRequest,
    GenerationBackend,
    close_backend,
)

__all__ = [
    "BackendOptions",
    "NoOptions",
    "BackendFactory",
    "BackendOption",
    "BackendSpec",
    "register_backend",
    "backend_names",
    "backend_spec",
    "create_backend",
]


class BackendOptions(BaseModel):
    """The options one backend takes: typed, defaulted, checked, unknown keys refused.

    Subclass it with one annotated field per option; a ``Field(description=...)``
    becomes the option's help in ``--help`` and ``sommelier-mlflow backends``.
    Values typed on a command line arrive as strings and are converted by the
    field's type (``"16"`` to ``16``). The three methods let a backend say how
    its options bear on the arm, without the command line knowing the backend.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def for_arm(self, kind: str) -> BackendOptions:
        """These options for an arm of ``kind`` (``"base"`` or ``"adapter"``).

        ``main`` passes one set of options for both arms; an option that names
        the adapter (a served adapter's name) must reach the adapter arm only.
        """
        return self

    def names_adapter(self) -> bool:
        """Whether these options name an adapter (then the arm is an adapter arm)."""
        return False

    def job_identity(self) -> dict[str, object]:
        """The options that decide which outputs a run produces.

        They name the run's resume folder, so a resume never mixes outputs of
        two models; options that only change how fast outputs arrive are left
        out, so changing them resumes the same run.
        """
        return {}


class NoOptions(BackendOptions):
    """The options of a backend that takes none."""


_Options = TypeVar("_Options", bound=BackendOptions)
#: Builds a backend from the request and its checked options.
BackendFactory = Callable[[BackendRequest, _Options], GenerationBackend]
_Factory = TypeVar("_Factory", bound=Callable[..., GenerationBackend])

# Names are recorded in decodings and params and typed on command lines.
_NAME: Final = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class BackendOption:
    """One option as ``--help`` and ``sommelier-mlflow backends`` show it."""

    name: str
    type: str
    #: ``"default 16"``, or ``"required"`` for an option without a default.
    default: str
    help: str


def _type_name(annotation: Any) -> str:
    """``int``, ``str | None``, ``dict[str, str]``: the annotation as a user reads it."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_type_name(arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(str(arg) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin is not None:
        args = ", ".join(_type_name(arg) for arg in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation))


@dataclass(frozen=True)
class BackendSpec(Generic[_Options]):
    """A registered backend: its name, its factory and the model of its options.

    Attributes:
        name: What ``--backend`` takes and the decoding records.
        factory: Builds the backend from a request and its checked options.
        options: The pydantic model of the options.
        summary: One line saying what the backend is (its factory's docstring).
        listed: Whether ``--backend`` offers it; internal backends (``replay``,
            which ``score --precomputed`` builds) are not chosen by name.
    """

    name: str
    factory: Callable[[BackendRequest, _Options], GenerationBackend]
    options: type[_Options]
    summary: str
    listed: bool = True

    def parse_options(self, given: Mapping[str, object]) -> _Options:
        """``given`` checked and converted by the options model.

        Raises:
            ConfigError: An unknown option (the message lists the accepted
                ones) or a value of the wrong type or range.
        """
        try:
            return self.options.model_validate(dict(given))
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = ".".join(str(part) for part in error["loc"]) or "options"
                if error["type"] == "extra_forbidden":
                    problems.append(f"it does not take the option {where!r}")
                else:
                    shown = repr(error["input"])
                    shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
                    problems.append(f"option {where}: {error['msg']} (got {shown})")
            accepted = ", ".join(self.options.model_fields) or "none"
            raise ConfigError(
                f"the {self.name} backend refused its options: {'; '.join(problems)} "
                f"(accepted: {accepted}; see `sommelier-mlflow backends`)"
            ) from None

    def describe(self) -> list[BackendOption]:
        """Each option's name, type, ``default X`` (or ``required``) and help."""
        described = []
        for name, info in self.options.model_fields.items():
            default = "required" if info.is_required() else f"default {info.get_default()!r}"
            described.append(
                BackendOption(name, _type_name(info.annotation), default, info.description or "")
            )
        return described


_BACKENDS: Final[Registry[BackendSpec[Any]]] = Registry(
    "generation backend", BACKENDS_GROUP, BackendSpec
)


def register_backend(
    name: str, *, options: type[BackendOptions] = NoOptions, listed: bool = True
) -> Callable[[_Factory], _Factory]:
    """Register a backend factory under ``name``, with the model of its options.

    Use as a decorator on a function (or class) taking ``(request, options)``.
    Registering a second factory under a taken name is refused instead of
    replacing the first: the recorded backend name must mean one thing.

    Raises:
        ConfigError: A malformed or already registered name, or an options
            model that is not a :class:`BackendOptions`.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"backend name {name!r} must be lower-case letters, digits and '_', "
            "starting with a letter"
        )
    if not (isinstance(options, type) and issubclass(options, BackendOptions)):
        raise ConfigError(
            f"backend {name!r}: options must be a BackendOptions subclass, got {options!r}"
        )

    def decorate(factory: _Factory) -> _Factory:
        summary = (factory.__doc__ or "").strip().splitlines()
        spec = BackendSpec(name, factory, options, summary[0] if summary else "", listed)
        try:
            _BACKENDS.register(name, spec)
        except ConfigError:
            # The same factory again (a module imported twice) is harmless;
            # ``get`` finds the taken name without loading plugins.
            if _BACKENDS.get(name).factory is not factory:
                raise
        return factory

    return decorate


def backend_names(*, listed_only: bool = False) -> tuple[str, ...]:
    """The registered backend names, plugins included, sorted.

    ``listed_only`` keeps those ``--backend`` offers.
    """
    return tuple(name for name, spec in _BACKENDS.items() if spec.listed or not listed_only)


def backend_spec(name: str) -> BackendSpec[Any]:
    """The backend registered as ``name``.

    Raises:
        ConfigError: No backend has that name (the message lists them).
    """
    if name not in _BACKENDS:
        raise ConfigError(
            f"unknown generation backend {name!r}; choose one of "
            f"{', '.join(backend_names(listed_only=True))}"
        )
    return _BACKENDS.get(name)


def create_backend(name: str, request: BackendRequest) -> GenerationBackend:
    """Build the backend registered as ``name`` for ``request``.

    ``request.options`` are checked against the backend's options model first.
    The caller owns the backend: it calls
    :func:`~sommelier_mlflow.generation.close_backend` once done, on error
    too (a backend refused here is closed before the error is raised).

    Raises:
        ConfigError: No backend has that name (the message lists them), its
            options are wrong, or the backend refuses the request.
        InvariantViolationError: The factory returned something that is not a
            :class:`GenerationBackend`, or a fingerprint that does not carry
            the backend's own identity (generations could then not be
            re-scored from their manifest).
        DependencyError: The backend's model, adapter or package is missing.
    """
    spec = backend_spec(name)
    backend = spec.factory(request, spec.parse_options(request.options))
    try:
        _check_backend(name, backend)
    except BaseException:
        close_backend(backend)  # refused, so nobody else will close it
        raise
    return backend


def _check_backend(name: str, backend: object) -> None:
    """Refuse a factory's result that is no backend, or whose fingerprint lacks its identity."""
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
