"""Preregistration of claims in MLflow, and the verdict's tags on a comparison run.

A claim decided after the results are known proves little; the same claim
registered before the arms ran is evidence. MLflow already keeps trustworthy
timestamps for every run, so preregistration is simply a run that holds the
claims file byte for byte (``sommelier/claims.json``) and its SHA-256 as the
tag ``sommelier.claims_sha256``. At comparison time the digest of the claims
file is looked up among those runs and the registration's start time is set
against the start times of the two arms' runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sommelier_mlflow._redact import redact
from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError
from sommelier_mlflow.evaluation import ClaimsSpec, RegistrationRecord, Verdict, read_claims
from sommelier_mlflow.integration._primitives import (
    ARTIFACT_DIR,
    TAG_MODEL_KIND,
    client_uri,
    resolve_client,
    set_sommelier_tags,
)
from sommelier_mlflow.integration._store_errors import tracking_errors

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

__all__ = [
    "CLAIMS_ARTIFACT",
    "TAG_CLAIMS_SHA256",
    "TAG_VERDICT",
    "CLAIM_TAG_PREFIX",
    "ClaimsRegistration",
    "register_claims",
    "find_registration",
    "check_registration",
    "verdict_tags",
]

CLAIMS_ARTIFACT: Final = f"{ARTIFACT_DIR}/claims.json"
TAG_CLAIMS_SHA256: Final = "sommelier.claims_sha256"
TAG_VERDICT: Final = "sommelier.verdict"
CLAIM_TAG_PREFIX: Final = "sommelier.claim."
# A comparison run also carries the digest it decided; only registration runs
# (model kind ``claims``) count as preregistrations.
_REGISTRATIONS: Final = f"tags.`{TAG_MODEL_KIND}` = 'claims'"


@dataclass(frozen=True)
class ClaimsRegistration:
    """The earliest run that registered a claims digest.

    Attributes:
        run_id: The registration run.
        experiment_id: Its experiment.
        registered_at_ms: Its start time (milliseconds since the epoch, MLflow's clock).
    """

    run_id: str
    experiment_id: str
    registered_at_ms: int


def register_claims(
    path: str | os.PathLike[str], *, run_id: str, client: MlflowClient | None = None
) -> ClaimsSpec:
    """Validate a claims file and preregister it in ``run_id``.

    The file is logged unchanged (its digest must stay verifiable, so it is
    not rewritten or re-serialised) as ``sommelier/claims.json``, with the
    tags ``sommelier.claims_sha256`` and ``sommelier.model_kind`` = ``claims``.

    Raises:
        DataError: The claims file is invalid (exit 2).
        ConfigError: The file holds text that looks like a secret; a
            preregistration is meant to be shared, so it is refused (exit 2).
        TrackingError: The tracking store is unreachable (exit 3).
    """
    spec = read_claims(path)
    text = Path(path).read_text(encoding="utf-8")
    if redact(text) != text:
        raise ConfigError(
            f"{path}: the claims file contains text that looks like a credential; remove it "
            "(a claims file needs only ids, slices, metrics, kinds and margins)"
        )
    tracker = resolve_client(client)
    with tempfile.TemporaryDirectory(prefix="sommelier-claims-") as tmp:
        local = Path(tmp) / Path(CLAIMS_ARTIFACT).name
        shutil.copyfile(path, local)
        with tracking_errors("log the claims file", client_uri(tracker)):
            tracker.log_artifact(run_id, str(local), ARTIFACT_DIR)
    set_sommelier_tags(
        run_id, model_kind="claims", extra={TAG_CLAIMS_SHA256: spec.sha256}, client=tracker
    )
    return spec


def _search(tracker: MlflowClient, experiment_ids: Sequence[str], filter_string: str) -> list[Any]:
    with tracking_errors("search the claims registrations", client_uri(tracker)):
        return list(
            tracker.search_runs(
                list(experiment_ids),
                filter_string=filter_string,
                order_by=["attributes.start_time ASC"],
                max_results=1000,
            )
        )


def find_registration(
    sha256: str, *, experiment_ids: Iterable[str], client: MlflowClient | None = None
) -> ClaimsRegistration | None:
    """The earliest run in ``experiment_ids`` that registered ``sha256``, if any."""
    ids = sorted(set(experiment_ids))
    if not ids:
        return None
    tracker = resolve_client(client)
    runs = _search(tracker, ids, f"{_REGISTRATIONS} and tags.`{TAG_CLAIMS_SHA256}` = '{sha256}'")
    if not runs:
        return None
    first = min(runs, key=lambda run: (int(run.info.start_time), str(run.info.run_id)))
    return ClaimsRegistration(
        run_id=str(first.info.run_id),
        experiment_id=str(first.info.experiment_id),
        registered_at_ms=int(first.info.start_time),
    )


def _registered_digests(tracker: MlflowClient, experiment_ids: Sequence[str]) -> list[str]:
    runs = _search(tracker, experiment_ids, _REGISTRATIONS)
    return sorted({str(run.data.tags[TAG_CLAIMS_SHA256]) for run in runs})


def check_registration(
    spec: ClaimsSpec,
    *,
    experiment_ids: Iterable[str],
    arm_run_ids: Sequence[str] = (),
    require: bool = False,
    client: MlflowClient | None = None,
) -> RegistrationRecord:
    """Look up the claims' preregistration and describe it for the comparison report.

    Args:
        spec: The claims about to be decided.
        experiment_ids: Experiments to search for registration runs.
        arm_run_ids: The base and adapter runs, whose start times the
            registration must precede to count as preregistered.
        require: Refuse claims whose digest was never registered.
        client: Tracking client (default: a new one).

    Returns:
        The registration record of the report: whether the digest was
        registered, by which run and when, when the arms started, and
        whether the registration came first (``None`` when unknown).

    Raises:
        ComparisonRefusedError: ``require`` is set and no run registered this
            digest (exit 4); the message lists the digests that were.
    """
    tracker = resolve_client(client)
    ids = sorted(set(experiment_ids))
    found = find_registration(spec.sha256, experiment_ids=ids, client=tracker)
    if found is None and require:
        registered = _registered_digests(tracker, ids) if ids else []
        shown = ", ".join(digest[:12] for digest in registered) or "none"
        raise ComparisonRefusedError(
            f"refusing to decide claims: {spec.source} (sha256 {spec.sha256}) was never "
            f"registered in experiment(s) {ids} (registered digests: {shown}); register "
            "this exact file with `sommelier-mlflow claims register` before running the arms, "
            "or drop --require-registered",
            field="claims.sha256",
        )
    arms_started: int | None = None
    if arm_run_ids:
        with tracking_errors("read the arms' start times", client_uri(tracker)):
            arms_started = min(int(tracker.get_run(run).info.start_time) for run in arm_run_ids)
    before: bool | None = None
    if found is not None and arms_started is not None:
        before = found.registered_at_ms < arms_started
    elif found is None and arm_run_ids:
        before = False
    return RegistrationRecord(
        checked=True,
        registered=found is not None,
        run_id=found.run_id if found else None,
        registered_at_ms=found.registered_at_ms if found else None,
        arm_run_ids=tuple(arm_run_ids),
        arms_started_at_ms=arms_started,
        registered_before_arms=before,
    )


def verdict_tags(verdict: Verdict) -> dict[str, str]:
    """The verdict tags of a comparison run.

    ``sommelier.verdict`` is ``supported`` only when every claim is, and each
    claim gets ``sommelier.claim.<id>`` = its adjusted decision, so runs can
    be filtered in the MLflow UI (``tags.`sommelier.verdict` = 'supported'``).
    ``sommelier.claims_sha256`` names the claims file decided.
    """
    tags = {TAG_VERDICT: verdict.verdict, TAG_CLAIMS_SHA256: verdict.claims_sha256}
    for decision in verdict.decisions:
        tags[f"{CLAIM_TAG_PREFIX}{decision.claim.id}"] = decision.decision
    return tags
