"""MLflow 3's model view: each evaluated model as a LoggedModel carrying its metrics.

MLflow 3 attaches evaluation results to a model (a ``LoggedModel``) rather
than only to a run, and lists those models with their metrics per dataset in
the experiment's *Models* tab. An arm's model is the base model, or the base
model plus an adapter; its weights live elsewhere (the Hub, a local folder, a
served engine), so it is created as an *external* model: nothing is copied.

One model per identity. The identity is what decides which tokens come out
(base and tokenizer ids and revisions, the adapter's source and file digest,
the backend, the output format through the parser version, the prompt
format); its SHA-256 is tagged on the model (:data:`TAG_IDENTITY_SHA256`) and
an arm finds its model by that tag, so evaluating the same model again adds
metrics to the same LoggedModel instead of creating another.

Two processes evaluating one identity at once both find nothing and both
create: each then searches again and keeps the oldest model (creation time,
then id); the one whose model is not kept deletes it. Both runs' metrics land
on the kept model.

A store without LoggedModels (a third-party store plugin, a tracking server
older than MLflow 3) is told apart from a failing one: the arm is logged as
before, and one warning per store names it. MLflow is imported inside the
functions, so importing this module stays cheap.
"""

from __future__ import annotations

import hashlib
import re
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow._redact import redact
from sommelier_mlflow.integration._primitives import log_metrics_batch
from sommelier_mlflow.integration._store_errors import tracking_errors
from sommelier_mlflow.integration._store_text import store_text

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.evaluation import ArmIdentity

__all__ = [
    "TAG_IDENTITY_SHA256",
    "TAG_CHECKPOINT_STEP",
    "TAG_LOGGED_MODEL_ID",
    "TAG_TRAINING_RUN_ID",
    "MODEL_TYPE",
    "LoggedModelUnsupportedWarning",
    "model_identity_fields",
    "identity_sha256",
    "logged_model_name",
    "find_or_create_model",
    "is_logged_model_id",
    "checkpoint_report_path",
    "download_checkpoint_report",
    "log_checkpoint_model",
]

#: SHA-256 of the canonical JSON of :func:`model_identity_fields`: how an arm finds its model.
TAG_IDENTITY_SHA256: Final = "sommelier.identity_sha256"
#: On an arm's run: the LoggedModel its metrics are linked to.
TAG_LOGGED_MODEL_ID: Final = "sommelier.logged_model_id"
#: On a checkpoint's model: the training step it was evaluated at.
TAG_CHECKPOINT_STEP: Final = "sommelier.checkpoint_step"
#: On a checkpoint's model: the training run it was evaluated in.
TAG_TRAINING_RUN_ID: Final = "sommelier.training_run_id"
#: The LoggedModel type of every model the product creates (searchable in the UI).
MODEL_TYPE: Final = "tool-calling"
#: Characters MLflow refuses in a LoggedModel name.
_BAD_NAME_CHARS: Final = re.compile(r"[/:.%\"']+")
#: How long a creator waits before it checks whether another process created too.
_SETTLE_SECONDS: Final = 0.3
#: How many looks in a row must name the same oldest model before a creator settles on it,
#: and how many looks it takes at most.
_SETTLE_AGREEING: Final = 3
_SETTLE_LOOKS: Final = 10
#: A model younger than this (seconds) may still be in a creators' race: finding it, wait too.
_YOUNG_SECONDS: Final = 30.0
#: MLflow error codes with which a store says it has no LoggedModels.
_UNSUPPORTED_CODES: Final = frozenset({"ENDPOINT_NOT_FOUND", "NOT_IMPLEMENTED", "FEATURE_DISABLED"})
_warned_stores: set[str] = set()


class LoggedModelUnsupportedWarning(UserWarning):
    """The tracking store keeps no LoggedModels; the run is logged without one."""


def model_identity_fields(
    identity: ArmIdentity, *, extra: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What the evaluated model is: the fields its identity digest covers.

    Decoding length and batch size are left out: they are run settings, not
    the model. The backend, the parser version (which names the output
    format's decoder) and the prompt format are in: two of those evaluate
    differently even with the same weights.

    Args:
        identity: The arm's report identity.
        extra: More fields that tell models apart (a checkpoint's run and step).
    """
    fields: dict[str, Any] = {
        "model_identity": identity.model_identity.to_dict(),
        "adapter": identity.adapter.to_dict() if identity.adapter is not None else None,
        "backend": identity.decoding.backend,
        "parser_version": identity.parser_version,
        "prompt_format": identity.prompt_format,
    }
    if extra:
        fields["extra"] = dict(extra)
    return fields


def identity_sha256(fields: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``fields`` (the identity tag's value)."""
    return hashlib.sha256(canonical_json(dict(fields)).encode("utf-8")).hexdigest()


#: MLflow's LoggedModel ids: ``m-`` and 32 hex digits (run ids have no prefix).
_MODEL_ID: Final = re.compile(r"m-[0-9a-f]{32}")


def is_logged_model_id(value: str) -> bool:
    """Whether an arm is given as a LoggedModel id (a checkpoint) rather than a run id."""
    return bool(_MODEL_ID.fullmatch(value))


def checkpoint_report_path(step: int) -> str:
    """Where ``SommelierCallback`` logs a checkpoint's report in the training run."""
    return f"sommelier/checkpoints/step-{step}/evaluation_report.json"


def _name_part(source: str) -> str:
    tail = source.rstrip("/").rsplit("/", 1)[-1] if "/" in source else source
    return _BAD_NAME_CHARS.sub("-", tail).strip("-") or "model"


def logged_model_name(identity: ArmIdentity, *, suffix: str | None = None) -> str:
    """A readable name MLflow accepts: ``<base>`` or ``<base>+<adapter>`` (no ``/ : . %``).

    The name is for people scanning the Models tab; the identity is in the tags.
    """
    name = _name_part(identity.model_identity.base_model)
    if identity.adapter is not None:
        name += "+" + _name_part(identity.adapter.source)
    if suffix:
        name += "-" + _BAD_NAME_CHARS.sub("-", suffix)
    return name


def _model_tags(identity: ArmIdentity, digest: str, extra: Mapping[str, str]) -> dict[str, str]:
    model = identity.model_identity
    tags = {
        TAG_IDENTITY_SHA256: digest,
        "sommelier.model_kind": identity.model_kind,
        "sommelier.base_model": model.base_model,
        "sommelier.base_revision": model.base_revision or "",
        "sommelier.tokenizer": model.tokenizer,
        "sommelier.tokenizer_revision": model.tokenizer_revision or "",
        "sommelier.parser_version": identity.parser_version,
        "sommelier.prompt_format": identity.prompt_format,
        "sommelier.backend": identity.decoding.backend or "",
    }
    if identity.adapter is not None:
        tags["sommelier.adapter_source"] = identity.adapter.source
        tags["sommelier.adapter_sha256"] = identity.adapter.sha256
    tags.update(extra)
    return {key: store_text(redact(value)) for key, value in tags.items() if value != ""}


def _unsupported(exc: BaseException) -> bool:
    """Whether ``exc`` says the store has no LoggedModels at all (not that it failed)."""
    # A store plugin without the methods; an MLflow without the call (ImportError, AttributeError).
    if isinstance(exc, (NotImplementedError, AttributeError, ImportError)):
        return True
    code = getattr(exc, "error_code", None)
    if code in _UNSUPPORTED_CODES:
        return True
    message = str(exc)
    return "404" in message and "logged-models" in message


def _warn_unsupported(tracker: MlflowClient, exc: BaseException) -> None:
    uri = redact(str(getattr(tracker, "tracking_uri", None) or "<default tracking store>"))
    if uri in _warned_stores:
        return
    _warned_stores.add(uri)
    warnings.warn(
        f"the tracking store {uri} does not support MLflow LoggedModels "
        f"({type(exc).__name__}); runs are logged as before, without a model in the "
        "experiment's Models tab. Use a database-backed store or an MLflow 3 server "
        "to see the models",
        LoggedModelUnsupportedWarning,
        stacklevel=3,
    )


def _search(tracker: MlflowClient, experiment_id: str, digest: str) -> list[Any]:
    found = tracker.search_logged_models(
        experiment_ids=[experiment_id],
        filter_string=f"tags.`{TAG_IDENTITY_SHA256}` = '{digest}'",
        max_results=50,
    )
    return sorted(found, key=lambda model: (int(model.creation_timestamp), str(model.model_id)))


def _create(
    tracker: MlflowClient,
    experiment_id: str,
    *,
    name: str,
    tags: Mapping[str, str],
    source_run_id: str | None,
) -> str:
    """Create an external LoggedModel (weights stay where they are), READY at once.

    Like ``mlflow.create_external_model``, but through ``tracker`` so the
    caller's store is used: the model is tagged external and gets MLflow's
    placeholder ``MLmodel`` so that it can be registered.
    """
    import tempfile

    from mlflow.entities import LoggedModelStatus
    from mlflow.models.model import MLMODEL_FILE_NAME
    from mlflow.models.utils import get_external_mlflow_model_spec
    from mlflow.utils.mlflow_tags import MLFLOW_MODEL_IS_EXTERNAL

    model = tracker.create_logged_model(
        experiment_id=experiment_id,
        name=name,
        source_run_id=source_run_id,
        tags={**tags, MLFLOW_MODEL_IS_EXTERNAL: "true"},
        model_type=MODEL_TYPE,
    )
    with tempfile.TemporaryDirectory(prefix="sommelier-model-") as tmp:
        get_external_mlflow_model_spec(model).save(str(Path(tmp) / MLMODEL_FILE_NAME))
        tracker.log_model_artifacts(model.model_id, tmp)
    tracker.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    return str(model.model_id)


def _settled(tracker: MlflowClient, experiment_id: str, digest: str) -> str:
    """The oldest model of ``digest`` once three looks in a row agree on it.

    Creators racing on one identity all keep the oldest model and delete their
    own. A busy store can commit a creator's model (stamped earlier) after
    another process looked, so one look is not enough: the choice stands once
    it held for :data:`_SETTLE_AGREEING` looks :data:`_SETTLE_SECONDS` apart.
    """
    kept, agreeing = "", 0
    for _ in range(_SETTLE_LOOKS):
        time.sleep(_SETTLE_SECONDS)
        oldest = str(_search(tracker, experiment_id, digest)[0].model_id)
        agreeing = agreeing + 1 if oldest == kept else 1
        kept = oldest
        if agreeing == _SETTLE_AGREEING:
            break
    return kept


def find_or_create_model(
    identity: ArmIdentity,
    *,
    experiment_id: str,
    source_run_id: str | None,
    client: MlflowClient,
    extra: Mapping[str, str] | None = None,
    name_suffix: str | None = None,
) -> str | None:
    """The id of the LoggedModel of ``identity`` in ``experiment_id``, created if missing.

    Args:
        identity: The arm's report identity.
        experiment_id: The experiment the arm's run is in (models are per experiment).
        source_run_id: The run that first evaluated it (recorded on a new model).
        client: Tracking client.
        extra: Fields that tell apart models of one identity (a checkpoint's
            training run and step); part of the digest and tagged.
        name_suffix: Appended to the readable name (``step-40``).

    Returns:
        The model id, or ``None`` when the store has no LoggedModels (warned once).

    Raises:
        TrackingError: The store is unreachable (exit 3).
    """
    extra_tags = dict(extra or {})
    digest = identity_sha256(model_identity_fields(identity, extra=extra_tags))
    try:
        with tracking_errors("find or create the evaluated model's LoggedModel"):
            try:
                existing = _search(client, experiment_id, digest)
                if existing:
                    oldest = existing[0]
                    # A model a few seconds old may still lose to an older one that its
                    # creator has not seen yet, and be deleted: wait for the race to settle.
                    young = time.time() - int(oldest.creation_timestamp) / 1000 < _YOUNG_SECONDS
                    if young:
                        return _settled(client, experiment_id, digest)
                    return str(oldest.model_id)
                mine = _create(
                    client,
                    experiment_id,
                    name=logged_model_name(identity, suffix=name_suffix),
                    tags=_model_tags(identity, digest, extra_tags),
                    source_run_id=source_run_id,
                )
                # Another process may have created the same identity meanwhile:
                # all of them keep the oldest, the others delete their own.
                kept = _settled(client, experiment_id, digest)
                if kept != mine:
                    client.delete_logged_model(mine)
                return kept
            except Exception as exc:
                if _unsupported(exc):
                    _warn_unsupported(client, exc)
                    return None
                raise
    except Exception as exc:
        # tracking_errors wraps; an unsupported store may surface wrapped as well.
        cause = exc.__cause__
        if cause is not None and _unsupported(cause):
            _warn_unsupported(client, cause)
            return None
        raise


def log_checkpoint_model(
    identity: ArmIdentity,
    metrics: Mapping[str, float],
    *,
    run_id: str,
    step: int,
    client: MlflowClient | None = None,
) -> str | None:
    """Log one training checkpoint's metrics on its own LoggedModel, at ``step``.

    The model is the checkpoint of this training run at this step (both tagged
    and part of its identity), recorded as an output of the training run at
    that step, so the run's page and the Models tab list the checkpoints with
    their tool-call metrics, ready for ``search_logged_models`` to rank. A store
    without LoggedModels gets the run metrics alone (one warning).

    Returns:
        The checkpoint's model id, ``None`` without LoggedModel support.
    """
    from mlflow.entities import LoggedModelOutput

    from sommelier_mlflow.integration._primitives import read_active_run, resolve_client

    tracker = resolve_client(client)
    experiment_id = str(read_active_run(run_id, client=tracker).info.experiment_id)
    model_id = find_or_create_model(
        identity,
        experiment_id=experiment_id,
        source_run_id=run_id,
        client=tracker,
        extra={TAG_TRAINING_RUN_ID: run_id, TAG_CHECKPOINT_STEP: str(step)},
        # An adapter's source already names its step (``training:step-<n>``); the base's not.
        name_suffix=f"step-{step}" if identity.adapter is None else None,
    )
    log_metrics_batch(run_id, metrics, client=tracker, step=step, model_id=model_id)
    if model_id is not None:
        with tracking_errors("link the checkpoint's model to the training run"):
            tracker.log_outputs(run_id, [LoggedModelOutput(model_id=model_id, step=step)])
    return model_id


def download_checkpoint_report(model_id: str, dest: Path) -> Path:
    """Fetch the report of a checkpoint's LoggedModel from its training run into ``dest``.

    The report is the one ``SommelierCallback`` logged at the model's step;
    its overall values are held to the metrics on the model, so a report
    replaced after logging is refused.

    Raises:
        DataError: The model is not a checkpoint of a training run (exit 2).
        InvariantViolationError: The report's values differ from the model's (exit 5).
        TrackingError: The store is unreachable (exit 3).
    """
    import mlflow

    from sommelier_mlflow.errors import DataError, InvariantViolationError
    from sommelier_mlflow.evaluation import read_evaluation_report

    dest.mkdir(parents=True, exist_ok=True)
    with tracking_errors(f"fetch the report of checkpoint model {model_id}"):
        model = mlflow.MlflowClient().get_logged_model(model_id)
        run_id, step = model.tags.get(TAG_TRAINING_RUN_ID), model.tags.get(TAG_CHECKPOINT_STEP)
        if not run_id or step is None:
            raise DataError(
                f"LoggedModel {model_id} is not a checkpoint evaluated by SommelierCallback "
                f"(no {TAG_TRAINING_RUN_ID} / {TAG_CHECKPOINT_STEP} tags); pass arm run ids"
            )
        local = Path(
            mlflow.artifacts.download_artifacts(
                run_id=run_id, artifact_path=checkpoint_report_path(int(step)), dst_path=str(dest)
            )
        )
    report = read_evaluation_report(local)
    logged = {metric.key: metric.value for metric in model.metrics or []}
    for name, value in report.metrics.items():
        on_model = logged.get(f"tooleval/overall/{name}")
        if on_model is not None and abs(float(on_model) - value.value) > 1e-12:
            raise InvariantViolationError(
                f"checkpoint model {model_id}: its report says overall {name} = {value.value}, "
                f"but the model carries {on_model}; the report artifact is not its own"
            )
    return local
