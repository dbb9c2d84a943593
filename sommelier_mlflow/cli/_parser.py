"""The ``sommelier-mlflow`` argument parser: every command's flags, declared once.

The handlers that act on the parsed flags live in
:mod:`sommelier_mlflow.cli._commands`; :mod:`sommelier_mlflow.cli._errors`
reads this parser's actions to name the flag a misspelled one was meant to be.
Heavy or plugin-dependent choices (backends, scoring modes, output formats) are
looked up when the parser is built, so plugins registered before then appear.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

__all__ = ["RENAMED_FLAGS", "build_parser"]

#: Flags renamed to the dashed form of their MLproject parameter (issue 31), old
#: spelling to new. The MLproject's names won because ``mlflow run`` logs them as
#: run params, and a renamed param would split every run history in two; each old
#: flag stays an alias of its new one for one release (README, "Changes").
RENAMED_FLAGS: Final = {
    "--raw": "--raw-data",
    "--train": "--train-size",
    "--validation": "--validation-size",
    "--test": "--test-size",
    "--category": "--categories",
    "--backend-option": "--backend-options",
}


def _add_renamed(parser: Any, flag: str, **kwargs: Any) -> None:
    """``parser.add_argument(flag, ...)`` that also accepts the flag's old spelling.

    The old one comes from :data:`RENAMED_FLAGS`, so the table the README's
    Changes section is checked against is the one the parser obeys.
    """
    old = [before for before, after in RENAMED_FLAGS.items() if after == flag]
    help_text = kwargs.pop("help", "")
    if old:
        help_text += f" ({', '.join(old)}: its old spelling, accepted for one release)"
    parser.add_argument(flag, *old, help=help_text.strip(), **kwargs)


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
        "the five metrics; calls: zero or more calls, the seven calls metrics; bfcl: BFCL's "
        "AST rules on a split from import-bfcl; or a mode a plugin registers)",
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
    parser.add_argument(
        "--template-date",
        default="",
        metavar="YYYY-MM-DD",
        help="the day the chat template's clock says (strftime_now), for templates that write "
        "today's date with no variable to pin it (gpt-oss; Mistral without a system prompt); "
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
    _add_renamed(
        parser,
        "--backend-options",
        dest="backend_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="options of the chosen backend (repeatable, or comma-separated k=v,k=v); "
        f"`sommelier-mlflow backends` explains each. {_options_help()}",
    )
    aliases = parser.add_argument_group(
        "server backend flags (aliases of --backend-options KEY=VALUE, kept for one release)"
    )
    for option in OPTION_ALIASES:
        aliases.add_argument(
            f"--{option.replace('_', '-')}",
            dest=option,
            default=None,
            metavar=option.upper(),
            help=f"same as --backend-options {option}=...",
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
    _add_renamed(
        prepare,
        "--raw-data",
        dest="raw",
        required=True,
        metavar="PATH",
        help="raw file (xlam: JSONL of query/tools/answers strings; see --input-format)",
    )
    prepare.add_argument("--out", required=True, help="output folder for the splits")
    prepare.add_argument("--seed", type=_bounded_int(0, _MAX_SEED), default=0)
    for split in ("train", "validation", "test"):
        _add_renamed(
            prepare,
            f"--{split}-size",
            dest=split,
            type=_nonneg_int,
            required=True,
            metavar="N",
            help=f"{split} roots (xlam) or conversations",
        )
    _switch(
        prepare,
        "--keep-multi-call",
        "keep rows answered by several calls or none (abstention); score with --scoring calls",
    )
    prepare.add_argument(
        "--input-format",
        default="xlam",
        metavar="NAME",
        help="layout of the raw file: xlam (default), openai, hermes_fc, sharegpt, toolace, "
        "glaive, or a plugin's; conversation formats make every assistant turn an example "
        "and count split sizes in conversations (docs/conversations.md)",
    )
    _switch(
        prepare,
        "--strict",
        "conversation formats: stop (exit 2) at the first drop, naming file, line and message",
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
    _add_renamed(
        bfcl,
        "--categories",
        dest="categories",
        nargs="+",
        action="extend",
        default=[],
        metavar="C",
        help="categories to import (repeatable, or comma-separated); default: simple_python, "
        "multiple, parallel, parallel_multiple, irrelevance; also live_*, multi_turn_*",
    )
    bfcl.add_argument(
        "--out", required=True, help="the split to write; its drop summary goes beside it"
    )
    _switch(
        bfcl,
        "--strict",
        "stop (exit 2) at the first question that would be skipped, naming file, line and reason",
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
    show.add_argument(
        "run_id",
        help="the run of an arm (base/adapter) or of a comparison; or a model: a LoggedModel "
        "id (m-...) or a registry version (models:/NAME/VERSION, models:/NAME@ALIAS)",
    )
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
        "backends", help="list the generation backends and each one's options (--backend-options)"
    )
    backends.set_defaults(mlflow=False)
