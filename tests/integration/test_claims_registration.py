"""Preregistration runs and verdict tags in a real SQLite tracking store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError
from sommelier_mlflow.evaluation import compare_reports, read_claims
from sommelier_mlflow.integration import (
    CLAIMS_ARTIFACT,
    TAG_CLAIMS_SHA256,
    TAG_VERDICT,
    check_registration,
    find_registration,
    log_comparison_run,
    register_claims,
)
from tests.integration.integration_helpers import Arms, Store

CLAIMS: dict[str, Any] = {
    "schema_version": "sommelier_mlflow.claims.v1",
    "claims": [
        {
            "id": "fr-gain",
            "slice": "fr",
            "metric": "full_call_exact_match",
            "kind": "superiority",
            "margin": 0.0,
        },
        {
            "id": "overall-huge",
            "slice": "overall",
            "metric": "valid_json_rate",
            "kind": "superiority",
            "margin": 0.9,
        },
    ],
}


def _client(store: Store) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(store.uri)


def _claims_file(tmp_path: Path, name: str, **changes: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({**CLAIMS, **changes}, indent=1), encoding="utf-8")
    return path


def _run(store: Store, name: str, start_time: int) -> str:
    run = _client(store).create_run(store.experiment_id, run_name=name, start_time=start_time)
    return str(run.info.run_id)


def test_register_logs_the_exact_bytes_and_the_digest(store: Store, tmp_path: Path) -> None:
    path = _claims_file(tmp_path, "claims.json")
    run_id = _run(store, "register", 1_000)
    spec = register_claims(path, run_id=run_id, client=_client(store))
    run = _client(store).get_run(run_id)
    assert run.data.tags[TAG_CLAIMS_SHA256] == spec.sha256
    assert run.data.tags["sommelier.model_kind"] == "claims"
    local = _client(store).download_artifacts(run_id, CLAIMS_ARTIFACT, str(tmp_path / "dl"))
    assert Path(local).read_bytes() == path.read_bytes()
    found = find_registration(spec.sha256, experiment_ids=[store.experiment_id])
    assert found is not None and found.run_id == run_id and found.registered_at_ms == 1_000


def test_a_credential_in_the_claims_file_is_refused(store: Store, tmp_path: Path) -> None:
    path = _claims_file(tmp_path, "leaky.json")
    document = json.loads(path.read_text())
    document["claims"][0]["id"] = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="credential"):
        register_claims(path, run_id=_run(store, "leak", 1_500), client=_client(store))


def test_registration_order_against_the_arms(store: Store, tmp_path: Path) -> None:
    path = _claims_file(tmp_path, "ordered.json", alpha=0.04)
    spec = read_claims(path)
    register_claims(path, run_id=_run(store, "register", 5_000), client=_client(store))
    early_arms = [_run(store, "base", 4_000), _run(store, "adapter", 4_100)]
    late_arms = [_run(store, "base", 6_000), _run(store, "adapter", 6_100)]
    before = check_registration(spec, experiment_ids=[store.experiment_id], arm_run_ids=late_arms)
    assert before.registered is True
    assert before.registered_at_ms == 5_000
    assert before.arms_started_at_ms == 6_000
    assert before.registered_before_arms is True
    after = check_registration(spec, experiment_ids=[store.experiment_id], arm_run_ids=early_arms)
    assert after.registered_before_arms is False


def test_require_registered_refuses_another_digest(store: Store, tmp_path: Path) -> None:
    registered = _claims_file(tmp_path, "registered.json", alpha=0.03)
    register_claims(registered, run_id=_run(store, "register", 7_000), client=_client(store))
    edited = _claims_file(tmp_path, "edited.json", alpha=0.2)  # loosened after the fact
    spec = read_claims(edited)
    unchecked = check_registration(spec, experiment_ids=[store.experiment_id])
    assert unchecked.registered is False
    with pytest.raises(ComparisonRefusedError) as caught:
        check_registration(spec, experiment_ids=[store.experiment_id], require=True)
    assert caught.value.exit_code == 4
    assert caught.value.field == "claims.sha256"
    assert read_claims(registered).sha256[:12] in str(caught.value)


def test_comparison_run_gets_verdict_tags_and_is_no_registration(
    store: Store, arms: Arms, tmp_path: Path
) -> None:
    spec = read_claims(_claims_file(tmp_path, "tags.json", alpha=0.01))
    report = compare_reports(arms.base_typed, arms.adapter_typed, resamples=300, claims=spec)
    run_id = _run(store, "comparison", 9_000)
    log_comparison_run(report, run_id=run_id, figure=False, client=_client(store))
    tags = _client(store).get_run(run_id).data.tags
    assert report.claims is not None
    decisions = {d.claim.id: d.decision for d in report.claims.decisions}
    assert decisions["overall-huge"] == "not_supported"
    assert tags[TAG_VERDICT] == "not_supported"
    for claim_id, decision in decisions.items():
        assert tags[f"sommelier.claim.{claim_id}"] == decision
    assert tags[TAG_CLAIMS_SHA256] == spec.sha256
    # The comparison carries the digest it decided, but it is not a preregistration.
    assert find_registration(spec.sha256, experiment_ids=[store.experiment_id]) is None


def test_a_comparison_run_whose_artifacts_fail_to_log_carries_no_verdict(
    store: Store, arms: Arms, tmp_path: Path
) -> None:
    """The verdict tags are written last, so a run cut short is not found as 'supported'.

    Its experiment stores artifacts below a file (as a full or read-only artifact
    store would refuse them): logging fails after the tags and params, before the verdict.
    """
    client = _client(store)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact store should be")
    experiment = client.create_experiment("broken-artifacts", artifact_location=str(blocker))
    spec = read_claims(_claims_file(tmp_path, "tags.json", alpha=0.01))
    report = compare_reports(arms.base_typed, arms.adapter_typed, resamples=300, claims=spec)
    run_id = str(client.create_run(experiment).info.run_id)
    with pytest.raises(Exception, match="not-a-folder"):
        log_comparison_run(report, run_id=run_id, figure=False, client=client)
    tags = client.get_run(run_id).data.tags
    assert tags["sommelier.model_kind"] == "comparison"  # it got that far
    assert TAG_VERDICT not in tags and TAG_CLAIMS_SHA256 not in tags
    assert not [key for key in tags if key.startswith("sommelier.claim.")]
