"""The ``main`` command: base arm, adapter arm and their comparison, in one go.

Under MLflow the arms become child runs named ``base`` and ``adapter`` and the
comparison lands in the parent run. The package knows no demo: the project's
``examples/demo/run.py`` fills in the demo's model, adapter and split and then
calls this command like any user would.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sommelier_mlflow.cli._claims import (
    compare_arms,
    format_verdict,
    raise_if_unsupported,
    read_claims_option,
    registration_for,
)
from sommelier_mlflow.cli._options import (
    DeclaredModel,
    GenerationPlan,
    ScoringOptions,
    generation_job,
    out_folder,
)
from sommelier_mlflow.cli._pipeline import ArmOutput, LoadedArm, evaluate_arm, generate_arm
from sommelier_mlflow.cli._runs import child_run, comparison_run_name, log_arm, top_run, ui_hint
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.evaluation import ComparisonReport, MetricInterval
from sommelier_mlflow.toolcalls import calls_in_reasoning_message

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from sommelier_mlflow.data import TestSplit
    from sommelier_mlflow.toolcalls import FormatMismatch

__all__ = ["format_notices", "format_summary", "run_main"]

ARMS: Final = ("base", "adapter")


def _resolve(args: argparse.Namespace) -> tuple[str, str, str, Path | None]:
    """Model, adapter, test split and drop summary, checked before any model loads."""
    if not args.test_split:
        raise ConfigError("test_split is required: the split both arms are evaluated on")
    if not args.model:
        raise ConfigError(
            "model is required: the base both arms load (it may be left out only when "
            "--adapter is a registered PEFT model, whose flavor names its base)"
        )
    drop_summary = Path(args.drop_summary) if args.drop_summary else None
    if drop_summary is not None and not drop_summary.is_file():
        raise ConfigError(f"drop summary {drop_summary} does not exist; pass prepare's file")
    return args.model, args.adapter, args.test_split, drop_summary


def _declared(args: argparse.Namespace, kind: str) -> DeclaredModel:
    """One arm's model: both arms share the flags, and only the adapter arm has the adapter."""
    declared = DeclaredModel.from_args(args, kind)
    return declared if kind == "adapter" else declared.without_adapter()


#: Under ``--parallel-arms auto``, the largest base model (weights on disk) loaded twice.
SIDE_BY_SIDE_MAX_BYTES: Final = 1 << 30
_WEIGHT_SUFFIXES: Final = (".safetensors", ".bin")


def _side_by_side(choice: str, plan: GenerationPlan, model: str) -> bool:
    """Whether ``main`` generates its two arms at the same time (``--parallel-arms``).

    Two arms side by side, each on half the threads, beat one after the other
    when one arm cannot keep every core busy: a small model on the CPU, where
    most of a decoding step is Python overhead that a second thread does not
    share. ``auto`` also keeps two copies of a large model out of memory.
    """
    if choice != "auto":
        return choice == "true"
    if (plan.decoding.backend or "hf") != "hf" or (plan.num_threads or 0) < 2:
        return False
    folder = Path(model)
    if not folder.is_dir():  # a Hub id: its size is not known without fetching it
        return False
    weights = [p for p in folder.iterdir() if p.is_file() and p.suffix in _WEIGHT_SUFFIXES]
    return bool(weights) and sum(p.stat().st_size for p in weights) < SIDE_BY_SIDE_MAX_BYTES


#: Exit status of a worker that ended because the main process was gone.
ORPHANED_EXIT: Final = 75


def _exit_with_parent(parent_alive: Connection) -> None:
    """End this worker process the moment the main process is gone, however it ended.

    The main process holds the only writing end of the pipe ``parent_alive``
    reads, and never writes to it: when that process dies (``kill -9``, the OOM
    killer, a CI timeout), the kernel closes its end and the read here returns.
    Without this the worker would go on as an orphan, generating the whole arm
    with its own copy of the model in memory and appending to the generation
    files a rerun resumes from. Ending at any point is safe: the runner's files
    resume after ``kill -9`` alike. A pipe rather than Linux's
    ``PR_SET_PDEATHSIG``: it works on every platform, and it follows the
    process, where the death signal follows the thread that started the worker
    (a ``main`` run from a thread pool would lose its worker when that thread
    ended).
    """

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            parent_alive.recv()  # nothing is ever sent: this returns when the writer is gone
        os._exit(ORPHANED_EXIT)  # no cleanup to wait for: the main process is not there

    threading.Thread(target=watch, name="sommelier-parent-watch", daemon=True).start()


def _arm_worker(
    split: TestSplit,
    declared: DeclaredModel,
    plan: GenerationPlan,
    out_dir: Path,
    scoring: ScoringOptions,
    parent_alive: Connection,
) -> None:
    """The worker process's whole job: generate one arm, quietly, while the main process lives.

    Any failure just ends the worker: the arm is then generated (or resumed)
    again in the main process, which reports the error exactly as without
    ``--parallel-arms``. The arm's backend is closed either way.
    """
    _exit_with_parent(parent_alive)
    try:
        generate_arm(split, declared, plan, out_dir, scoring).close()
    except Exception:  # the main process reports it when it generates the arm again
        sys.exit(1)


def _generate_side_by_side(
    split: TestSplit,
    arms: Mapping[str, tuple[DeclaredModel, GenerationPlan]],
    out: Path,
    scoring: ScoringOptions,
) -> LoadedArm:
    """Generate the base arm in a worker process while this process generates the adapter arm.

    Only generations are written here; both arms are then scored (and logged)
    one after the other as usual, finding their generations on disk. A worker
    that failed leaves its arm to be generated again then. Returns the adapter
    arm as loaded here, so that scoring it does not load its model again; the
    caller closes it (here, only if something fails after it was generated).
    """
    import multiprocessing

    # spawn, not fork: this process may hold MLflow connections and, later, OpenMP threads.
    context = multiprocessing.get_context("spawn")
    quiet = replace(scoring, progress=False)
    # The worker watches the reading end; this process alone holds the writing end until the
    # worker is joined, so the worker cannot outlive it (see _exit_with_parent).
    parent_alive, alive = context.Pipe(duplex=False)
    worker = context.Process(
        target=_arm_worker,
        args=(split, *arms["base"], out / "base", quiet, parent_alive),
        name="sommelier-base-arm",
        daemon=True,
    )
    try:
        worker.start()
        parent_alive.close()
        try:
            adapter = generate_arm(split, *arms["adapter"], out / "adapter", scoring)
        except BaseException:
            # The error is what matters now; what the worker appended so far is resumed by a rerun.
            worker.terminate()
            worker.join()
            raise
        with contextlib.ExitStack() as on_error:
            on_error.callback(adapter.close)
            worker.join()
            on_error.pop_all()  # joined: the caller owns the arm now
        return adapter
    finally:
        alive.close()


def _interval(interval: MetricInterval) -> str:
    estimate, lower, upper = (
        float(value) + 0.0 for value in (interval.estimate, interval.lower, interval.upper)
    )
    return f"{estimate:+.3f} [{lower:+.3f}, {upper:+.3f}]"


def format_notices(
    mismatch: FormatMismatch | None,
    hint: str | None,
    who: str = "",
    *,
    calls_in_reasoning: int = 0,
    outputs: int = 0,
) -> list[str]:
    """An arm's output-format warning, hint and reasoning note, as every summary prints them first.

    Args:
        mismatch: The arm's format mismatch (its chosen format found almost no call syntax).
        hint: The arm's format hint line.
        who: Said after the label (``" (base arm)"``) where several arms share a summary.
        calls_in_reasoning: The arm's outputs whose only calls were written while
            reasoning (a note when any, since they score as making no call).
        outputs: How many outputs the arm scored.
    """
    notices = [] if mismatch is None else [f"WARNING{who}: {mismatch.message}"]
    notices += [] if hint is None else [f"hint{who}: {hint}"]
    if calls_in_reasoning:
        notices.append(f"note{who}: {calls_in_reasoning_message(calls_in_reasoning, outputs)}")
    return notices


def format_summary(report: ComparisonReport) -> str:
    """A terminal table of the comparison: per slice and metric, base, adapter, delta, gaps.

    Each arm's output-format warning and hint come first. The first two
    columns are as wide as their longest entry (BFCL's ``category:`` slices
    and ``bfcl_leaderboard_accuracy`` are long), and never narrower than the
    demo's table, which the README shows as printed.
    """
    lines = [
        notice
        for kind, run in report.runs.items()
        for notice in format_notices(
            run.format_mismatch,
            run.format_hint,
            f" ({kind} arm)",
            calls_in_reasoning=run.calls_in_reasoning,
            outputs=run.examples,
        )
    ]
    slice_width = max(9, *(len(name) + 2 for name in report.slices))
    metric_width = max(24, *(len(name) + 2 for name in report.metric_names))
    lines.append(
        f"{'slice':<{slice_width}}{'metric':<{metric_width}}{'base':>8}{'adapter':>9}"
        "  delta [95% CI]"
    )
    for slice_name, entry in report.slices.items():
        marked = report.not_meaningful(slice_name)
        note = f"  not meaningful for {' and '.join(marked)} (see WARNING)" if marked else ""
        for metric in report.metric_names:
            base, tuned = entry.base[metric].value, entry.adapter[metric].value
            lines.append(
                f"{slice_name:<{slice_width}}{metric:<{metric_width}}{base:>8.3f}{tuned:>9.3f}  "
                f"{_interval(entry.delta.interval(metric))}{note}"
            )
    # The headline gap is on the metric the comparison tested with McNemar.
    outcome = report.mcnemar_metric
    for kind in ("base", "adapter"):
        for language, gap in report.gaps[kind].items():
            lines.append(
                f"matched-pair gap {language}-{gap.root_language} ({kind}, "
                f"{outcome}, {gap.pairs} pairs): {_interval(gap.bootstrap.interval(outcome))}"
            )
    if report.claims is not None:
        lines.append(format_verdict(report.claims))
    return "\n".join(lines)


def _log_parent(parent_id: str, report: ComparisonReport, drop_summary: Path | None) -> None:
    """The parent run holds the comparison and, for a prepared split, what preparing dropped."""
    from sommelier_mlflow.integration import log_comparison_run, log_json_artifact

    log_comparison_run(report, run_id=parent_id)
    if drop_summary is not None and drop_summary.is_file():
        from sommelier_mlflow._json import loads

        log_json_artifact(
            loads(drop_summary.read_bytes()),
            "sommelier/prepared/drop_summary.json",
            run_id=parent_id,
        )


def run_main(args: argparse.Namespace) -> int:
    """Evaluate base and adapter on the same split, compare, and (under MLflow) log all."""
    from sommelier_mlflow.cli._model_registry import resolve_registry_options
    from sommelier_mlflow.generation import keep_engines

    claims = read_claims_option(args.claims)
    # With --require-registered, refuse before hours of generation, not after.
    registration_for(args, claims, [], logged=False)
    registry_tags = resolve_registry_options(args)
    model, adapter, split_path, drop_summary = _resolve(args)
    scoring = ScoringOptions.from_args(args)
    split = scoring.read(split_path)  # once, for both arms
    out = out_folder(args, "main", **generation_job(args))
    log = bool(args.mlflow or os.environ.get("MLFLOW_RUN_ID"))
    parent: AbstractContextManager[str | None] = nullcontext(None)
    if log:
        parent = top_run(comparison_run_name(model, adapter))
    declared = {kind: _declared(args, kind) for kind in ARMS}
    plans = {kind: GenerationPlan.from_args(args, kind) for kind in ARMS}
    side_by_side = _side_by_side(args.parallel_arms, plans["base"], model)
    if side_by_side:
        plans = {kind: plan.sharing_cores() for kind, plan in plans.items()}
    # Both arms run on one engine where their backend shares one (the hf backend's base
    # model is loaded once); every backend and engine is closed at the end, on error too.
    with parent as parent_id, keep_engines(), contextlib.ExitStack() as opened:
        loaded: dict[str, LoadedArm] = {}
        if side_by_side:
            pairs = {kind: (declared[kind], plans[kind]) for kind in ARMS}
            adapter_arm = _generate_side_by_side(split, pairs, out, scoring)
            loaded["adapter"] = opened.enter_context(adapter_arm)
        arms: dict[str, ArmOutput] = {}
        child_ids: dict[str, str] = {}
        for kind in ARMS:
            child: AbstractContextManager[str | None] = nullcontext(None)
            if parent_id is not None:
                child = child_run(parent_id, kind)
            with child as run_id:
                plan = plans[kind]
                arms[kind] = evaluate_arm(
                    split, declared[kind], plan, out / kind, scoring, loaded.pop(kind, None)
                )
                if run_id is not None:
                    child_ids[kind] = run_id
                    # Which registry versions this arm ran, as `evaluate` records them.
                    arm_tags = registry_tags.for_arm(kind)
                    if arm_tags:
                        from sommelier_mlflow.integration import set_sommelier_tags

                        set_sommelier_tags(run_id, extra=arm_tags)
                    log_arm(
                        arms[kind],
                        run_id,
                        plan.logged_params(),
                        log_traces=args.log_traces,
                        progress=scoring.progress,
                        texts=plan.logged_texts(),
                    )
        logged = parent_id is not None
        registration = registration_for(args, claims, list(child_ids.values()), logged)
        reports = (arms["base"].report_path, arms["adapter"].report_path)
        comparison = compare_arms(args, reports, out / "comparison", claims, registration)
        if parent_id is not None:
            _log_parent(parent_id, comparison.report, drop_summary)
        print(format_summary(comparison.report))
        print(f"\nreports: {out.resolve()}")
        if parent_id is not None:
            import mlflow

            print(f"MLflow parent run: {parent_id}")
            for kind, arm in arms.items():
                print(f"  {kind} run: {child_ids[kind]}  report: {arm.report_path.resolve()}")
            print(ui_hint(str(mlflow.get_tracking_uri())))
    sys.stdout.flush()
    if args.fail_on_unsupported:
        raise_if_unsupported(comparison.report)
    return 0
