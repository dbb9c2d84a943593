"""MLflow, ``requests`` and store errors, translated where they enter the product.

MLflow reports an unreachable server, a refused request and a broken artifact
store with a mix of its own exceptions, ``requests`` errors and database
errors. The commands need one answer per situation (exit 3 for a store that
cannot be reached, exit 2 for a request MLflow refuses), and a message that
never carries the credentials of a tracking URI. Every tracking call in the
package runs inside :func:`tracking_errors` for that reason, and the commands
call :func:`check_tracking_server` first, because MLflow itself retries an
unreachable server for minutes.

MLflow is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from sommelier_mlflow._redact import redact
from sommelier_mlflow.errors import ConfigError, SommelierError, TrackingError

__all__ = ["tracking_errors", "check_tracking_server"]

_UNREACHABLE_HINTS: Final = (
    "failed with exception",
    "failed with timeout",
    "max retries exceeded",
    "connection refused",
    "unable to open database file",
    "name or service not known",
)


def _tracking_uri() -> str:
    try:
        import mlflow

        return str(mlflow.get_tracking_uri())
    except Exception:  # the URI is only decoration for a message
        return "<unknown tracking URI>"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_unreachable(exc: BaseException) -> bool:
    import requests

    for link in _chain(exc):
        if isinstance(link, (requests.ConnectionError, requests.Timeout, ConnectionError)):
            return True
        if type(link).__name__ == "OperationalError":  # sqlalchemy / sqlite3: store unusable
            return True
        message = str(link).lower()
        if any(hint in message for hint in _UNREACHABLE_HINTS):
            return True
    return False


def _translate(exc: Exception, action: str, uri: str | None) -> SommelierError | None:
    from mlflow.exceptions import MlflowException

    reason = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    where = redact(uri or _tracking_uri())
    if _is_unreachable(exc):
        return TrackingError(
            f"cannot {action}: the MLflow tracking store at {where} is unreachable ({reason}); "
            "start the tracking server, or set MLFLOW_TRACKING_URI to a reachable server "
            "or a local store such as sqlite:///mlruns.db"
        )
    if isinstance(exc, MlflowException):
        code = str(getattr(exc, "error_code", ""))
        if code in {
            "INVALID_PARAMETER_VALUE",
            "RESOURCE_DOES_NOT_EXIST",
            "RESOURCE_ALREADY_EXISTS",
            "INVALID_STATE",
            "BAD_REQUEST",
        }:
            return ConfigError(f"MLflow refused to {action} ({where}): {reason}")
        return TrackingError(f"MLflow failed to {action} ({where}): {reason}")
    if isinstance(exc, OSError):
        return TrackingError(
            f"cannot {action} ({where}): {reason}; check that the tracking store and the "
            "experiment's artifact location exist and are writable"
        )
    return None


@contextmanager
def tracking_errors(action: str, tracking_uri: str | None = None) -> Iterator[None]:
    """Translate MLflow, ``requests`` and store errors raised inside the block.

    Args:
        action: What was being done, for the message ("log metrics").
        tracking_uri: The store concerned (default: MLflow's current one).

    Raises:
        TrackingError: The tracking server or artifact store is unreachable or
            failed (exit 3).
        ConfigError: MLflow refused the request, e.g. a param re-logged with a
            different value or an unknown run id (exit 2).
    """
    try:
        yield
    except SommelierError:
        raise
    except Exception as exc:
        translated = _translate(exc, action, tracking_uri)
        if translated is None:
            raise
        # Chaining would print the original message, which may hold credentials.
        cause = exc if redact(str(exc)) == str(exc) else None
        raise translated from cause


def check_tracking_server(tracking_uri: str | None = None, *, timeout: float = 10.0) -> str:
    """Fail fast, with one clear message, if the tracking store cannot be reached.

    MLflow retries an unreachable HTTP server for minutes before giving up; a
    command line should say so in seconds. For ``http(s)`` URIs this probes the
    server's ``/health`` endpoint once (any HTTP answer counts as reachable);
    for other stores it opens the store and lists one experiment.

    Returns:
        The tracking URI, redacted (safe to print).

    Raises:
        TrackingError: The store is unreachable (exit 3).
    """
    import mlflow

    uri = tracking_uri or str(mlflow.get_tracking_uri())
    shown = redact(uri)
    if uri.startswith(("http://", "https://")):
        import requests

        try:
            requests.get(f"{uri.rstrip('/')}/health", timeout=timeout)
        except requests.RequestException as exc:
            raise TrackingError(
                f"cannot reach the MLflow tracking server at {shown} "
                f"({type(exc).__name__}); start it (mlflow server ...) or set "
                "MLFLOW_TRACKING_URI to a reachable server or a local store such as "
                "sqlite:///mlruns.db"
            ) from None
        return shown
    from mlflow.tracking import MlflowClient

    with tracking_errors("open the tracking store", uri):
        MlflowClient(uri).search_experiments(max_results=1)
    return shown
