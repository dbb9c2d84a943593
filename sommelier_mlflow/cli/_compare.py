"""``compare``: one base against one adapter (with claims and promotion) or against many.

One adapter is the comparison the product always made, now with
``--promote ALIAS``: the alias moves in the Model Registry only when the
preregistered claims are supported. Several adapters (``--adapter-run-id``
repeated, ``--adapter-runs-from-parent`` for a sweep's child runs, or
``--adapter-report`` repeated) make a leaderboard with Holm's adjustment over
the family; claims and promotion are refused there, because the choice of the
best adapter must be confirmed on a second split before anything is claimed.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sommelier_mlflow.errors import ConfigError

__all__ = ["add_compare_arguments", "run_compare"]

_STEP = re.compile(r"(?:checkpoint|step)-(\d+)")


def add_compare_arguments(compare: argparse.ArgumentParser) -> None:
    """The adapter-arm, leaderboard and promotion flags of ``compare``."""
    compare.add_argument(
        "--adapter-report",
        action="append",
        default=[],
        help="adapter arm evaluation_report.json (repeat for several adapters)",
    )
    compare.add_argument(
        "--adapter-run-id",
        action="append",
        default=[],
        help="MLflow run id of an adapter arm (repeat for several adapters)",
    )
    compare.add_argument(
        "--adapter-runs-from-parent",
        default="",
        metavar="RUN_ID",
        help="every adapter arm among the child runs of this run (a sweep), in start order, "
        "or every checkpoint LoggedModel of this training run (SommelierCallback), by step",
    )
    compare.add_argument(
        "--select-metric",
        default="full_call_exact_match",
        help="with several adapters: the metric the leaderboard ranks and tests (Holm over "
        "the family); default full_call_exact_match",
    )
    compare.add_argument(
        "--promote",
        default="",
        metavar="ALIAS",
        help="set ALIAS on the adapter's Model Registry version if, and only if, the claims "
        "are supported (needs --claims and an adapter arm evaluated from models:/...)",
    )


@dataclass(frozen=True)
class _Arms:
    """The arms as given: a base and one or more adapters, each a report file or a run."""

    base: str
    adapters: tuple[str, ...]
    from_runs: bool


def _arms(args: argparse.Namespace) -> _Arms:
    reports = [value for value in args.adapter_report if value.strip()]
    runs = [value for value in args.adapter_run_id if value.strip()]
    parent = args.adapter_runs_from_parent.strip()
    if args.base_report:
        if runs or parent or not reports:
            raise ConfigError(
                "with --base-report give the adapters as --adapter-report files (one or more)"
            )
        return _Arms(args.base_report, tuple(reports), from_runs=False)
    if reports or not (runs or parent):
        raise ConfigError(
            "with --base-run-id give the adapters as --adapter-run-id (one or more) or "
            "--adapter-runs-from-parent RUN_ID"
        )
    base = args.base_run_id
    if parent:
        children = _child_adapter_runs(parent)
        if not children:
            checkpoints = _checkpoint_models(parent)
            children = [model for kind, model in checkpoints if kind == "adapter"]
            # `--base-run-id TRAIN_RUN`: the training run's own base evaluation (step 0).
            bases = [model for kind, model in checkpoints if kind == "base"]
            if base == parent and bases:
                base = bases[0]
        if not children:
            raise ConfigError(
                f"run {parent} has no adapter-arm child runs and no checkpoint LoggedModels "
                "(SommelierCallback) to compare"
            )
        runs += [run for run in children if run not in runs]
    return _Arms(base, tuple(runs), from_runs=True)


def _child_adapter_runs(parent: str) -> list[str]:
    """Adapter-arm child runs of ``parent``, oldest first."""
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import read_active_run, tracking_errors

    with tracking_errors(f"list the child runs of {parent}"):
        client = MlflowClient()
        # Deleted children are left out (MLflow's search skips them); a deleted parent is refused.
        experiment = read_active_run(parent, client=client).info.experiment_id
        children = client.search_runs(
            [experiment],
            filter_string=f"tags.mlflow.parentRunId = '{parent}' "
            "and tags.`sommelier.model_kind` = 'adapter'",
            order_by=["attributes.start_time ASC"],
            max_results=1000,
        )
    return [str(run.info.run_id) for run in children]


def _checkpoint_models(parent: str) -> list[tuple[str, str]]:
    """``(model_kind, model id)`` of a training run's checkpoint LoggedModels, by step."""
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import (
        TAG_CHECKPOINT_STEP,
        TAG_TRAINING_RUN_ID,
        read_active_run,
        tracking_errors,
    )

    with tracking_errors(f"list the checkpoint models of run {parent}"):
        client = MlflowClient()
        experiment = read_active_run(parent, client=client).info.experiment_id
        try:
            models = client.search_logged_models(
                experiment_ids=[str(experiment)],
                filter_string=f"tags.`{TAG_TRAINING_RUN_ID}` = '{parent}'",
                max_results=1000,
            )
        except NotImplementedError:  # a store without LoggedModels has no checkpoints
            return []
    ordered = sorted(models, key=lambda model: int(model.tags.get(TAG_CHECKPOINT_STEP, "0")))
    return [(str(m.tags.get("sommelier.model_kind", "")), str(m.model_id)) for m in ordered]


def _registry_arm(run_id: str) -> tuple[str, str]:
    """The registered name and version an adapter arm was evaluated from.

    Raises:
        ConfigError: The run's adapter did not come from the Model Registry (exit 2).
    """
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import tracking_errors

    with tracking_errors(f"read the tags of run {run_id}"):
        tags = MlflowClient().get_run(run_id).data.tags
    name = tags.get("sommelier.registry.adapter.name")
    version = tags.get("sommelier.registry.adapter.version")
    if not name or not version:
        raise ConfigError(
            f"--promote needs an adapter arm evaluated from the Model Registry "
            f"(--adapter models:/<name>@<alias>); run {run_id}'s adapter was not"
        )
    return name, version


def _check_promotion(
    args: argparse.Namespace, arms: _Arms, claims: Any, logged: bool
) -> tuple[str, str] | None:
    """Refuse a promotion that could never happen, before anything is computed or logged.

    The alias must be one the registry accepts (exit 2) and the arm's version
    must exist in a reachable registry (exit 3): otherwise the comparison run
    would be logged, verdict and all, for a promotion that then fails.
    """
    if not args.promote:
        return None
    from sommelier_mlflow.integration import check_alias, check_promotion

    check_alias(args.promote)
    if claims is None:
        raise ConfigError("--promote needs the preregistered --claims whose verdict gates it")
    if not logged:
        raise ConfigError("--promote records the comparison run on the version: add --mlflow")
    if not arms.from_runs or len(arms.adapters) != 1:
        raise ConfigError(
            "--promote needs exactly one adapter arm given by --adapter-run-id (a run that "
            "evaluated a models:/ adapter); choose among several first, then confirm one"
        )
    name, version = _registry_arm(arms.adapters[0])
    check_promotion(name, version, args.promote)
    return name, version


def _label(arm: str, from_runs: bool) -> str:
    return arm if from_runs else Path(arm).resolve().parent.name or Path(arm).stem


def _step(label: str, source: str | None) -> int | None:
    for text in (source or "", label):
        found = _STEP.findall(text)
        if found:
            return int(found[-1])
    return None


def run_compare(args: argparse.Namespace, logged: bool) -> int:
    """The ``compare`` command: one adapter (claims, promotion) or a leaderboard of many."""
    from sommelier_mlflow.cli._claims import read_claims_option
    from sommelier_mlflow.cli._options import out_folder

    arms = _arms(args)
    claims = read_claims_option(args.claims)  # a bad claims file fails before any download
    promotion = _check_promotion(args, arms, claims, logged)
    if len(arms.adapters) > 1 and claims is not None:
        raise ConfigError(
            "claims decide one adapter: pick it on the leaderboard (without --claims), then "
            "confirm it on a second split with one --adapter-run-id and claims registered now"
        )
    out = out_folder(
        args,
        "compare",
        base=arms.base,
        adapter=",".join(arms.adapters),
        seed=args.seed,
        resamples=args.resamples,
    )
    paths = _report_paths(arms, out)
    if len(arms.adapters) == 1:
        return _one_adapter(args, arms, paths, out, claims, promotion, logged)
    return _leaderboard(args, arms, paths, out, logged)


def _report_paths(arms: _Arms, out: Path) -> list[Path]:
    """Base first, then each adapter's report, downloaded when given as runs."""
    if not arms.from_runs:
        return [Path(arms.base), *(Path(path) for path in arms.adapters)]
    from sommelier_mlflow.cli._runs import download_evaluation_report

    paths = [download_evaluation_report(arms.base, out / "inputs" / "base")]
    for index, run in enumerate(arms.adapters):
        folder = "adapter" if len(arms.adapters) == 1 else f"adapter-{index + 1}"
        paths.append(download_evaluation_report(run, out / "inputs" / folder))
    return paths


def _one_adapter(
    args: argparse.Namespace,
    arms: _Arms,
    paths: list[Path],
    out: Path,
    claims: Any,
    promotion: tuple[str, str] | None,
    logged: bool,
) -> int:
    from sommelier_mlflow.cli._claims import compare_arms, raise_if_unsupported, registration_for
    from sommelier_mlflow.cli._main_command import format_summary

    arm_runs = [arms.base, *arms.adapters] if arms.from_runs else []
    registration = registration_for(args, claims, arm_runs, logged)
    artifacts = compare_arms(args, (paths[0], paths[1]), out / "comparison", claims, registration)
    # The table `main` prints (claims verdict included), then where the reports are.
    print(format_summary(artifacts.report))
    print(f"\ncomparison: {artifacts.json_path}")
    print(f"            {artifacts.markdown_path}")
    if logged:
        from sommelier_mlflow.cli._runs import comparison_run_name, top_run
        from sommelier_mlflow.integration import (
            log_comparison_run,
            log_verdict,
            promote_version,
            set_sommelier_tags,
        )

        adapter_identity = artifacts.report.runs["adapter"].adapter
        base_model = artifacts.report.identity.model_identity.base_model
        adapter_source = adapter_identity.source if adapter_identity is not None else "adapter"
        with top_run(comparison_run_name(base_model, adapter_source)) as run_id:
            links: dict[str, object] = {}
            if arms.from_runs:
                links = {"base_run_id": arms.base, "adapter_run_id": arms.adapters[0]}
                set_sommelier_tags(
                    run_id, extra={f"sommelier.{key}": str(value) for key, value in links.items()}
                )
            # The verdict is tagged last, after the promotion it decides: a run whose
            # promotion failed ends FAILED without `sommelier.verdict`.
            log_comparison_run(
                artifacts.report,
                run_id=run_id,
                params=_unlogged(run_id, links),
                tag_verdict=promotion is None,
            )
            print(f"logged to MLflow run {run_id}")
            if promotion is not None:
                name, version = promotion
                adapter_model = _logged_model_of(arms.adapters[0])
                if adapter_model:
                    set_sommelier_tags(run_id, extra={"sommelier.adapter_model_id": adapter_model})
                if promote_version(
                    name, version, args.promote, artifacts.report, run_id, adapter_model
                ):
                    print(f"promoted models:/{name}/{version} to @{args.promote} (supported)")
                else:
                    print(
                        f"not promoted: the verdict is {artifacts.report.claims.verdict}; "  # type: ignore[union-attr]
                        f"models:/{name} is unchanged"
                    )
                log_verdict(artifacts.report, run_id=run_id)
    if args.fail_on_unsupported:
        raise_if_unsupported(artifacts.report)
    return 0


def _logged_model_of(run_id: str) -> str | None:
    """The LoggedModel an arm run's metrics are on (``None`` on a store without them)."""
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import TAG_LOGGED_MODEL_ID, tracking_errors

    with tracking_errors(f"read the tags of run {run_id}"):
        return MlflowClient().get_run(run_id).data.tags.get(TAG_LOGGED_MODEL_ID)


def _leaderboard(
    args: argparse.Namespace, arms: _Arms, paths: list[Path], out: Path, logged: bool
) -> int:
    from sommelier_mlflow.evaluation import (
        AdapterArm,
        build_leaderboard,
        read_evaluation_report,
        write_comparison_report,
        write_leaderboard,
    )

    base = read_evaluation_report(paths[0])
    family = []
    for arm, path in zip(arms.adapters, paths[1:], strict=True):
        report = read_evaluation_report(path)
        label = _label(arm, arms.from_runs)
        adapter = report.identity.adapter
        step = _step(label, None if adapter is None else adapter.source)
        family.append(AdapterArm(label, report, arm if arms.from_runs else None, step))
    board = build_leaderboard(
        base, family, select_metric=args.select_metric, seed=args.seed, resamples=args.resamples
    )
    folder = out / "comparison"
    written = []
    for index, row in enumerate(board.rows):
        pair = write_comparison_report(folder / f"adapter-{index + 1}", row.comparison)
        written += [pair.json_path, pair.markdown_path]
    json_path, markdown_path = write_leaderboard(folder, board)
    print(markdown_path.read_text(encoding="utf-8"))
    print(f"leaderboard: {json_path}")
    if logged:
        from sommelier_mlflow.cli._runs import child_run, top_run
        from sommelier_mlflow.integration import log_comparison_run, log_leaderboard

        with top_run(f"leaderboard ({len(board.rows)} adapters)") as run_id:
            for row in board.rows:
                with child_run(run_id, f"compare {row.arm.label}") as child:
                    links = {"base_run_id": arms.base, "adapter_run_id": row.arm.run_id}
                    log_comparison_run(
                        row.comparison,
                        run_id=child,
                        params={k: v for k, v in links.items() if v and arms.from_runs},
                    )
            log_leaderboard(
                board, run_id=run_id, files=[json_path, markdown_path, *written], root=folder
            )
            print(f"logged to MLflow run {run_id} (best: {board.best_row.arm.label})")
    return 0


def _unlogged(run_id: str, params: dict[str, object]) -> dict[str, object]:
    """Drop params ``mlflow run`` already logged for this run (same names, same values)."""
    if not params or not os.environ.get("MLFLOW_RUN_ID"):
        return params
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import tracking_errors

    with tracking_errors("read the run's params"):
        existing = MlflowClient().get_run(run_id).data.params
    return {key: value for key, value in params.items() if key not in existing}
