"""The single error tree of sommelier_mlflow.

Every error the package raises on purpose derives from :class:`SommelierError`.
Each class carries the process exit code the command line maps it to, so the
CLI can turn any expected failure into a one-line message and a stable exit
status without a traceback. Where a Python builtin exception type is part of a
documented contract (``KeyError`` for unknown catalog names, ``ValueError`` /
``TypeError`` for bad metric configuration), the class also derives from that
builtin so callers catching the builtin keep working.

Exit codes:

====  ==================================================================
code  meaning
====  ==================================================================
1     an unexpected internal error (a bug: please report it)
2     bad input or configuration (:class:`InputError` and subclasses)
3     a missing dependency, model or adapter, or an unreachable tracking
      server (:class:`DependencyError`, :class:`TrackingError`)
4     comparison refused: the gate, or claims that do not match their
      preregistration (:class:`ComparisonRefusedError`)
5     an invariant violated: digest mismatch, mixed decoding
      (:class:`InvariantViolationError`)
6     a preregistered claim is not supported, only when the user asked
      to fail on it (:class:`ClaimNotSupportedError`)
====  ==================================================================
"""

from __future__ import annotations

__all__ = [
    "ClaimNotSupportedError",
    "ComparisonRefusedError",
    "ConfigError",
    "DataError",
    "DependencyError",
    "InputError",
    "InvariantViolationError",
    "MetricConfigError",
    "MetricTypeError",
    "SommelierError",
    "TrackingError",
    "UnknownMetricError",
]


class SommelierError(Exception):
    """Root of every error this package raises deliberately.

    Attributes:
        exit_code: The CLI exit status for this kind of failure.
    """

    exit_code: int = 1


class InputError(SommelierError):
    """Bad input or configuration supplied by the user (exit 2)."""

    exit_code = 2


class ConfigError(InputError):
    """An invalid option, parameter or metric configuration (exit 2)."""


class DataError(InputError):
    """A data file that cannot be trusted: malformed, unknown schema, duplicates (exit 2).

    Messages name the file and the 1-based line so the user can fix it.

    Attributes:
        reason: The message without the place, so a caller that knows more
            (which BFCL category a file holds, say) can add to it and keep the place.
        path: The file, if known.
        line: The 1-based line, if known.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.reason = message
        self.path = path
        self.line = line


class MetricConfigError(ConfigError, ValueError):
    """A metric received runtime parameters its schema does not accept."""


class MetricTypeError(ConfigError, TypeError):
    """A metric was declared or fed with a value of the wrong type."""


class UnknownMetricError(ConfigError, KeyError):
    """A catalog lookup named a metric that is not registered."""

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class DependencyError(SommelierError):
    """A missing optional dependency, model, tokenizer or adapter (exit 3)."""

    exit_code = 3


class TrackingError(SommelierError):
    """The MLflow tracking server or artifact store could not be reached (exit 3)."""

    exit_code = 3


class ComparisonRefusedError(SommelierError):
    """The comparison gate found the two arms not provably comparable (exit 4).

    Attributes:
        field: Dotted name of the first identity field that differed.
    """

    exit_code = 4

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InvariantViolationError(SommelierError):
    """An internal guarantee was broken: digest mismatch, mixed decoding (exit 5)."""

    exit_code = 5


class ClaimNotSupportedError(SommelierError):
    """A preregistered claim was not supported (exit 6, with ``--fail-on-unsupported``).

    Not a malfunction: the comparison ran and its reports were written and
    logged. The distinct exit code lets CI and model-promotion steps gate on
    the verdict without parsing any output.

    Attributes:
        claim_ids: The ids of the claims that were not supported.
    """

    exit_code = 6

    def __init__(self, message: str, *, claim_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.claim_ids = claim_ids
