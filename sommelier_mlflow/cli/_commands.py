"""The ``sommelier-mlflow`` argument parser and one handler per command.

``main`` (both arms and their comparison) is long enough to have its own
module, :mod:`sommelier_mlflow.cli._main_command`; the other commands are
short and live here. Expected failures (bad input, a missing model, a
refused comparison, a broken invariant) end with one ``error:`` line on
stderr and the exit code of the error tree, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sommelier_mlflow.errors import ConfigError, InputError, SommelierError

__all__ = ["build_parser", "main"]


def _nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _optional_int(text: str) -> int | None:
    """An integer flag an MLproject may pass as "" (not given); ``"16.0"`` reads as 16."""
    if not text.strip():
        return None
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if not number.is_integer() or number <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(number)


def _switch(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """An off-by-default flag: present means on (``store_true``)."""
    parser.add_argument(flag, action="store_true", help=help_text)


def _add_mlflow_flag(parser: argparse.ArgumentParser) -> None:
    _switch(
        parser, "--mlflow", "log to MLflow (automatic under `mlflow run`, which sets MLFLOW_RUN_ID)"
    )


_SPLIT_HELP = (
    "a split file, or mlflow-dataset:<name or id> for an MLflow evaluation dataset "
    "(docs/datasets.md)"
)


def _add_test_split(parser: argparse.ArgumentParser, what: str | None = None) -> None:
    """``--test-split``, which every command that reads a split takes; ``what`` says which."""
    help_text = _SPLIT_HELP if what is None else f"{what}: {_SPLIT_HELP}"
    parser.add_argument("--test-split", required=True, help=help_text)


#: Seeds are recorded in reports and MLflow params, which hold signed 64-bit integers.
_MAX_SEED = 2**63 - 1
#: A bound on memory and time: resamples x examples draws are kept in memory.
_MAX_RESAMPLES = 1_000_000


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _add_experience(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-traces",
        default="auto",
        choices=["auto", "true", "false"],
        help="one MLflow trace with assessments per example, for MLflow's evaluation view "
        "(auto: on up to 5,000 examples per arm)",
    )
    _switch(
        parser,
        "--progress",
        "show progress bars even when stderr is not a terminal (they show on a terminal)",
    )


def _add_stats(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed",
        type=_bounded_int(0, _MAX_SEED),
        default=0,
        help="bootstrap base seed, 0 to 2**63-1 (default 0)",
    )
    parser.add_argument(
        "--resamples",
        type=_bounded_int(1, _MAX_RESAMPLES),
        default=2000,
        help=f"paired-bootstrap resamples, 1 to {_MAX_RESAMPLES:,} (default 2000)",
    )


def _add_scoring(parser: argparse.ArgumentParser) -> None:
    # No argparse choices: modes and formats may come from installed plugins,
    # and an unknown name is refused (exit 2, listing them) when the options
    # are checked.
    from sommelier_mlflow.toolcalls import DEFAULT_MODE, JSON_FORMAT

    parser.add_argument(
        "--scoring",
        default=DEFAULT_MODE,
        help="scoring mode, declared never guessed (default single: one gold call per example, "
        "the five metrics; calls: zero or more calls, the seven calls metrics; or a mode a "
        "plugin registers)",
    )
    parser.add_argument(
        "--output-format",
        default=JSON_FORMAT,
        help="how the model writes its tool calls (default json: the product's own JSON; "
        "see docs/formats.md for the registered formats); its decoder version is recorded "
        "in the report's parser_version",
    )
    _add_slice_by(
        parser,
        "also slice by this row field (repeatable or comma-separated); language is always "
        "sliced, and --scoring calls adds the call-count slice 'calls'",
    )


def _add_claims(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--claims",
        default="",
        help="preregistered claims file (sommelier_mlflow.claims.v1) to decide; empty: none",
    )
    _switch(
        parser,
        "--require-registered",
        "refuse (exit 4) claims whose SHA-256 no `claims register` run recorded",
    )
    _switch(
        parser,
        "--fail-on-unsupported",
        "exit 6 when any claim is not supported (reports are still written and logged)",
    )


def _add_scoring_run(parser: argparse.ArgumentParser, *, claims: bool = False) -> None:
    """The flags every command that scores an arm shares (``evaluate``, ``score``, ``main``).

    ``main`` also decides claims, so it takes the claims flags too.
    """
    _add_experience(parser)
    _add_stats(parser)
    _add_scoring(parser)
    if claims:
        _add_claims(parser)
    _add_mlflow_flag(parser)


def _add_model(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--model",
        required=required,
        default=None,
        help="base model: local path, hub id, or models:/<name>/<version> | models:/<name>@<alias>",
    )
    parser.add_argument("--revision", default=None, help="pinned hub revision of the model")
    parser.add_argument("--tokenizer", default=None, help="tokenizer (default: the model's)")
    parser.add_argument("--tokenizer-revision", default=None, help="pinned hub revision of it")
    parser.add_argument(
        "--adapter",
        default=None,
        help="peft LoRA adapter directory, or a registered PEFT model: models:/<name>/<version> "
        "or models:/<name>@<alias> (its base is the model it names unless --model is given)",
    )


def _add_generation(parser: argparse.ArgumentParser, *, batch_size: int) -> None:
    """The flags of the commands that generate (``evaluate``, ``main``), declared once.

    Only the default batch size differs: ``main`` runs two arms and batches more.
    """
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument(
        "--max-examples",
        type=_nonneg_int,
        default=0,
        help="evaluate a seeded sample of this many roots (with their translations), "
        "stratified by language and the declared slices, drawn with --seed; 0 = all",
    )
    parser.add_argument(
        "--skip-overlong",
        nargs="?",
        const="true",
        default="false",
        choices=["true", "false"],
        help="leave out prompts whose tokens plus --max-new-tokens exceed the model's context "
        "(counted and listed in the report; both arms must skip alike) instead of refusing "
        "the run (exit 2)",
    )
    _add_prompt_format(parser)
    _add_backend(parser)


def _add_trust_remote_code(parser: argparse.ArgumentParser, what: str) -> None:
    _switch(
        parser,
        "--trust-remote-code",
        f"run code shipped with the {what} repository (off unless you ask)",
    )


def _add_prompt_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prompt-format",
        default="sommelier",
        help="how prompts are rendered (default sommelier: the product's one-JSON-call "
        "instruction; native: the tokenizer's own tool rendering, apply_chat_template(..., "
        "tools=...)); recorded in the report and checked by the gate",
    )
    parser.add_argument(
        "--system-prompt",
        default="",
        help="system turn for --prompt-format native (empty: none); part of every prompt digest",
    )
    parser.add_argument(
        "--system-prompt-file",
        default=None,
        metavar="PATH",
        help="the system turn read from a UTF-8 file, used byte for byte (a command-line "
        "argument is limited to 128 KiB); instead of --system-prompt",
    )
    parser.add_argument(
        "--chat-template-kwargs",
        default="",
        metavar="JSON",
        help='extra chat-template variables as a JSON object, e.g. \'{"enable_thinking": '
        'false}\' (Qwen3) or \'{"date_string": "26 Jul 2024"}\' (Llama 3.1/3.2); '
        "recorded in each formatted row and the report, checked by the gate",
    )


def _add_backend(parser: argparse.ArgumentParser) -> None:
    from sommelier_mlflow.cli._options import OPTION_ALIASES
    from sommelier_mlflow.generation import backend_names

    parser.add_argument(
        "--backend",
        default="hf",
        choices=backend_names(listed_only=True),
        help="generation backend (default hf: transformers, plus peft for the adapter); "
        "recorded in the decoding, so both arms of a comparison must use the same one",
    )
    parser.add_argument(
        "--num-threads",
        type=_nonneg_int,
        default=0,
        help="CPU threads for the hf backend (default 0: OMP_NUM_THREADS if set, else this "
        "machine's physical cores); "
        "the value used is logged as the num_threads.resolved param",
    )
    parser.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the chosen backend (repeatable, or comma-separated k=v,k=v); "
        f"`sommelier-mlflow backends` explains each. {_options_help()}",
    )
    aliases = parser.add_argument_group(
        "server backend flags (aliases of --backend-option KEY=VALUE, kept for one release)"
    )
    for option in OPTION_ALIASES:
        aliases.add_argument(
            f"--{option.replace('_', '-')}",
            dest=option,
            default=None,
            metavar=option.upper(),
            help=f"same as --backend-option {option}=...",
        )


def _options_help() -> str:
    """Each listed backend's options as ``name (type, default)``, for ``--help``."""
    from sommelier_mlflow.generation import backend_names, backend_spec

    parts = []
    for name in backend_names(listed_only=True):
        described = backend_spec(name).describe()
        listed = ", ".join(f"{o.name} ({o.type}, {o.default})" for o in described) or "none"
        parts.append(f"{name}: {listed}")
    # argparse formats help with %-interpolation.
    return "; ".join(parts).replace("%", "%%") + "."


def _add_slice_by(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--slice-by FIELD``: repeatable; each value may also be comma-separated."""
    parser.add_argument("--slice-by", action="append", default=[], metavar="FIELD", help=help_text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; exposed so the docs and tests can read its help."""
    from sommelier_mlflow.cli._errors import CommandParser

    parser = CommandParser(
        prog="sommelier-mlflow",
        description="Strict tool-call evaluation of a base model vs its LoRA adapter, in MLflow.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _command_prepare(sub)
    _command_import_bfcl(sub)
    _command_format(sub)
    _command_evaluate(sub)
    _command_score(sub)
    _command_compare(sub)
    _command_main(sub)
    _command_claims(sub)
    _command_show(sub)
    _command_dataset(sub)
    _command_backends(sub)
    return parser


def _command_prepare(sub: Any) -> None:
    """The ``prepare`` subcommand (raw rows -> splits)."""
    prepare = sub.add_parser("prepare", help="raw xlam-shaped rows -> train/validation/test splits")
    prepare.add_argument("--raw", required=True, help="raw JSONL (query/tools/answers strings)")
    prepare.add_argument("--out", required=True, help="output folder for the splits")
    prepare.add_argument("--seed", type=_bounded_int(0, _MAX_SEED), default=0)
    prepare.add_argument("--train", type=_nonneg_int, required=True, help="train roots")
    prepare.add_argument("--validation", type=_nonneg_int, required=True, help="validation roots")
    prepare.add_argument("--test", type=_nonneg_int, required=True, help="test roots")
    _switch(
        prepare,
        "--keep-multi-call",
        "keep rows answered by several calls or none (abstention); score with --scoring calls",
    )
    _add_mlflow_flag(prepare)


def _command_import_bfcl(sub: Any) -> None:
    """The ``import-bfcl`` subcommand (BFCL v4 -> a test split)."""
    bfcl = sub.add_parser(
        "import-bfcl",
        help="BFCL v4 questions and possible answers -> a test split for --scoring bfcl",
    )
    bfcl.add_argument(
        "data_dir",
        metavar="DATA_DIR",
        help="BFCL v4's data folder: bfcl_eval/data of `pip install --no-deps bfcl-eval`",
    )
    bfcl.add_argument(
        "--category",
        dest="categories",
        nargs="+",
        action="extend",
        default=[],
        metavar="C",
        help="categories to import (repeatable, or comma-separated); default: simple_python, "
        "multiple, parallel, parallel_multiple, irrelevance",
    )
    bfcl.add_argument(
        "--out", required=True, help="the split to write; its drop summary goes beside it"
    )
    _add_mlflow_flag(bfcl)


def _command_format(sub: Any) -> None:
    """The ``format`` subcommand (render prompts without generating)."""
    fmt = sub.add_parser(
        "format", help="render a split's prompts with a tokenizer, no generation (for serving)"
    )
    _add_test_split(fmt, "the split to render")
    fmt.add_argument("--tokenizer", required=True, help="tokenizer directory or hub id")
    fmt.add_argument("--tokenizer-revision", default=None, help="pinned hub revision of it")
    _add_trust_remote_code(fmt, "tokenizer")
    fmt.add_argument("--out", required=True, help="the formatted split to write (.jsonl)")
    _add_slice_by(
        fmt,
        "row fields to keep for slicing later (repeatable or comma-separated), e.g. "
        "category for a split from import-bfcl",
    )
    _add_prompt_format(fmt)
    _add_mlflow_flag(fmt)


def _command_evaluate(sub: Any) -> None:
    """The ``evaluate`` subcommand (one arm: generate and score)."""
    evaluate = sub.add_parser("evaluate", help="generate greedily for one arm and score it")
    _add_test_split(evaluate)
    _add_model(evaluate, required=False)  # a models:/ adapter names its base
    evaluate.add_argument("--model-kind", required=True, choices=["base", "adapter"])
    evaluate.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: auto)")
    _add_generation(evaluate, batch_size=8)
    _add_trust_remote_code(evaluate, "model")
    evaluate.add_argument("--out", default=None, help="output folder (default: derived, resumable)")
    _add_scoring_run(evaluate)


def _command_score(sub: Any) -> None:
    """The ``score`` subcommand (score existing outputs)."""
    score = sub.add_parser("score", help="score outputs that already exist, no model needed")
    _add_test_split(score, "the formatted test split")
    score.add_argument(
        "--generations", default=None, help="generations/ folder or one file (this package's)"
    )
    score.add_argument(
        "--precomputed",
        default=None,
        help="outputs produced elsewhere: JSONL, CSV or Parquet with example_id and raw_text "
        "(needs --model and the decoding it used: --max-new-tokens, --batch-size)",
    )
    score.add_argument("--max-new-tokens", type=_optional_int, default=None)
    score.add_argument("--batch-size", type=_optional_int, default=None)
    score.add_argument(
        "--backend",
        default=None,
        help="what produced the precomputed outputs (hf, server, ...); recorded as declared",
    )
    score.add_argument("--model-kind", required=True, choices=["base", "adapter"])
    _add_model(score, required=False)
    score.add_argument("--out", default=None)
    _add_scoring_run(score)


def _command_compare(sub: Any) -> None:
    """The ``compare`` subcommand (gate and compare two arms)."""
    compare = sub.add_parser("compare", help="gate and compare a base and an adapter evaluation")
    source = compare.add_mutually_exclusive_group(required=True)
    source.add_argument("--base-report", help="base arm evaluation_report.json")
    source.add_argument("--base-run-id", help="MLflow run id of the base arm")
    from sommelier_mlflow.cli._compare import add_compare_arguments

    add_compare_arguments(compare)
    compare.add_argument("--out", default=None)
    _add_stats(compare)
    _add_claims(compare)
    _add_mlflow_flag(compare)


def _command_main(sub: Any) -> None:
    """The ``main`` subcommand (base arm + adapter arm + comparison)."""
    main_parser = sub.add_parser("main", help="base arm + adapter arm + comparison on one split")
    _add_test_split(main_parser, "formatted or prepared test split")
    main_parser.add_argument(
        "--model",
        default=None,
        help="base model: local path, hub id or models:/ URI (default: the base that a "
        "registered --adapter names)",
    )
    main_parser.add_argument(
        "--adapter",
        required=True,
        help="peft LoRA adapter directory, or models:/<name>/<version> | models:/<name>@<alias>",
    )
    main_parser.add_argument("--revision", default=None)
    main_parser.add_argument(
        "--drop-summary",
        default=None,
        help="the drop_summary.json `prepare` wrote for this split, logged with the comparison",
    )
    _add_generation(main_parser, batch_size=16)
    main_parser.add_argument(
        "--parallel-arms",
        default="auto",
        choices=["auto", "true", "false"],
        help="generate the base and adapter arms at the same time, each in its own process "
        "with half the CPU threads (recorded in each arm's runtime). auto: on for the hf "
        "backend with at least 2 threads and a local base model whose weights are under 1 GiB "
        "(two copies in memory); the default",
    )
    main_parser.add_argument("--out", default=None)
    _add_scoring_run(main_parser, claims=True)


def _command_claims(sub: Any) -> None:
    """The ``claims`` subcommand (preregister claims)."""
    claims = sub.add_parser("claims", help="preregister claims before any result exists")
    claims_sub = claims.add_subparsers(dest="claims_command", required=True)
    register = claims_sub.add_parser(
        "register", help="validate a claims file and log it with its SHA-256 to MLflow"
    )
    register.add_argument("claims_file", help="the claims file (sommelier_mlflow.claims.v1)")
    register.set_defaults(mlflow=True)  # a registration exists only in MLflow


def _command_show(sub: Any) -> None:
    """The ``show`` subcommand (print a logged summary)."""
    show = sub.add_parser(
        "show", help="print a logged arm's or comparison's summary table from its MLflow run"
    )
    show.add_argument("run_id", help="the run of an arm (base/adapter) or of a comparison")
    show.add_argument(
        "--tracking-uri", default=None, help="tracking store (default: MLFLOW_TRACKING_URI)"
    )
    show.set_defaults(mlflow=False)  # reads only; probes the store it is pointed at itself


def _command_dataset(sub: Any) -> None:
    """The ``dataset`` subcommand (MLflow evaluation datasets)."""
    dataset = sub.add_parser("dataset", help="MLflow evaluation datasets of test splits")
    dataset_sub = dataset.add_subparsers(dest="dataset_command", required=True)
    push = dataset_sub.add_parser(
        "push", help="write a split file into a new MLflow evaluation dataset"
    )
    push.add_argument("split", metavar="SPLIT", help="the test split to write (.jsonl)")
    push.add_argument("--name", required=True, help="the new dataset's name")
    _switch(
        push, "--replace", "if datasets of that name exist, delete them once the new one is written"
    )
    _add_slice_by(
        push,
        "row fields to keep as record tags for --slice-by later (repeatable or comma-separated)",
    )
    push.set_defaults(mlflow=False)  # writes a dataset, logs no run


def _command_backends(sub: Any) -> None:
    """The ``backends`` subcommand (list the backends)."""
    backends = sub.add_parser(
        "backends", help="list the generation backends and each one's options (--backend-option)"
    )
    backends.set_defaults(mlflow=False)


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
    result = import_bfcl(args.data_dir, args.out, categories=[name for name in named if name])
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
    return [part.strip() for item in values for part in item.split(",") if part.strip()]


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
    for notice in format_notices(mismatch, report.format_hint):
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
