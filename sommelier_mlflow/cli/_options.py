"""What a command's flags declare, read once from ``args`` and checked there.

The commands share their flags (``evaluate`` and ``main`` generate alike, all
arms score alike), so each group of flags becomes one frozen object here
and travels whole through :mod:`sommelier_mlflow.cli._pipeline`: a flag is
read in one place, and an invalid one fails before any model loads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypedDict

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import (
    DEFAULT_PROMPT_FORMAT,
    Decoding,
    check_model_kind,
    check_scoring_mode,
    check_slice_fields,
    prompt_format,
    read_chat_template_kwargs,
    read_template_date,
    read_test_split,
    slice_field_names,
)
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.generation import BackendOptions, BackendRequest, NoOptions, backend_spec
from sommelier_mlflow.toolcalls import DEFAULT_MODE, JSON_FORMAT, output_format, scoring_mode

if TYPE_CHECKING:
    from sommelier_mlflow.data import ModelKind, TestSplit

__all__ = [
    "DEFAULT_OUT",
    "default_out_dir",
    "out_folder",
    "generation_job",
    "split_identity",
    "read_split",
    "resolve_num_threads",
    "progress_wanted",
    "OPTION_ALIASES",
    "backend_options",
    "ScoringOptions",
    "DeclaredModel",
    "SYSTEM_PROMPT_ARTIFACT",
    "given_path",
    "PromptOptions",
    "GenerationPlan",
]

#: Where commands write when ``--out`` is not given (one folder per distinct job).
DEFAULT_OUT = "sommelier_out"


def default_out_dir(root: str | os.PathLike[str], label: str, **identity: object) -> Path:
    """A stable folder per distinct job, so re-running a command resumes it.

    The same inputs map to the same folder (and generation resumes there);
    different inputs never share one, so a resume can never mix two runs.
    """
    digest = sha256_text(canonical_json({k: str(v) for k, v in identity.items()}))[:12]
    return Path(root) / f"{label}-{digest}"


def out_folder(args: argparse.Namespace, label: str, **identity: object) -> Path:
    """``--out``, or the resumable folder under :data:`DEFAULT_OUT` that ``identity`` names."""
    if args.out:
        return Path(args.out)
    return default_out_dir(DEFAULT_OUT, label, **identity)


def generation_job(args: argparse.Namespace) -> dict[str, object]:
    """The flags that name a generating run's resume folder.

    ``evaluate`` and ``main`` generate alike, so the same flags must send them
    to a folder of the same identity; they are listed once here. Of the
    backend's options, those it says decide the outputs count.
    """
    model = ("model", "adapter", "revision")
    decoding = ("max_new_tokens", "batch_size", "max_examples", "backend")
    job: dict[str, object] = {name: getattr(args, name) for name in (*model, *decoding)}
    # Folders named before options became generic keep their names: the two
    # server keys stay, empty for a backend without them.
    identity = {"served_model": "", "served_adapter": "", **backend_options(args).job_identity()}
    job.update({key: "" if value is None else value for key, value in identity.items()})
    job["split"] = split_identity(args.test_split)
    if args.max_examples:
        # The sample is drawn with the seed: another seed is another job (all rows: no seed).
        job["seed"] = args.seed
    prompt = PromptOptions.from_args(args)
    if prompt.prompt_format != DEFAULT_PROMPT_FORMAT or prompt.system_prompt:
        # Other prompts are another job; the default keeps existing folders' names.
        job["prompt_format"] = prompt.prompt_format
        job["system_prompt"] = prompt.system_prompt
    if prompt.chat_template_kwargs:
        job["chat_template_kwargs"] = canonical_json(prompt.chat_template_kwargs)
    if prompt.template_date:
        job["template_date"] = prompt.template_date  # another day's prompts: another job
    return job


def split_identity(test_split: str) -> object:
    """What names a ``--test-split`` in an output folder's identity.

    A file by its absolute path (the same file from another directory is the
    same job); an MLflow evaluation dataset by its reference as given.
    """
    from sommelier_mlflow.integration import is_dataset_reference

    return test_split if is_dataset_reference(test_split) else Path(test_split).resolve()


def read_split(test_split: str, slice_by: Sequence[str] = ()) -> TestSplit:
    """Read ``--test-split``: a split file, or ``mlflow-dataset:<name or id>``.

    Both are held to the same row checks; a dataset's name, id and digest
    travel with the split into the report.
    """
    from sommelier_mlflow.integration import is_dataset_reference, read_dataset_split

    if is_dataset_reference(test_split):
        return read_dataset_split(test_split, slice_by=slice_by)
    return read_test_split(test_split, slice_by=slice_by)


def resolve_num_threads(requested: int) -> int:
    """The thread count to use and log: ``0`` means ``OMP_NUM_THREADS``, else the physical cores.

    ``OMP_NUM_THREADS`` is how a machine's owner shares its cores out (a
    scheduler, a container, several jobs side by side), and torch honours it
    by default; overriding it with every core would oversubscribe exactly the
    machines that set it, where idle OpenMP threads spin and a small model
    decodes several times slower.

    Raises:
        ConfigError: A negative count, or an ``OMP_NUM_THREADS`` that is not a
            positive integer while ``0`` asks for it.
    """
    from sommelier_mlflow.generation import physical_cores

    if type(requested) is not int or requested < 0:
        raise ConfigError(f"num_threads must be >= 0 (0 = physical cores), got {requested!r}")
    if requested:
        return requested
    exported = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not exported:
        return physical_cores()
    if not exported.isdigit() or int(exported) == 0:
        raise ConfigError(
            f"OMP_NUM_THREADS is {exported!r}, not a positive integer; fix or unset it, or "
            "pass --num-threads N"
        )
    return int(exported)


def progress_wanted(args: argparse.Namespace) -> bool:
    """Progress bars on a terminal, or anywhere with ``--progress`` (CI logs stay quiet)."""
    return bool(getattr(args, "progress", False) or sys.stderr.isatty())


#: Flags kept for one release as aliases of ``--backend-options NAME=VALUE`` (the
#: server backend's options before options became generic), by option name.
OPTION_ALIASES = (
    "base_url",
    "served_model",
    "served_adapter",
    "concurrency",
    "request_timeout",
    "api_key_env",
)


def _given_backend_options(args: argparse.Namespace) -> dict[str, str]:
    """``--backend-options KEY=VALUE`` pairs and the alias flags, as one mapping of strings.

    Each ``--backend-options`` may hold several comma-separated pairs (the
    MLproject's ``backend_options`` is one such string); an empty value or
    flag counts as not given, as MLflow passes ``""`` for a parameter left unset.

    Raises:
        ConfigError: A pair without ``=``, a key given twice with different
            values, or an alias flag that disagrees with ``--backend-options``.
    """
    options: dict[str, str] = {}
    for item in getattr(args, "backend_option", None) or []:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, equals, value = (part.strip() for part in pair.partition("="))
            if not equals or not key.isidentifier():
                raise ConfigError(f"--backend-options takes KEY=VALUE (or k=v,k=v), got {pair!r}")
            if options.get(key, value) != value:
                raise ConfigError(
                    f"--backend-options {key} is given twice: {options[key]!r}, {value!r}"
                )
            options[key] = value
    for key in OPTION_ALIASES:
        value = getattr(args, key, None)
        if value is None or value == "":
            continue
        if options.get(key, str(value)) != str(value):
            raise ConfigError(
                f"--{key.replace('_', '-')} {value} disagrees with --backend-options "
                f"{key}={options[key]}; give it once"
            )
        options[key] = str(value)
    return options


def backend_options(args: argparse.Namespace) -> BackendOptions:
    """The chosen backend's options from the flags, checked by its options model.

    Raises:
        ConfigError: An option the backend does not take, or a bad value.
    """
    options: BackendOptions = backend_spec(args.backend).parse_options(_given_backend_options(args))
    return options


class _RunKeywords(TypedDict):
    """The keywords of :func:`~sommelier_mlflow.evaluation.score_run` a command chooses."""

    seed: int
    resamples: int
    scoring: str
    slice_by: Sequence[str]
    progress: bool
    output_format: str


@dataclass(frozen=True)
class ScoringOptions:
    """How one command scores its arms: the mode, the output format, the slices, the bootstrap.

    Checked on construction, so a split that needs ``--scoring calls`` (or
    lacks a declared slice field, or names an unknown format) fails in a
    second, not after the model has run. Comma-separated slice fields are
    split into one field each.
    """

    mode: str = DEFAULT_MODE
    slice_by: tuple[str, ...] = ()
    seed: int = 0
    resamples: int = 2000
    progress: bool = False
    output_format: str = JSON_FORMAT

    def __post_init__(self) -> None:
        scoring_mode(self.mode)  # exit 2 listing the registered modes
        output_format(self.output_format)  # exit 2 listing the registered formats
        fields = tuple(slice_field_names(self.slice_by))
        check_slice_fields(fields, scoring=self.mode)
        object.__setattr__(self, "slice_by", fields)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ScoringOptions:
        """The options of a command's ``--scoring``, ``--slice-by`` and statistics flags."""
        return cls(
            args.scoring,
            tuple(args.slice_by),
            args.seed,
            args.resamples,
            progress_wanted(args),
            args.output_format,
        )

    def read(self, test_split: str) -> TestSplit:
        """Read the split (a file or a dataset) with the declared row fields; check the mode."""
        derived = scoring_mode(self.mode).derived_slices  # computed from gold, not read
        row_fields = [
            field
            for field in check_slice_fields(self.slice_by, scoring=self.mode)
            if field not in derived
        ]
        split = read_split(test_split, row_fields)
        check_scoring_mode(split, self.mode)
        return split

    def run_keywords(self) -> _RunKeywords:
        """These options as the scoring keywords of ``score_run`` (``mode`` is its ``scoring``)."""
        return {
            "seed": self.seed,
            "resamples": self.resamples,
            "scoring": self.mode,
            "slice_by": self.slice_by,
            "progress": self.progress,
            "output_format": self.output_format,
        }


@dataclass(frozen=True)
class DeclaredModel:
    """An arm's kind and the model it is declared to be, as the flags name it.

    The names travel as the generation layer's :class:`BackendRequest`, the
    one shape of "what the user asked for", so loading a model, replaying
    outputs and re-scoring generations read the declaration alike. Without
    a model (re-scoring generations whose manifest names it) there is no
    request.
    """

    kind: str
    request: BackendRequest | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, kind: str | None = None) -> DeclaredModel:
        """The declaration in ``args``; a flag the command does not have counts as not given.

        Empty values (an MLproject's "not given") count as not given too.
        """
        kind = kind or args.model_kind
        if not args.model:
            return cls(kind)

        def given(name: str) -> str | None:
            return getattr(args, name, None) or None

        request = BackendRequest(
            args.model,
            revision=given("revision"),
            tokenizer=given("tokenizer"),
            tokenizer_revision=given("tokenizer_revision"),
            adapter=given("adapter"),
        )
        return cls(kind, request)

    @property
    def adapter(self) -> str | None:
        """The declared adapter (a directory, or the name it is served under)."""
        return None if self.request is None else self.request.adapter

    def without_adapter(self) -> DeclaredModel:
        """The same model as a base arm: ``main`` declares one adapter for its adapter arm."""
        if self.request is None:
            return replace(self, kind="base")
        return replace(self, kind="base", request=replace(self.request, adapter=None))

    def checked_kind(self, served_adapter: bool = False) -> ModelKind:
        """The kind, checked against the adapter when a model is declared.

        ``served_adapter`` says that the backend's options name an adapter (a
        served one) in place of a directory. Without a model only the kind
        itself is checked.

        Raises:
            ConfigError: An unknown kind, a base arm with an adapter, or an
                adapter arm without one.
        """
        kind = check_model_kind(self.kind, ConfigError)
        if self.request is None:
            return kind
        has_adapter = bool(self.adapter or served_adapter)
        if kind == "base" and has_adapter:
            raise ConfigError(
                "model_kind 'base' evaluates the base model alone: drop the adapter, "
                "or use model_kind 'adapter'"
            )
        if kind == "adapter" and not has_adapter:
            raise ConfigError(
                "model_kind 'adapter' needs an adapter: its directory, or the name it is served "
                "under (adapter=...; with the server backend, served_adapter=...)"
            )
        return kind

    def required_request(self) -> BackendRequest:
        """The request, for the commands that cannot run without a model.

        Raises:
            ConfigError: No model was declared.
        """
        if self.request is None:
            raise ConfigError("a model is required: pass model=... (a Hub id or a directory)")
        return self.request


#: The file an arm's system prompt is logged to when a param cannot hold it.
SYSTEM_PROMPT_ARTIFACT: Final = "sommelier/system_prompt.txt"


def given_path(path: str | None) -> str | None:
    """A path flag, or ``None`` for "not given": empty, or the MLproject's ``/dev/null``."""
    if path is None or not path.strip() or os.path.abspath(path) == os.devnull:
        return None
    return path


@dataclass(frozen=True)
class PromptOptions:
    """How unformatted rows are rendered: the prompt format, system turn and template variables.

    ``format``, ``evaluate`` and ``main`` take the same flags; they are read
    (the system-prompt file included) and checked here, before a tokenizer
    or model loads.
    """

    prompt_format: str = DEFAULT_PROMPT_FORMAT
    system_prompt: str = ""
    system_prompt_file: str = ""
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    template_date: str = ""

    def __post_init__(self) -> None:
        prompt_format(self.prompt_format)  # exit 2 listing the registered formats, before loading
        checked = read_chat_template_kwargs(self.chat_template_kwargs)
        object.__setattr__(self, "chat_template_kwargs", checked)
        object.__setattr__(self, "template_date", read_template_date(self.template_date) or "")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PromptOptions:
        """The options of the prompt flags: format, system prompt (or its file), template variables.

        Raises:
            ConfigError: Both ``--system-prompt`` and ``--system-prompt-file``,
                bad template variables, or an unknown prompt format (exit 2).
            InputError: A system-prompt file that cannot be read as UTF-8 text,
                or is empty (exit 2).
        """
        system_prompt = getattr(args, "system_prompt", "") or ""
        path = given_path(getattr(args, "system_prompt_file", None))
        if path is not None:
            if system_prompt:
                raise ConfigError(
                    "give the system prompt once: --system-prompt or --system-prompt-file, not both"
                )
            system_prompt = _read_system_prompt(path)
        return cls(
            args.prompt_format,
            system_prompt,
            path or "",
            read_chat_template_kwargs(getattr(args, "chat_template_kwargs", "")),
            getattr(args, "template_date", "") or "",
        )

    def logged(self, param_limit: int) -> tuple[dict[str, object], dict[str, str]]:
        """What an arm's run records of these options: params, and text artifacts by path.

        A system prompt given on the command line is a param as given (the
        value ``mlflow run`` logs too); one read from a file, or too long for
        a param (``param_limit`` characters), is logged whole as
        :data:`SYSTEM_PROMPT_ARTIFACT` with its SHA-256 as a param. (Template
        variables are in the report, whose params log them.)
        """
        params: dict[str, object] = {}
        texts: dict[str, str] = {}
        if self.system_prompt:
            if self.system_prompt_file or len(self.system_prompt) > param_limit:
                texts[SYSTEM_PROMPT_ARTIFACT] = self.system_prompt
                params["system_prompt.sha256"] = sha256_text(self.system_prompt)
            else:
                params["system_prompt"] = self.system_prompt
        return params, texts


def _read_system_prompt(path: str) -> str:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--system-prompt-file {path}: cannot read it as UTF-8 text ({exc}); give a "
            "readable UTF-8 file"
        ) from exc
    if not text:
        raise InputError(
            f"--system-prompt-file {path} is empty; give the system prompt's text, or leave "
            "the flag out for none"
        )
    return text


@dataclass(frozen=True)
class GenerationPlan:
    """How ``evaluate`` and ``main`` generate an arm: the decoding, the examples, the machine.

    The machine fields are those of a :class:`BackendRequest` that say where
    and how the model runs, as opposed to which model it is.
    """

    decoding: Decoding
    max_examples: int = 0
    device: str | None = None
    trust_remote_code: bool = False
    num_threads: int | None = None
    backend_options: BackendOptions = field(default_factory=NoOptions)
    prompt: PromptOptions = field(default_factory=PromptOptions)
    #: Leave out prompts past the model's context (counted, listed, gated) instead of refusing.
    skip_overlong: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace, kind: str) -> GenerationPlan:
        """The plan of the generation flags, for the arm of ``kind``."""
        decoding = Decoding(args.max_new_tokens, args.batch_size, backend=args.backend)
        device = getattr(args, "device", None)
        remote_code = bool(getattr(args, "trust_remote_code", False))
        threads = resolve_num_threads(args.num_threads)
        options = backend_options(args).for_arm(kind)
        return cls(
            decoding,
            args.max_examples,
            device,
            remote_code,
            threads,
            options,
            prompt=PromptOptions.from_args(args),
            skip_overlong=getattr(args, "skip_overlong", "false") == "true",
        )

    def sharing_cores(self) -> GenerationPlan:
        """This plan with half the CPU threads, for an arm that generates beside the other.

        The halved count is the one the arm runs with and logs, both while it
        generates and when the generations are checked and scored afterwards.
        """
        if self.num_threads is None:
            return self
        return replace(self, num_threads=max(1, self.num_threads // 2))

    def request(self, declared: DeclaredModel) -> BackendRequest:
        """The declared model's request, run on this plan's machine."""
        return replace(
            declared.required_request(),
            device=self.device,
            trust_remote_code=self.trust_remote_code,
            num_threads=self.num_threads,
            options=self.backend_options.model_dump(),
        )

    def logged_params(self) -> dict[str, object]:
        """Params an evaluated arm logs beyond its report's.

        The thread count is the resolved one (``0`` asks for the physical
        cores), so it goes under ``num_threads.resolved``: ``mlflow run``
        has already logged the ``num_threads`` it was given, and MLflow
        refuses a second value for a param. The prompt options are logged as
        :meth:`PromptOptions.logged` says, since they are part of every prompt.
        """
        params: dict[str, object] = {
            "max_examples_requested": self.max_examples,
            "num_threads.resolved": self.num_threads,
        }
        params.update(self.prompt.logged(_param_limit())[0])
        return params

    def logged_texts(self) -> dict[str, str]:
        """Text artifacts an evaluated arm logs (by artifact path): a system prompt from a file."""
        return self.prompt.logged(_param_limit())[1]


def _param_limit() -> int:
    """The longest param value the installed MLflow accepts (500 before MLflow 2.x raised it)."""
    try:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH
    except ImportError:  # moved in some future MLflow: assume the old, small limit
        return 500
    return int(MAX_PARAM_VAL_LENGTH)
