"""Models from a real Model Registry (SQLite store): evaluate by alias, promote by verdict.

A tiny PEFT model is logged and registered with ``mlflow.transformers.log_model``
exactly as a user would; ``evaluate --adapter models:/tools-lora@candidate``
resolves the alias, loads the version's ``peft/`` folder onto the base its
flavor names, and ``compare --promote champion`` moves the alias only on a
supported verdict.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import write_test_split
from sommelier_mlflow.generation import adapter_digest
from tests.generation.generation_helpers import corpus, make_examples
from tests.support.tiny_models import build_lora_adapter, build_tiny_llama, build_tokenizer

NAME = "tools-lora"
RESAMPLES = "200"


def _claims(path: Path, kind: str, margin: float) -> Path:
    claim = {"id": "overall-json", "slice": "overall", "metric": "valid_json_rate"}
    document = {
        "schema_version": "sommelier_mlflow.claims.v1",
        "seed": 0,
        "resamples": int(RESAMPLES),
        "claims": [{**claim, "kind": kind, "margin": margin}],
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A SQLite store holding version 1 of ``tools-lora`` (a PEFT model) at alias ``candidate``."""
    import mlflow
    import torch
    from mlflow.tracking import MlflowClient
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("registry")
    tokenizer = build_tokenizer(root / "tokenizer", corpus())
    model_dir = build_tiny_llama(root / "model", tokenizer, seed=0)
    tokenizer.save_pretrained(model_dir)
    adapter_dir = build_lora_adapter(model_dir, root / "adapter", seed=1)
    split = write_test_split(root / "test.jsonl", make_examples(tokenizer, 3))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        with warnings.catch_warnings():
            # Logging a model goes through peft/transformers/MLflow code paths that warn about
            # their own deprecations (not this package's); the fixture only sets the stage.
            for category in (FutureWarning, DeprecationWarning, UserWarning):
                warnings.simplefilter("ignore", category)
            base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
            peft_model = PeftModel.from_pretrained(base, str(adapter_dir))
            # Its own experiment, explicitly: an experiment another test left active in
            # MLflow's process-wide state belongs to another store.
            experiment_id = MlflowClient(uri).create_experiment("registry-fixture")
            with mlflow.start_run(experiment_id=experiment_id) as run:
                mlflow.transformers.log_model(
                    transformers_model={"model": peft_model, "tokenizer": tokenizer},
                    name="model",
                    task="text-generation",
                    registered_model_name=NAME,
                    # Stated, not inferred: MLflow's inference wants torchvision for torch models.
                    pip_requirements=["torch", "transformers", "peft"],
                )
            MlflowClient().set_registered_model_alias(NAME, "candidate", "1")
    finally:
        mlflow.set_tracking_uri(previous)  # None unsets it again
    return {
        "uri": uri,
        "split": split,
        "model_dir": model_dir,
        "adapter_sha256": adapter_digest(adapter_dir),
        "logged_run": run.info.run_id,
    }


@pytest.fixture
def tracking(registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registry["uri"])
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    return str(registry["uri"])


def _evaluate(registry: dict[str, Any], out: Path, *model: str) -> str:
    from mlflow.tracking import MlflowClient

    args = ["evaluate", "--test-split", str(registry["split"]), *model, "--out", str(out)]
    args += ["--max-new-tokens", "8", "--batch-size", "4", "--resamples", RESAMPLES, "--mlflow"]
    assert main(args) == 0
    client = MlflowClient()
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return str(runs[0].info.run_id)


@pytest.fixture(scope="module")
def arm_runs(registry: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The base (by the version's flavor) and the adapter (by alias), logged as arm runs.

    ``adapter_out`` is the adapter arm's output folder (its generations, for ``score``).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", registry["uri"])
        patch.delenv("MLFLOW_RUN_ID", raising=False)
        out = tmp_path_factory.mktemp("arms")
        base = _evaluate(
            registry, out / "base", "--model", f"models:/{NAME}@candidate", "--model-kind", "base"
        )
        adapter = _evaluate(
            registry,
            out / "adapter",
            "--adapter",
            f"models:/{NAME}@candidate",
            "--model-kind",
            "adapter",
        )
    return {"base": base, "adapter": adapter, "adapter_out": str(out / "adapter")}


def test_an_adapter_evaluated_by_alias_records_its_registry_identity(
    tracking: str, registry: dict[str, Any], arm_runs: dict[str, str]
) -> None:
    from mlflow.tracking import MlflowClient

    run = MlflowClient().get_run(arm_runs["adapter"])
    tags = run.data.tags
    assert tags["sommelier.registry.adapter.name"] == NAME
    assert tags["sommelier.registry.adapter.version"] == "1"  # the alias, resolved
    assert tags["sommelier.registry.adapter.source_run_id"] == registry["logged_run"]
    assert tags["sommelier.registry.adapter.adapter_sha256"] == registry["adapter_sha256"]
    report = json.loads(
        Path(
            __import__("mlflow").artifacts.download_artifacts(
                run_id=arm_runs["adapter"], artifact_path="sommelier/evaluation_report.json"
            )
        ).read_text()
    )
    assert report["identity"]["adapter"]["sha256"] == registry["adapter_sha256"]
    assert report["identity"]["model_identity"]["base_model"] == str(registry["model_dir"])
    # The arm's metrics join the LoggedModel the version was registered from (MLflow 3),
    # rather than a new external model of the same adapter.
    client = MlflowClient()
    version_model = client.get_model_version(NAME, "1").source.removeprefix("models:/")
    assert version_model and tags["sommelier.registry.adapter.model_id"] == version_model
    assert tags["sommelier.logged_model_id"] == version_model
    linked = client.get_logged_model(version_model).metrics
    assert arm_runs["adapter"] in {m.run_id for m in linked}
    assert {m.key for m in linked} >= {"overall/valid_json_rate"}
    # The base arm (the base that version names) is the base's own external model.
    base_model = client.get_run(arm_runs["base"]).data.tags["sommelier.logged_model_id"]
    assert base_model != version_model
    assert client.get_logged_model(base_model).tags["mlflow.model.isExternal"] == "true"


def _registry_tags(run_id: str) -> dict[str, str]:
    from mlflow.tracking import MlflowClient

    tags = MlflowClient().get_run(run_id).data.tags
    return {key: value for key, value in tags.items() if key.startswith("sommelier.registry.")}


def test_main_tags_each_child_run_with_the_registry_versions_it_ran(
    tracking: str, registry: dict[str, Any], tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"models:/{NAME}@candidate"
    args = ["main", "--test-split", str(registry["split"]), "--model", f"models:/{NAME}/1"]
    args += ["--adapter", uri, "--out", str(tmp_path / "main"), "--max-new-tokens", "8"]
    args += ["--batch-size", "4", "--resamples", RESAMPLES, "--log-traces", "false"]
    assert main([*args, "--mlflow"]) == 0
    client = MlflowClient()
    # main's two child runs (the module's evaluate runs named the model by alias, not /1).
    found = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string=f"tags.`sommelier.registry.model.uri` = 'models:/{NAME}/1'",
    )
    assert len({run.data.tags["mlflow.parentRunId"] for run in found}) == 1
    children = {run.info.run_name: run.info.run_id for run in found}
    model_tags = {
        "sommelier.registry.model.uri": f"models:/{NAME}/1",
        "sommelier.registry.model.name": NAME,
        "sommelier.registry.model.version": "1",
        "sommelier.registry.model.source_run_id": registry["logged_run"],
        "sommelier.registry.model.adapter_sha256": registry["adapter_sha256"],
    }
    # The base arm ran the version's base only: it carries no adapter identity, and no
    # LoggedModel of the version (that model is base + adapter, not what it evaluated).
    assert _registry_tags(children["base"]) == model_tags
    assert (
        _registry_tags(children["adapter"])
        == {
            **model_tags,
            "sommelier.registry.adapter.uri": uri,
            "sommelier.registry.adapter.name": NAME,
            "sommelier.registry.adapter.version": "1",  # the alias, resolved
            "sommelier.registry.adapter.source_run_id": registry["logged_run"],
            "sommelier.registry.adapter.adapter_sha256": registry["adapter_sha256"],
            # The LoggedModel the version was registered from: the adapter arm's metrics join it.
            "sommelier.registry.adapter.model_id": client.get_model_version(NAME, "1").source[8:],
        }
    )


def test_score_takes_a_registry_adapter_as_evaluate_does(
    tracking: str, registry: dict[str, Any], arm_runs: dict[str, str], tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    generations = Path(arm_runs["adapter_out"]) / "generations"
    uri = f"models:/{NAME}@candidate"
    args = ["score", "--test-split", str(registry["split"]), "--generations", str(generations)]
    args += ["--adapter", uri, "--model-kind", "adapter", "--out", str(tmp_path / "score")]
    assert main([*args, "--resamples", RESAMPLES, "--mlflow"]) == 0
    client = MlflowClient()
    scored = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )[0]
    # The same registry identity, and the same report identity, as the evaluate run.
    assert _registry_tags(scored.info.run_id) == _registry_tags(arm_runs["adapter"])
    report = json.loads((tmp_path / "score" / "evaluation_report.json").read_text())
    assert report["identity"]["adapter"]["sha256"] == registry["adapter_sha256"]
    assert report["identity"]["model_identity"]["base_model"] == str(registry["model_dir"])
    # Re-scored, its metrics join the same registry LoggedModel as the evaluate run's.
    version_model = client.get_model_version(NAME, "1").source.removeprefix("models:/")
    assert scored.data.tags["sommelier.logged_model_id"] == version_model
    linked = {m.run_id for m in client.get_logged_model(version_model).metrics}
    assert {scored.info.run_id, arm_runs["adapter"]} <= linked


def _compare(arm_runs: dict[str, str], out: Path, *extra: str) -> int:
    args = ["compare", "--base-run-id", arm_runs["base"], "--adapter-run-id", arm_runs["adapter"]]
    return main([*args, "--out", str(out), "--resamples", RESAMPLES, "--mlflow", *extra])


def test_promotion_sets_the_alias_only_on_a_supported_verdict(
    tracking: str,
    arm_runs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    refuted = _claims(tmp_path / "leap.json", "superiority", 0.99)
    code = _compare(
        arm_runs,
        tmp_path / "no",
        "--claims",
        str(refuted),
        "--promote",
        "champion",
        "--fail-on-unsupported",
    )
    assert code == 6
    with pytest.raises(Exception, match="champion"):
        client.get_model_version_by_alias(NAME, "champion")
    assert "sommelier.verdict" not in client.get_model_version(NAME, "1").tags

    holds = _claims(tmp_path / "holds.json", "non_inferiority", 0.99)
    assert (
        _compare(arm_runs, tmp_path / "yes", "--claims", str(holds), "--promote", "champion") == 0
    )
    version = client.get_model_version_by_alias(NAME, "champion")
    assert str(version.version) == "1"
    assert version.tags["sommelier.verdict"] == "supported"
    comparison = client.get_run(version.tags["sommelier.comparison_run_id"])
    assert (
        comparison.data.tags["sommelier.claims_sha256"] == version.tags["sommelier.claims_sha256"]
    )
    # The version leads to the LoggedModel of the evaluation that justified it.
    evaluated = client.get_run(arm_runs["adapter"]).data.tags["sommelier.logged_model_id"]
    assert version.tags["sommelier.evaluated_model_id"] == evaluated
    assert comparison.data.tags["sommelier.adapter_model_id"] == evaluated
    # `show` on the version prints its verdict and the evaluated model's metrics.
    capsys.readouterr()
    assert main(["show", f"models:/{NAME}@champion"]) == 0
    shown = capsys.readouterr().out
    assert f"models:/{NAME}@champion: version 1 of {NAME}" in shown
    assert "sommelier.verdict: supported" in shown
    assert f"LoggedModel {evaluated}" in shown
    adapter_run = client.get_run(arm_runs["adapter"]).data.metrics
    valid = adapter_run["overall/valid_json_rate"]
    numerator = int(adapter_run["overall/counts/valid_json_rate.numerator"])
    denominator = int(adapter_run["overall/counts/valid_json_rate.denominator"])
    expected = f"overall/valid_json_rate {valid:.3f} {numerator}/{denominator}"
    assert expected in {" ".join(line.split()) for line in shown.splitlines()}
    # And on the LoggedModel itself, by id.
    assert main(["show", evaluated]) == 0
    assert capsys.readouterr().out.startswith(f"LoggedModel {evaluated}")


def test_bad_registry_input_exits_with_the_documented_codes(
    tracking: str,
    registry: dict[str, Any],
    arm_runs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    split = str(registry["split"])
    for command, uri in (
        ("evaluate", f"models:/{NAME}@nowhere"),
        ("evaluate", "models:/no-such-model/3"),
        ("score", f"models:/{NAME}/7"),
    ):
        args = [command, "--test-split", split, "--adapter", uri, "--model-kind", "adapter"]
        if command == "score":
            args += ["--generations", str(tmp_path)]
        assert main([*args, "--out", str(tmp_path / "x")]) == 3
        err = capsys.readouterr().err
        # The URI, the store it was looked up in, and what to check.
        assert uri in err and f"Model Registry at {registry['uri']}" in err
        assert "MLFLOW_TRACKING_URI" in err
    # A registry store behind credentials is named without them.
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", "http://alice:s3cret@127.0.0.1:9")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    args = ["evaluate", "--test-split", split, "--adapter", f"models:/{NAME}/1"]
    assert main([*args, "--model-kind", "adapter", "--out", str(tmp_path / "x")]) == 3
    err = capsys.readouterr().err
    assert "http://**********@127.0.0.1:9" in err and "s3cret" not in err
    monkeypatch.delenv("MLFLOW_REGISTRY_URI")
    # --promote without claims, or on an arm not from the registry: exit 2, nothing computed.
    assert _compare(arm_runs, tmp_path / "c1", "--promote", "champion") == 2
    assert "--claims" in capsys.readouterr().err
    holds = _claims(tmp_path / "holds.json", "non_inferiority", 0.99)
    swapped = {"base": arm_runs["base"], "adapter": arm_runs["base"]}
    assert _compare(swapped, tmp_path / "c2", "--claims", str(holds), "--promote", "x") == 2
    assert "Model Registry" in capsys.readouterr().err
    assert not (tmp_path / "c1").exists() and not (tmp_path / "c2").exists()


def _comparison_runs() -> list[Any]:
    """Every comparison run in the store, as the MLflow UI's runs list would find them."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    return list(
        client.search_runs(
            [e.experiment_id for e in client.search_experiments()],
            filter_string="tags.`sommelier.model_kind` = 'comparison'",
        )
    )


def _arm_of_version(arm_runs: dict[str, str], version: str) -> dict[str, str]:
    """The module's arms, the adapter arm's report re-logged by a run naming ``version``.

    As if that version had been evaluated and then deleted from the registry
    (or, for a version that exists, deleted later): the run is an ordinary
    adapter arm otherwise.
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    experiment = client.get_run(arm_runs["adapter"]).info.experiment_id
    report = mlflow.artifacts.download_artifacts(
        run_id=arm_runs["adapter"], artifact_path="sommelier/evaluation_report.json"
    )
    run = client.create_run(experiment, run_name=f"adapter v{version}")
    run_id = run.info.run_id
    for key, value in (
        ("sommelier.model_kind", "adapter"),
        ("sommelier.registry.adapter.name", NAME),
        ("sommelier.registry.adapter.version", version),
    ):
        client.set_tag(run_id, key, value)
    client.log_artifact(run_id, report, "sommelier")
    client.set_terminated(run_id)
    return {"base": arm_runs["base"], "adapter": run_id}


@pytest.mark.parametrize("alias", [" ", "cham/pion", "latest", "V2", "x" * 300])
def test_promote_refuses_an_alias_the_registry_would_refuse_before_anything_is_logged(
    tracking: str,
    arm_runs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    alias: str,
) -> None:
    holds = _claims(tmp_path / "holds.json", "non_inferiority", 0.99)
    before = len(_comparison_runs())
    assert _compare(arm_runs, tmp_path / "c", "--claims", str(holds), "--promote", alias) == 2
    err = capsys.readouterr().err
    assert "alias" in err and "Traceback" not in err
    assert len(_comparison_runs()) == before  # no comparison run, let alone a 'supported' one
    assert not (tmp_path / "c").exists()  # nothing computed


def test_promote_refuses_a_missing_or_unreachable_version_before_anything_is_logged(
    tracking: str,
    arm_runs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holds = _claims(tmp_path / "holds.json", "non_inferiority", 0.99)
    before = len(_comparison_runs())
    gone = _arm_of_version(arm_runs, "7")  # version 7 does not exist (any more)
    assert _compare(gone, tmp_path / "c1", "--claims", str(holds), "--promote", "champion") == 3
    err = capsys.readouterr().err
    assert f"models:/{NAME}/7 does not resolve in the Model Registry" in err
    # A registry store that cannot be reached is found out as early.
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", "http://127.0.0.1:9")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    assert _compare(arm_runs, tmp_path / "c2", "--claims", str(holds), "--promote", "x") == 3
    assert "127.0.0.1:9" in capsys.readouterr().err
    assert len(_comparison_runs()) == before
    assert not (tmp_path / "c1").exists() and not (tmp_path / "c2").exists()


def test_a_comparison_whose_promotion_fails_is_not_tagged_supported(
    tracking: str,
    arm_runs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Version 2 exists when compare checks it and is deleted while the comparison computes.

    The promotion then fails in the registry: the comparison run ends FAILED and
    carries no verdict, so the documented filter for supported comparisons does not
    find it.
    """
    from mlflow.tracking import MlflowClient

    import sommelier_mlflow.cli._claims as claims_module

    client = MlflowClient()
    first = client.get_model_version(NAME, "1")
    second = client.create_model_version(NAME, first.source, run_id=first.run_id)
    arms = _arm_of_version(arm_runs, str(second.version))
    compute = claims_module.compare_arms

    def deleted_meanwhile(*args: Any, **kwargs: Any) -> Any:
        computed = compute(*args, **kwargs)
        client.delete_model_version(NAME, str(second.version))  # another user, meanwhile
        return computed

    monkeypatch.setattr(claims_module, "compare_arms", deleted_meanwhile)
    before = {run.info.run_id for run in _comparison_runs()}
    holds = _claims(tmp_path / "holds.json", "non_inferiority", 0.99)
    code = _compare(arms, tmp_path / "c", "--claims", str(holds), "--promote", "release")
    err = capsys.readouterr().err
    assert code in (2, 3), err
    assert "release" in err and "Traceback" not in err
    (comparison,) = [run for run in _comparison_runs() if run.info.run_id not in before]
    assert comparison.info.status == "FAILED"
    assert "sommelier.verdict" not in comparison.data.tags
    supported = client.search_runs(
        [comparison.info.experiment_id],
        filter_string="tags.`sommelier.verdict` = 'supported'",
    )
    assert comparison.info.run_id not in {run.info.run_id for run in supported}
    with pytest.raises(Exception, match="release"):
        client.get_model_version_by_alias(NAME, "release")
