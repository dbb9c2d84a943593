"""One handler per ``sommelier-mlflow`` command, and :func:`main`, which runs one.

The flags are declared in :mod:`sommelier_mlflow.cli._parser`. ``main`` (both
arms and their comparison) is long enough to have its own module,
:mod:`sommelier_mlflow.cli._main_command`; the other commands are short and
live here. Expected failures (bad input, a missing model, a
refused comparison, a broken invariant) end with one ``error:`` line on
stderr and the exit code of the error tree, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sommelier_mlflow.cli._parser import build_parser
from sommelier_mlflow.errors import ConfigError, InputError, SommelierError

__all__ = ["main"]


def _wants_mlflow(args: argparse.Namespace) -> bool:
    return bool(args.mlflow or os.environ.get("MLFLOW_RUN_ID"))


def _cmd_prepare(args: argparse.Namespace) -> int:
    from sommelier_mlflow.data import prepare

    result = prepare(
        args.raw,
        args.out,
        seed=args.seed,
        split_sizes={"train": args.train, "validation": args.validation, "test": args.test},
        keep_multi_call=args.keep_multi_call,
        input_format=args.input_format,
        strict=args.strict,
    )
    for name, path in result.split_paths.items():
        print(f"{name}: {path}")
    print(f"drop summary: {result.drop_summary_path}")
    if _wants_mlflow(args):
        from sommelier_mlflow.cli._runs import top_run
        from sommelier_mlflow.integration import log_artifact_files

        written = [*result.split_paths.values(), result.drop_summary_path]
        with top_run("prepare") as run_id:
            log_artifact_files(written, "sommelier/prepared", root=args.out, run_id=run_id)
    return 0


def _cmd_import_bfcl(args: argparse.Namespace) -> int:
    from sommelier_mlflow.data import import_bfcl

    named = [part.strip() for item in args.categories for part in item.split(",")]
    result = import_bfcl(
        args.data_dir, args.out, categories=[name for name in named if name], strict=args.strict
    )
    kept = result.summary["kept"]
    print(f"split: {result.split_path} ({result.summary['kept_total']} questions)")
    for category, count in kept.items():
        skipped = sum(result.summary["dropped"][category].values())
        print(f"  {category}: {count} kept, {skipped} skipped")
    print(f"drop summary: {result.drop_summary_path}")
    if _wants_mlflow(args):
        from sommelier_mlflow.cli._runs import top_run
        from sommelier_mlflow.integration import log_artifact_files

        written = [result.split_path, result.drop_summary_path]
        root = result.split_path.parent
        with top_run("import-bfcl") as run_id:
            log_artifact_files(written, "sommelier/bfcl", root=root, run_id=run_id)
    return 0


def _fields(values: Sequence[str]) -> list[str]:
    """``--slice-by`` values, each repeatable and comma-separated, as one list of fields."""
    from sommelier_mlflow.data import slice_field_names

    return slice_field_names(values)


def _cmd_format(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._options import PromptOptions, read_split
    from sommelier_mlflow.cli._pipeline import format_split
    from sommelier_mlflow.generation import load_tokenizer

    prompt = PromptOptions.from_args(args)  # a bad flag fails before the tokenizer loads
    split = read_split(args.test_split, _fields(args.slice_by))
    tokenizer = load_tokenizer(
        args.tokenizer, args.tokenizer_revision or None, trust_remote_code=args.trust_remote_code
    )
    path = format_split(split, tokenizer, args.out, prompt)
    print(f"formatted split ({args.prompt_format}, {len(split.examples)} prompts): {path}")
    if _wants_mlflow(args):
        from sommelier_mlflow.cli._runs import top_run
        from sommelier_mlflow.integration import log_artifact_files

        with top_run("format") as run_id:
            log_artifact_files([path], "sommelier/formatted", root=path.parent, run_id=run_id)
    return 0


def _log_arm_run(
    arm: Any,
    args: argparse.Namespace,
    run_name: str,
    extra_params: dict[str, object],
    tags: dict[str, str] | None = None,
    texts: dict[str, str] | None = None,
) -> None:
    """Log one arm into ``mlflow run``'s run, or a new run named ``run_name``.

    ``tags`` record where a registry model came from (name, version, run, digest);
    ``texts`` are text artifacts by path (a system prompt no param holds).
    """
    from sommelier_mlflow.cli._options import progress_wanted
    from sommelier_mlflow.cli._runs import log_arm, top_run
    from sommelier_mlflow.integration import set_sommelier_tags

    with top_run(run_name) as run_id:
        if tags:
            set_sommelier_tags(run_id, extra=tags)
        traces = log_arm(
            arm,
            run_id,
            extra_params,
            log_traces=args.log_traces,
            progress=progress_wanted(args),
            texts=texts,
        )
        print(f"logged to MLflow run {run_id}" + (f" ({traces} traces)" if traces else ""))


def _print_arm(arm: Any) -> None:
    """One arm's summary: format warning and hint first, its metrics, its mode's own lines."""
    from sommelier_mlflow.cli._main_command import format_notices
    from sommelier_mlflow.toolcalls import find_scoring_mode

    report = arm.report
    mismatch = report.format_mismatch
    print(f"{report.identity.model_kind} arm: {arm.report_path}")
    notices = format_notices(
        mismatch,
        report.format_hint,
        calls_in_reasoning=report.calls_in_reasoning,
        outputs=report.examples,
    )
    for notice in notices:
        print(f"  {notice}")
    width = max(24, *(len(name) for name in report.metrics))
    for name, value in report.metrics.items():
        print(f"  {name:<{width}} {value.value:.4f} ({value.numerator}/{value.denominator})")
    mode = find_scoring_mode(report.identity.scoring)
    if mode is not None and mode.summary_lines is not None:
        for line in mode.summary_lines(report):  # the mode's own summing-up (BFCL's aggregation)
            print(f"  {line}")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._options import (
        DeclaredModel,
        GenerationPlan,
        ScoringOptions,
        generation_job,
        out_folder,
    )
    from sommelier_mlflow.cli._pipeline import evaluate_arm
    from sommelier_mlflow.cli._registry import resolve_registry_options

    registry_tags = resolve_registry_options(args).for_arm(args.model_kind)
    out = out_folder(args, args.model_kind, tokenizer=args.tokenizer, **generation_job(args))
    plan = GenerationPlan.from_args(args, args.model_kind)
    declared = DeclaredModel.from_args(args)
    scoring = ScoringOptions.from_args(args)
    arm = evaluate_arm(scoring.read(args.test_split), declared, plan, out, scoring)
    _print_arm(arm)
    if _wants_mlflow(args):
        params, texts = plan.logged_params(), plan.logged_texts()
        _log_arm_run(arm, args, args.model_kind, params, registry_tags, texts)
    return 0


def _given(path: str | None) -> str | None:
    """A path option, or ``None`` when it was left at the MLproject's "not given" value.

    MLflow resolves ``path`` parameters against the caller's directory and
    insists the file exists, so an MLproject cannot default one to "". The
    ``score`` entry point therefore defaults ``generations`` and ``precomputed``
    to ``/dev/null``, which always exists and never holds outputs.
    """
    from sommelier_mlflow.cli._options import given_path

    return given_path(path)


def _cmd_score(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._options import (
        DeclaredModel,
        ScoringOptions,
        out_folder,
        split_identity,
    )
    from sommelier_mlflow.cli._pipeline import replay_precomputed, score_generations
    from sommelier_mlflow.cli._registry import resolve_registry_options
    from sommelier_mlflow.data import Decoding

    # Resolved first, so the declared identity (and the gate) sees the folders evaluate saw.
    registry_tags = resolve_registry_options(args).for_arm(args.model_kind)
    generations, precomputed = _given(args.generations), _given(args.precomputed)
    if (generations is None) == (precomputed is None):
        raise ConfigError(
            "give exactly one of generations (this package's generation files) or precomputed "
            "(example_id + raw_text rows produced elsewhere); "
            + ("both were given" if generations else "neither was given")
        )
    if precomputed is not None and (
        not args.model or args.max_new_tokens is None or args.batch_size is None
    ):
        raise ConfigError(
            "precomputed outputs need model=... and the decoding they were made with "
            "(max_new_tokens=..., batch_size=...): they are recorded and checked by the gate"
        )
    names = ("model", "adapter", "max_new_tokens", "batch_size", "backend")
    identity = {name: getattr(args, name) for name in names}
    source = Path(generations or precomputed or "").resolve()
    identity.update(split=split_identity(args.test_split), generations=source)
    out = out_folder(args, f"score-{args.model_kind}", **identity)
    declared = DeclaredModel.from_args(args)
    scoring = ScoringOptions.from_args(args)
    split = scoring.read(args.test_split)
    extra: dict[str, object] = {}
    if precomputed is not None:
        # Replaying is transport, not the engine that decoded: the decoding (backend
        # included, when the producer declares it) is the producer's, as declared.
        decoding = Decoding(args.max_new_tokens, args.batch_size, backend=args.backend or None)
        arm = replay_precomputed(split, precomputed, declared, decoding, out, scoring)
        extra["outputs_source"] = "precomputed"
    else:
        arm = score_generations(split, generations or "", declared, out, scoring)
    _print_arm(arm)
    if _wants_mlflow(args):
        _log_arm_run(arm, args, args.model_kind, extra, registry_tags)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._compare import run_compare

    return run_compare(args, _wants_mlflow(args))


def _cmd_claims(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._claims import register_command

    return register_command(args.claims_file)


def _cmd_show(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._show import show_run

    print(show_run(args.run_id, args.tracking_uri))
    return 0


def _cmd_main(args: argparse.Namespace) -> int:
    from sommelier_mlflow.cli._main_command import run_main

    return run_main(args)


def _cmd_dataset(args: argparse.Namespace) -> int:
    from sommelier_mlflow.data import read_test_split
    from sommelier_mlflow.integration import DATASET_PREFIX, push_dataset_split

    split = read_test_split(args.split, slice_by=_fields(args.slice_by))
    pushed = push_dataset_split(split, args.name, replace=args.replace)
    dataset = pushed.dataset
    print(
        f"evaluation dataset {dataset.name!r}: {pushed.records} records "
        f"(id {dataset.dataset_id}, digest {dataset.digest}) in {pushed.tracking_uri}"
    )
    for old in pushed.replaced:
        print(f"  replaced (deleted) {old}")
    print(f"evaluate it with --test-split {DATASET_PREFIX}{dataset.name}")
    return 0


def _cmd_backends(args: argparse.Namespace) -> int:
    from sommelier_mlflow.generation import backend_names, backend_spec

    lines = []
    for name in backend_names(listed_only=True):
        spec = backend_spec(name)
        lines.append(f"{name}: {spec.summary}")
        described = spec.describe()
        if not described:
            lines.append("  (no options)")
        for option in described:
            lines.append(f"  {option.name} ({option.type}, {option.default}): {option.help}")
    print("\n".join(lines))
    return 0


_COMMANDS = {
    "prepare": _cmd_prepare,
    "import-bfcl": _cmd_import_bfcl,
    "format": _cmd_format,
    "evaluate": _cmd_evaluate,
    "score": _cmd_score,
    "compare": _cmd_compare,
    "main": _cmd_main,
    "claims": _cmd_claims,
    "show": _cmd_show,
    "dataset": _cmd_dataset,
    "backends": _cmd_backends,
}


def _filesystem_message(exc: OSError) -> str:
    from sommelier_mlflow._redact import redact

    where = os.fspath(exc.filename)
    reason = exc.strerror or type(exc).__name__
    return redact(
        f"{where}: {reason}; check the path (an output folder, --out, must be creatable, "
        "writable and have free space)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit code (2-6 for expected outcomes, see the README)."""
    from sommelier_mlflow.cli._errors import error_line, refuse_unknown
    from sommelier_mlflow.integration import is_dataset_reference

    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # e.g. a misspelled `mlflow run -P` parameter, passed on as a flag
        refuse_unknown(parser, args.command, unknown)
    try:
        with contextlib.ExitStack() as stack:
            needs_store = (
                args.command == "dataset"
                or is_dataset_reference(getattr(args, "test_split", None))
                or getattr(args, "base_run_id", None)
                or getattr(args, "require_registered", False)
                or any(
                    str(getattr(args, name, None) or "").startswith("models:/")
                    for name in ("model", "adapter")
                )
            )
            if _wants_mlflow(args) or needs_store:
                from sommelier_mlflow.cli._runs import prepared_tracking

                # Before any work: seconds, not minutes, to exit 3.
                stack.enter_context(prepared_tracking())
            return _COMMANDS[args.command](args)
    except SommelierError as exc:
        from sommelier_mlflow._redact import redact

        # Messages quote models, adapters and URIs as given, credentials included.
        print(error_line(redact(str(exc)), exc.exit_code), file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if exc.filename is None:  # not a filesystem error (a socket, say): a real bug
            raise
        # A read-only, full or misnamed output location: the user's to fix.
        print(error_line(_filesystem_message(exc), InputError.exit_code), file=sys.stderr)
        return InputError.exit_code
    except KeyboardInterrupt:
        print("interrupted: re-run the same command to resume", file=sys.stderr)
        return 130
