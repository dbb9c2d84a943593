"""Model Registry versions as models: ``models:/<name>/<version>``, ``models:/<name>@<alias>``.

``mlflow.transformers.log_model`` of a ``PeftModel`` stores only the adapter,
under ``peft/``, and names its base in the MLmodel's transformers flavor
(``source_model_name``, ``source_model_revision``). Resolving a registry URI
here means: find the version (an alias resolves to the version it points at
now, and the version is what gets recorded), download its files, check the
flavor, and say where the adapter and the base are. Promotion by verdict
(:func:`promote_version`) sets an alias only on evidence, and
:func:`check_promotion` refuses an alias or a version it could never set
before a comparison is computed or logged.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._redact import redact
from sommelier_mlflow.errors import ConfigError, DependencyError
from sommelier_mlflow.generation import adapter_digest
from sommelier_mlflow.integration._store_errors import tracking_errors

if TYPE_CHECKING:
    from sommelier_mlflow.evaluation import ComparisonReport

__all__ = [
    "REGISTRY_PREFIX",
    "is_registry_uri",
    "parse_registry_uri",
    "RegisteredModel",
    "resolve_registered_model",
    "check_alias",
    "check_promotion",
    "promote_version",
]

REGISTRY_PREFIX: Final = "models:/"
_URI: Final = re.compile(
    re.escape(REGISTRY_PREFIX) + r"(?P<name>[^/@]+)(?:/(?P<version>\d+)|@(?P<alias>[^/@]+))"
)
#: Tags set on a promoted version.
TAG_COMPARISON_RUN: Final = "sommelier.comparison_run_id"
TAG_VERDICT: Final = "sommelier.verdict"
TAG_CLAIMS_SHA256: Final = "sommelier.claims_sha256"
#: On a promoted version: the LoggedModel carrying the evaluated adapter's metrics.
TAG_EVALUATED_MODEL: Final = "sommelier.evaluated_model_id"
#: MLflow's rule for an alias: letters, digits, ``_`` and ``-``, at most 255 of them,
#: and neither ``latest`` (any case) nor a version's spelling ``v<digits>``.
_ALIAS: Final = re.compile(r"[\w-]{1,255}")
_RESERVED_ALIAS: Final = re.compile(r"latest|v\d+", re.IGNORECASE)


def is_registry_uri(value: object) -> bool:
    """Whether an option names a Model Registry version rather than a path or Hub id."""
    return isinstance(value, str) and value.startswith(REGISTRY_PREFIX)


def parse_registry_uri(uri: str) -> tuple[str, str | None, str | None]:
    """``(name, version, alias)`` of ``models:/<name>/<version>`` or ``models:/<name>@<alias>``.

    Raises:
        ConfigError: Any other shape (exit 2).
    """
    match = _URI.fullmatch(uri)
    if match is None:
        raise ConfigError(
            f"{uri!r} is not a Model Registry version: write models:/<name>/<version> "
            "or models:/<name>@<alias>"
        )
    return match["name"], match["version"], match["alias"]


@dataclass(frozen=True)
class RegisteredModel:
    """A resolved registry version of the transformers flavor, downloaded.

    Attributes:
        uri: The URI as given (an alias stays an alias here).
        name: Registered model name.
        version: The version the URI resolved to.
        source_run_id: The run that logged the version, if any.
        local_dir: The downloaded model folder (with ``MLmodel``).
        adapter_dir: Its ``peft/`` folder, when the version holds a PEFT adapter
            (the flavor's ``peft_adaptor`` key names it).
        adapter_sha256: The digest of that folder, as for any adapter directory.
        base_model: The base the flavor names (``source_model_name``).
        base_revision: Its revision (``source_model_revision``).
        model_dir: A full model's weights folder (no adapter), when saved.
        tokenizer_dir: The tokenizer saved with a full model, when there is one.
    """

    uri: str
    name: str
    version: str
    source_run_id: str | None
    local_dir: Path
    adapter_dir: Path | None
    adapter_sha256: str | None
    base_model: str | None
    base_revision: str | None
    model_dir: Path | None = None
    tokenizer_dir: Path | None = None
    model_id: str | None = None

    def tags(self, role: str) -> dict[str, str]:
        """``sommelier.registry.<role>.*`` tags recording the identity on an arm's run."""
        values = {
            "uri": self.uri,
            "name": self.name,
            "version": self.version,
            "source_run_id": self.source_run_id or "",
            "adapter_sha256": self.adapter_sha256 or "",
            "model_id": self.model_id or "",
        }
        return {f"sommelier.registry.{role}.{key}": value for key, value in values.items() if value}


def _lookup(client: Any, uri: str, name: str, version: str | None, alias: str | None) -> Any:
    import mlflow

    # The registry may live apart from the tracking store (MLFLOW_REGISTRY_URI).
    store = redact(str(mlflow.get_registry_uri()))
    try:
        with tracking_errors(f"look up {uri} in the Model Registry", store):
            if alias is not None:
                return client.get_model_version_by_alias(name, alias)
            return client.get_model_version(name, version)
    except ConfigError as exc:  # MLflow refused: no such model, version or alias
        reason = redact(str(exc.__cause__ or exc).strip().splitlines()[0])
        raise DependencyError(
            f"{uri} does not resolve in the Model Registry at {store} ({reason}); check the "
            "name and the version or alias on the MLflow UI's Models page, and that "
            "MLFLOW_TRACKING_URI (or MLFLOW_REGISTRY_URI) names the store it was registered in"
        ) from exc


def resolve_registered_model(uri: str, download_root: str | Path) -> RegisteredModel:
    """Find, download and check a registry version of the transformers flavor.

    Args:
        uri: ``models:/<name>/<version>`` or ``models:/<name>@<alias>``.
        download_root: Folder under which ``<name>/v<version>/`` is (re)downloaded.

    Raises:
        ConfigError: A malformed URI, or a version of another flavor (exit 2).
        DependencyError: The URI does not resolve, or the download failed (exit 3).
    """
    import mlflow
    from mlflow.models import Model
    from mlflow.tracking import MlflowClient

    name, version, alias = parse_registry_uri(uri)
    found = _lookup(MlflowClient(), uri, name, version, alias)
    resolved = str(found.version)
    target = Path(download_root) / re.sub(r"[^A-Za-z0-9._-]", "_", name) / f"v{resolved}"
    shutil.rmtree(target, ignore_errors=True)  # a registry version's files never change
    target.mkdir(parents=True, exist_ok=True)
    with tracking_errors(f"download {uri}"):
        local = Path(
            mlflow.artifacts.download_artifacts(
                artifact_uri=f"models:/{name}/{resolved}", dst_path=str(target)
            )
        )
    if not (local / "MLmodel").is_file():
        raise DependencyError(f"{uri} (version {resolved}) has no MLmodel file; is it a model?")
    flavors = Model.load(str(local / "MLmodel")).flavors
    if "transformers" not in flavors:
        raise ConfigError(
            f"{uri} is version {resolved} of flavor(s) {', '.join(sorted(flavors))}; only "
            "transformers-flavor versions (mlflow.transformers.log_model) can be evaluated"
        )
    flavor = flavors["transformers"]
    peft_folder = flavor.get("peft_adaptor")  # MLflow's spelling of the flavor key
    adapter_dir = local / str(peft_folder) if peft_folder else None
    model_dir = local / "model" if (local / "model").is_dir() else None
    tokenizer_dir = local / "components" / "tokenizer"
    return RegisteredModel(
        uri=uri,
        name=name,
        version=resolved,
        source_run_id=found.run_id or None,
        local_dir=local,
        adapter_dir=adapter_dir,
        adapter_sha256=None if adapter_dir is None else adapter_digest(adapter_dir),
        base_model=flavor.get("source_model_name"),
        base_revision=flavor.get("source_model_revision"),
        model_dir=model_dir,
        tokenizer_dir=tokenizer_dir if tokenizer_dir.is_dir() else None,
        model_id=_version_model_id(found),
    )


#: A version registered from a LoggedModel has the source ``models:/<model id>``.
_MODEL_SOURCE: Final = re.compile(re.escape(REGISTRY_PREFIX) + r"(m-[0-9a-f]+)")


def _version_model_id(version: Any) -> str | None:
    """The LoggedModel a version was registered from (MLflow 3), if any.

    The registry's SQL store does not fill ``ModelVersion.model_id``; the
    version's ``source`` names the model (``models:/m-...``) either way.
    """
    explicit = getattr(version, "model_id", None)
    if explicit:
        return str(explicit)
    match = _MODEL_SOURCE.fullmatch(str(getattr(version, "source", "") or ""))
    return match.group(1) if match else None


def check_alias(alias: str) -> None:
    """Refuse an alias the Model Registry would refuse to set, before it is tried.

    The registry checks an alias only when it is set, which for a promotion is
    after the comparison is computed and logged; the rule is MLflow's own.

    Raises:
        ConfigError: The alias is empty, too long, reserved or has other characters (exit 2).
    """
    shown = alias if len(alias) <= 40 else f"{alias[:40]}... ({len(alias)} characters)"
    if not _ALIAS.fullmatch(alias):
        raise ConfigError(
            f"alias {shown!r} cannot be set in the Model Registry: an alias is 1 to 255 "
            "letters, digits, '_' or '-' (no spaces or '/'); choose another, e.g. champion"
        )
    if _RESERVED_ALIAS.fullmatch(alias):
        raise ConfigError(
            f"alias {alias!r} is reserved by the Model Registry ('latest' and 'v<number>' "
            "name versions); choose another, e.g. champion"
        )


def check_promotion(name: str, version: str, alias: str) -> None:
    """Check that ``alias`` could be set on ``models:/<name>/<version>``, changing nothing.

    Called before the comparison is computed, so a promotion that could never
    happen leaves no comparison run behind.

    Raises:
        ConfigError: The alias is not one the registry accepts (exit 2).
        DependencyError: The version does not exist in the registry (exit 3).
        TrackingError: The registry store cannot be reached (exit 3).
    """
    from mlflow.tracking import MlflowClient

    check_alias(alias)
    _lookup(MlflowClient(), f"models:/{name}/{version}", name, version, None)


def promote_version(
    name: str,
    version: str,
    alias: str,
    report: ComparisonReport,
    comparison_run_id: str,
    adapter_model_id: str | None = None,
) -> bool:
    """Set ``alias`` on the version and tag it with the evidence, only if claims are supported.

    The evidence is the comparison run, the verdict, the claims' digest and,
    when the adapter arm's metrics are on a LoggedModel, that model's id
    (:data:`TAG_EVALUATED_MODEL`), so the version leads to the model view of
    the evaluation that justified it.

    Returns:
        Whether the alias was set; nothing in the registry changes otherwise.

    Raises:
        ConfigError: The report decides no claims (promotion needs a verdict), or
            the alias is not one the registry accepts.
    """
    from mlflow.tracking import MlflowClient

    verdict = report.claims
    if verdict is None:
        raise ConfigError("promotion needs a verdict: pass the preregistered --claims")
    check_alias(alias)
    if not verdict.supported:
        return False
    client = MlflowClient()
    with tracking_errors(f"promote models:/{name}/{version} to @{alias}"):
        client.set_model_version_tag(name, version, TAG_COMPARISON_RUN, comparison_run_id)
        client.set_model_version_tag(name, version, TAG_VERDICT, verdict.verdict)
        client.set_model_version_tag(name, version, TAG_CLAIMS_SHA256, verdict.claims_sha256)
        if adapter_model_id:
            client.set_model_version_tag(name, version, TAG_EVALUATED_MODEL, adapter_model_id)
        client.set_registered_model_alias(name, alias, version)
    return True
