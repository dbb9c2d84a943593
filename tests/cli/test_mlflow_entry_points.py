"""Every MLproject entry point through a real `mlflow run`, logged as the CLI path logs it.

Issue 23 #3: `mlflow run . -e evaluate` with its defaults failed (MLflow had
logged `num_threads=0`, the product logged the resolved `2` under the same
key) and its arms had no `generation/*` metrics, while the tests only covered
the CLI path. Each entry point here runs once through `mlflow run` with its
recipe and once as the same command line in a run the test creates (what
`--mlflow` does); both runs must hold the same product params, metrics, tags
and artifacts, and `mlflow run`'s run may add only its own parameters.

A recipe gives an entry point's required parameters and, to keep the test
cheap, only parameters that shrink the work or point at the fixture's files
(the demo's model and adapter paths are what `demo` stands for). Every other
parameter keeps its MLproject default. An entry point without a recipe fails
`test_every_entry_point_has_a_recipe`: add one when you add an entry point.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.mlflow_run import PROJECT, mlflow_run, mlproject_entry_points

#: Entry point -> parameters beyond the defaults, in run order (later ones use earlier runs).
RECIPES: dict[str, dict[str, str]] = {
    "prepare": {},
    "import_bfcl": {"data_dir": "{bfcl}"},
    "format": {"test_split": "{split}", "tokenizer": "{model}", "out": "{formatted_out}"},
    "register_claims": {"claims": "{claims}"},
    "evaluate": {"test_split": "{split}", "model": "{model}"},
    "score": {"test_split": "{formatted}", "generations": "{generations}"},
    "main": {"test_split": "{split}", "model": "{model}", "adapter": "{adapter}"},
    "compare": {"base_run_id": "{base_run}", "adapter_run_id": "{adapter_run}"},
}
#: What a recipe may set besides required parameters: sizes, the fixture's files and an
#: output that would otherwise land in the project folder.
SHRINKING = {"max_examples": "2", "resamples": "50"}
FIXTURE_FILES = {"model", "adapter", "generations", "test_split", "out", "adapter_run_id"}


def _bfcl_folder(folder: Path) -> Path:
    """The smallest BFCL v4 data folder: one question (and answer) per default category."""
    from sommelier_mlflow.data import BFCL_DEFAULT_CATEGORIES

    function = {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}},
    }
    (folder / "possible_answer").mkdir(parents=True)
    for category in BFCL_DEFAULT_CATEGORIES:
        question = {
            "id": f"{category}_0",
            "question": [[{"role": "user", "content": "Weather in Oslo?"}]],
            "function": [function],
        }
        (folder / f"BFCL_v4_{category}.json").write_text(json.dumps(question) + "\n")
        if category != "irrelevance":  # BFCL has no answer file for it
            answer = {"id": f"{category}_0", "ground_truth": [{"get_weather": {"city": ["Oslo"]}}]}
            (folder / "possible_answer" / f"BFCL_v4_{category}.json").write_text(
                json.dumps(answer) + "\n"
            )
    return folder


def _required(entry: Mapping[str, Any]) -> set[str]:
    return {
        name
        for name, spec in (entry.get("parameters") or {}).items()
        if not isinstance(spec, dict) or "default" not in spec
    }


def _recipe(name: str, entry: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, str]:
    declared = set(entry.get("parameters") or {})
    params = {key: value.format(**values) for key, value in RECIPES[name].items()}
    params.update({key: value for key, value in SHRINKING.items() if key in declared})
    return params


def test_every_entry_point_has_a_recipe() -> None:
    entries = mlproject_entry_points()
    missing = sorted(set(entries) - set(RECIPES))
    assert not missing, f"add a recipe to RECIPES for the entry point(s) {missing}"
    assert not set(RECIPES) - set(entries), "a recipe for an entry point that is gone"
    for name, entry in entries.items():
        given = set(RECIPES[name])
        assert _required(entry) <= given, (name, _required(entry) - given)
        assert given - _required(entry) <= FIXTURE_FILES, (name, given - _required(entry))


def _command_line(entry: Mapping[str, Any], params: Mapping[str, str]) -> list[str]:
    """The entry point's command with the values `mlflow run` would substitute."""
    values = {
        name: str(spec.get("default", "")) if isinstance(spec, dict) else ""
        for name, spec in (entry.get("parameters") or {}).items()
    }
    values.update(params)
    text = str(entry["command"])
    for name, value in values.items():
        text = text.replace("{" + name + "}", shlex.quote(value))
    return shlex.split(text)


def _cli_path(entry: Mapping[str, Any], params: Mapping[str, str], cwd: Path) -> str:
    """Run the command in-process, in a run this test creates (as `--mlflow` would)."""
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.cli import main as cli_main

    argv = _command_line(entry, params)
    client = MlflowClient()
    experiment = client.get_experiment_by_name("sommelier") or client.get_experiment(
        client.create_experiment("sommelier")
    )
    run_id = str(client.create_run(experiment.experiment_id).info.run_id)
    os.environ["MLFLOW_RUN_ID"] = run_id
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        if argv[:2] == ["python", "examples/demo/run.py"]:
            # run.py only swaps `demo` for paths; the recipes already pass paths.
            assert "demo" not in argv, argv
            code = cli_main(argv[2:])
        else:
            assert argv[:3] == ["python", "-m", "sommelier_mlflow.cli"], argv
            code = cli_main(argv[3:])
    finally:
        os.chdir(previous)
        os.environ.pop("MLFLOW_RUN_ID", None)
    assert code == 0, argv
    client.set_terminated(run_id)
    return run_id


def _artifacts(client: Any, run_id: str, path: str = "") -> Iterator[str]:
    for item in client.list_artifacts(run_id, path or None):
        if item.is_dir:
            yield from _artifacts(client, run_id, item.path)
        else:
            yield item.path


def _same_logging(client: Any, via_mlflow: str, via_cli: str, parameters: set[str]) -> None:
    ran, cli = client.get_run(via_mlflow).data, client.get_run(via_cli).data
    for key, value in cli.params.items():
        assert ran.params.get(key) == value, (key, ran.params.get(key), value)
    assert set(ran.params) - set(cli.params) <= parameters, set(ran.params) - set(cli.params)
    assert set(ran.metrics) == set(cli.metrics), set(ran.metrics) ^ set(cli.metrics)
    for key, value in cli.metrics.items():
        if not key.startswith("generation/"):  # timings differ; the keys may not
            assert ran.metrics[key] == value, key
    ours = {key for key in cli.tags if key.startswith("sommelier.")}
    assert ours == {key for key in ran.tags if key.startswith("sommelier.")}
    for key in ours:
        # run ids and the logging process differ; so may a report that records its run id,
        # and the LoggedModel, which belongs to the run's experiment (the CLI's run here is
        # in another experiment than `mlflow run`'s)
        if key.endswith("logged_model_id"):
            assert ran.tags[key].startswith("m-") and cli.tags[key].startswith("m-"), key
        elif not key.endswith(("run_id", ".owner", ".report_sha256")):
            assert ran.tags[key] == cli.tags[key], key
    assert sorted(_artifacts(client, via_mlflow)) == sorted(_artifacts(client, via_cli))


def _children(client: Any, parent: str) -> dict[str, str]:
    runs = client.search_runs(
        [client.get_run(parent).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent}'",
    )
    return {run.info.run_name: run.info.run_id for run in runs}


@pytest.mark.slow
def test_every_entry_point_logs_through_mlflow_run_as_through_the_cli(
    demo_assets: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    client = MlflowClient()
    values = {
        "claims": str(PROJECT / "examples" / "demo" / "claims.json"),
        "split": str(Path(demo_assets.splits_dir) / "test.jsonl"),
        "model": str(demo_assets.base_model_dir),
        "adapter": str(demo_assets.adapter_dir),
        "bfcl": str(_bfcl_folder(tmp_path / "bfcl")),
        "formatted_out": str(tmp_path / "formatted.jsonl"),  # not into the project folder
    }
    entries = mlproject_entry_points()
    for name in RECIPES:
        entry = entries[name]
        params = _recipe(name, entry, values)
        # From the project folder, as its README says: the default paths are relative to it.
        via_mlflow = mlflow_run(
            os.environ["MLFLOW_TRACKING_URI"], PROJECT, name, timeout=600, **params
        )
        via_cli = _cli_path(entry, params, PROJECT)
        parameters = set(entry.get("parameters") or {})
        _same_logging(client, via_mlflow, via_cli, parameters)
        if name == "evaluate":
            assert client.get_run(via_mlflow).data.params["num_threads"] == "0"
            assert int(client.get_run(via_mlflow).data.params["num_threads.resolved"]) >= 1
            assert "generation/prompts_per_s" in client.get_run(via_mlflow).data.metrics
            arm = Path(client.download_artifacts(via_mlflow, "sommelier", str(tmp_path)))
            values["formatted"] = str(arm / "test_split.formatted.jsonl")
            values["generations"] = str(arm / "generations")
        if name == "main":
            children = _children(client, via_mlflow)
            cli_children = _children(client, via_cli)
            assert set(children) == set(cli_children) == {"base", "adapter"}
            for kind, run_id in children.items():
                _same_logging(client, run_id, cli_children[kind], set())
            values["base_run"], values["adapter_run"] = children["base"], children["adapter"]
