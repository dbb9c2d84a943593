"""What each command does, without argument parsing or MLflow.

Every function writes its results to a local output folder first (atomically,
or append-and-resume for generations) so nothing is lost if logging to MLflow
fails afterwards. ``score`` validates everything before it writes anything and
then moves its whole result into place (:func:`staged_folder`), so a refused
or failed run leaves the previous result as it was. Each :class:`ArmOutput`
lists the files its command wrote, which is exactly what gets logged to MLflow.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow._json import (
    JSONDecodeError,
    atomic_write_bytes,
    canonical_json,
    dumps_line,
    loads,
    sha256_text,
    staged_folder,
)
from sommelier_mlflow.data import (
    CALLS_SLICE_FIELD,
    Decoding,
    GenerationRecord,
    ModelIdentity,
    ModelKind,
    TestExample,
    TestSplit,
    check_model_kind,
    check_scoring_mode,
    check_slice_fields,
    format_examples,
    read_generations,
    read_precomputed,
    read_test_split,
    write_test_split,
)
from sommelier_mlflow.errors import (
    ConfigError,
    DataError,
    InputError,
    InvariantViolationError,
)
from sommelier_mlflow.evaluation import (
    EVALUATION_REPORT_FILENAME,
    ClaimsSpec,
    ComparisonArtifacts,
    EvaluationReport,
    RegistrationRecord,
    ScoredRun,
    run_comparison,
    score_run,
    write_evaluation_report,
)
from sommelier_mlflow.toolcalls import DEFAULT_MODE, scoring_modes

if TYPE_CHECKING:
    from sommelier_mlflow.generation import Completion, GenerationBackend

__all__ = [
    "FORMATTED_SPLIT_NAME",
    "USAGE_NAME",
    "ArmOutput",
    "backend_options",
    "compare_report_files",
    "default_out_dir",
    "evaluate_arm",
    "replay_precomputed",
    "resolve_num_threads",
    "score_generations",
    "select_examples",
]

FORMATTED_SPLIT_NAME = "test_split.formatted.jsonl"
#: Per-example ``finish_reason`` and token usage of a served arm, in split order.
USAGE_NAME = "generation_usage.jsonl"


@dataclass(frozen=True)
class ArmOutput:
    """One arm's local results: where they are and what they say."""

    out_dir: Path
    report_path: Path
    report: EvaluationReport
    scored: ScoredRun
    split: TestSplit
    split_path: Path
    #: Every file this command wrote for the arm (under ``out_dir``), and nothing else.
    files: tuple[Path, ...] = ()
    #: Generation throughput of this process (logged as ``generation/<name>``).
    throughput: Mapping[str, float] = field(default_factory=dict)
    #: Params describing how the outputs were produced (a served model's identity).
    backend_params: Mapping[str, object] = field(default_factory=dict)


def default_out_dir(root: str | os.PathLike[str], label: str, **identity: object) -> Path:
    """A stable folder per distinct job, so re-running a command resumes it.

    The same inputs map to the same folder (and generation resumes there);
    different inputs never share one, so a resume can never mix two runs.
    """
    digest = sha256_text(canonical_json({k: str(v) for k, v in identity.items()}))[:12]
    return Path(root) / f"{label}-{digest}"


def generation_job(args: argparse.Namespace) -> dict[str, object]:
    """The generation flags that name a run's resume folder (with the split and models).

    ``evaluate`` and ``main`` generate alike, so the same flags must send them
    to a folder of the same identity; they are listed once here.
    """
    return {
        "revision": args.revision,
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
        "max_examples": args.max_examples,
        "backend": args.backend,
        "served_model": args.served_model,
        "served_adapter": args.served_adapter,
    }


def resolve_num_threads(requested: int) -> int:
    """The thread count to use and log: ``0`` means this machine's physical cores."""
    from sommelier_mlflow.generation import physical_cores

    if type(requested) is not int or requested < 0:
        raise ConfigError(f"num_threads must be >= 0 (0 = physical cores), got {requested!r}")
    return requested or physical_cores()


def select_examples(examples: Sequence[TestExample], max_examples: int) -> list[TestExample]:
    """Keep the first ``max_examples`` roots (file order) and all their translations.

    Translations follow their roots so every language slice keeps matched
    pairs for the gap estimate; ``0`` keeps everything.

    Raises:
        ConfigError: If ``max_examples`` is negative.
    """
    if max_examples < 0:
        raise ConfigError(f"max_examples must be >= 0 (0 = all), got {max_examples}")
    if max_examples == 0:
        return list(examples)
    roots: set[str] = set()
    for example in examples:
        if example.source_example_id is None and len(roots) < max_examples:
            roots.add(example.example_id)
    return [
        example
        for example in examples
        if example.example_id in roots or example.source_example_id in roots
    ]


@dataclass(frozen=True)
class ScoringChoice:
    """The declared scoring mode and slice fields of one command, checked up front.

    Checked before any generation starts, so a split that needs ``--scoring
    calls`` (or lacks a declared slice field) fails in a second, not after
    the model has run.
    """

    mode: str
    slice_by: tuple[str, ...]

    @classmethod
    def of(cls, mode: str, slice_by: Sequence[str]) -> ScoringChoice:
        """Validate the mode and the fields (comma-separated values are split)."""
        if mode not in scoring_modes():
            raise ConfigError(
                f"unknown scoring mode {mode!r}; choose one of {', '.join(scoring_modes())}"
            )
        fields = tuple(
            part.strip() for item in slice_by for part in item.split(",") if part.strip()
        )
        check_slice_fields(fields, scoring=mode)
        return cls(mode, fields)

    def read(self, path: str | os.PathLike[str]) -> TestSplit:
        """Read the split with the declared row fields and check it suits the mode."""
        row_fields = [
            field
            for field in check_slice_fields(self.slice_by, scoring=self.mode)
            if field != CALLS_SLICE_FIELD
        ]
        split = read_test_split(path, slice_by=row_fields)
        check_scoring_mode(split, self.mode)
        return split


def _kind_only(model_kind: str) -> ModelKind:
    return check_model_kind(model_kind, ConfigError)


def _check_kind(
    model_kind: str, adapter: str | None, served_adapter: str | None = None
) -> ModelKind:
    kind = _kind_only(model_kind)
    if kind == "base" and (adapter or served_adapter):
        raise ConfigError(
            "model_kind 'base' evaluates the base model alone: drop the adapter, "
            "or use model_kind 'adapter'"
        )
    if kind == "adapter" and not (adapter or served_adapter):
        raise ConfigError(
            "model_kind 'adapter' needs an adapter: its directory, or the name it is served "
            "under (adapter=...; with the server backend, served_adapter=...)"
        )
    return kind


def _finish_arm(
    out_dir: Path,
    split: TestSplit,
    generations: Sequence[GenerationRecord],
    *,
    model_kind: ModelKind,
    identity: ModelIdentity,
    adapter: dict[str, str] | None,
    decoding: Decoding | None,
    seed: int,
    resamples: int,
    written: Sequence[Path] = (),
    final_dir: Path | None = None,
    scoring: ScoringChoice | None = None,
    progress: bool = False,
) -> ArmOutput:
    """Score, then write the report and the formatted split into ``out_dir``.

    ``written`` are the files already written for this arm (generations, the
    manifest). With ``final_dir``, ``out_dir`` is a staging folder whose files
    will be moved there, and the returned paths already name their final place.
    """
    choice = scoring or ScoringChoice(DEFAULT_MODE, ())
    scored = score_run(
        split,
        generations,
        model_kind=model_kind,
        model_identity=identity,
        adapter=adapter,
        decoding=decoding,
        seed=seed,
        resamples=resamples,
        scoring=choice.mode,
        slice_by=choice.slice_by,
        progress=progress,
    )
    report = EvaluationReport.from_run(scored)
    report_path = write_evaluation_report(out_dir / EVALUATION_REPORT_FILENAME, report)
    split_path = out_dir / FORMATTED_SPLIT_NAME
    if final_dir is not None or not split_path.exists():
        write_test_split(split_path, split.examples)
    files = [*written, report_path, split_path]
    if final_dir is not None:
        files = [final_dir / path.relative_to(out_dir) for path in files]
        report_path, split_path = files[-2], files[-1]
        out_dir = final_dir
    return ArmOutput(out_dir, report_path, report, scored, split, split_path, tuple(files))


def evaluate_arm(
    *,
    test_split: str | os.PathLike[str],
    model: str,
    model_kind: str,
    adapter: str | None = None,
    revision: str | None = None,
    tokenizer: str | None = None,
    tokenizer_revision: str | None = None,
    trust_remote_code: bool = False,
    max_new_tokens: int = 96,
    batch_size: int = 8,
    max_examples: int = 0,
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    resamples: int = 2000,
    device: str | None = None,
    backend: str = "hf",
    num_threads: int | None = None,
    backend_options: Mapping[str, Any] | None = None,
    progress: bool = True,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
) -> ArmOutput:
    """Generate greedily for one arm with a named backend, then score it.

    Re-running with the same ``out_dir`` resumes generation where it stopped.
    The backend's name is recorded in the decoding, so the gate refuses to
    compare arms generated by different backends.
    """
    from sommelier_mlflow.generation import BackendRequest, create_backend

    served_adapter = (backend_options or {}).get("served_adapter") or None
    kind = _check_kind(model_kind, adapter, served_adapter)
    decoding = Decoding(max_new_tokens=max_new_tokens, batch_size=batch_size, backend=backend)
    choice = ScoringChoice.of(scoring, slice_by)
    source = choice.read(test_split)
    examples = select_examples(source.examples, max_examples)
    generator = create_backend(
        backend,
        BackendRequest(
            model=model,
            revision=revision or None,
            tokenizer=tokenizer or None,
            tokenizer_revision=tokenizer_revision or None,
            adapter=adapter if kind == "adapter" else None,
            device=device,
            trust_remote_code=trust_remote_code,
            num_threads=num_threads,
            options=dict(backend_options or {}),
        ),
    )
    formatted = _formatted(examples, generator.tokenizer, backend, test_split)
    split = TestSplit(path=source.path, sha256=source.sha256, examples=tuple(formatted))
    return _generate_and_score(
        split, generator, kind, decoding, Path(out_dir), seed, resamples, progress, scoring=choice
    )


def _formatted(
    examples: Sequence[TestExample], tokenizer: Any, backend: str, test_split: object
) -> list[TestExample]:
    """Render prompts with the backend's tokenizer, or insist they are already there."""
    if tokenizer is not None:
        return format_examples(examples, tokenizer)
    missing = [example.example_id for example in examples if example.prompt_text is None]
    if missing:
        raise InputError(
            f"{test_split}: the {backend} backend has no chat template to render prompts with, "
            f"and {len(missing)} examples (first {missing[0]!r}) have none; pass a formatted "
            "split (the test_split.formatted.jsonl an evaluate run writes)"
        )
    return list(examples)


def _generate_and_score(
    split: TestSplit,
    generator: GenerationBackend,
    kind: ModelKind,
    decoding: Decoding,
    target: Path,
    seed: int,
    resamples: int,
    progress: bool,
    final_dir: Path | None = None,
    scoring: ScoringChoice | None = None,
) -> ArmOutput:
    from sommelier_mlflow.generation import MANIFEST_NAME, SupportsRunRecord, run_generation

    recorder = generator if isinstance(generator, SupportsRunRecord) else None
    if recorder is not None:
        recorder.record_usage_to(target / USAGE_NAME)
    meter = _BatchMeter()
    paths = run_generation(
        split.examples,
        generator,
        decoding=decoding,
        model_kind=kind,
        out_dir=target,
        progress=progress,
        on_batch=meter.add,
    )
    generations = [record for path in paths.values() for record in read_generations(path)]
    manifest = target / MANIFEST_NAME
    usage = target / USAGE_NAME
    if recorder is not None:
        _compact_usage(usage, split.examples)
    arm = _finish_arm(
        target,
        split,
        generations,
        model_kind=kind,
        identity=generator.model_identity(),
        adapter=generator.adapter_info(),
        decoding=decoding,
        seed=seed,
        resamples=resamples,
        written=[*paths.values(), *(path for path in (manifest, usage) if path.is_file())],
        final_dir=final_dir,
        scoring=scoring,
        progress=progress,
    )
    if recorder is None:
        return replace(arm, throughput=meter.metrics())
    # A served backend times its own requests and counts tokens from the server's usage.
    return replace(arm, throughput=recorder.run_metrics(), backend_params=recorder.run_params())


class _BatchMeter:
    """Throughput of the batches this process generated, for any backend.

    Latency is per runner batch; generated tokens are counted only when the
    backend reports them for every completion (``generate_details``).
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.prompts = 0
        self.tokens: int | None = 0

    def add(self, completions: Sequence[Completion], seconds: float) -> None:
        self.seconds.append(seconds)
        self.prompts += len(completions)
        counts = [completion.completion_tokens for completion in completions]
        if self.tokens is None or any(count is None for count in counts):
            self.tokens = None
        else:
            self.tokens += sum(count for count in counts if count is not None)

    def metrics(self) -> dict[str, float]:
        busy = sum(self.seconds)
        if not self.prompts or busy <= 0:
            return {}
        ordered = sorted(self.seconds)
        metrics = {
            "prompts_per_s": self.prompts / busy,
            "latency_p50_s": ordered[max(1, math.ceil(0.5 * len(ordered))) - 1],
            "latency_p95_s": ordered[max(1, math.ceil(0.95 * len(ordered))) - 1],
            "prompts": float(self.prompts),
        }
        if self.tokens is not None:
            metrics["tokens_per_s"] = self.tokens / busy
            metrics["completion_tokens"] = float(self.tokens)
        return metrics


def _compact_usage(path: Path, examples: Sequence[TestExample]) -> None:
    """Rewrite the appended per-request log as one line per example, in split order.

    A resumed run appends again for the batch it regenerated; the last answer
    for a prompt wins, which is the one whose text was kept. A torn last line
    (a killed process) is dropped.
    """
    if not path.is_file():
        return
    lines = path.read_bytes().split(b"\n")
    latest: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except JSONDecodeError:
            if number == len(lines):
                continue
            raise DataError("not a JSON line", path=str(path), line=number) from None
        if isinstance(row, dict) and isinstance(row.get("prompt_sha256"), str):
            latest[row["prompt_sha256"]] = row
    out = []
    for example in examples:
        row = latest.get(example.prompt_sha256 or "")
        if row is not None:
            entry: dict[str, Any] = {
                "example_id": example.example_id,
                "language": example.language,
            }
            entry.update({key: value for key, value in row.items() if key not in entry})
            out.append(dumps_line(entry))
    atomic_write_bytes(path, b"".join(out))


def _generation_files(generations: Path) -> list[Path]:
    if generations.is_file():
        return [generations]
    folder = generations / "generations" if (generations / "generations").is_dir() else generations
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise InputError(
            f"no generation files (*.jsonl) in {folder}: pass a generations/ folder or one file"
        )
    return files


def score_generations(
    *,
    test_split: str | os.PathLike[str],
    generations: str | os.PathLike[str],
    model_kind: str,
    out_dir: str | os.PathLike[str],
    model: str | None = None,
    revision: str | None = None,
    tokenizer: str | None = None,
    tokenizer_revision: str | None = None,
    adapter: str | None = None,
    seed: int = 0,
    resamples: int = 2000,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
) -> ArmOutput:
    """Re-score existing generations against a formatted split, without any model.

    The model identity comes from ``model``/``revision``/``tokenizer``/``adapter``
    when given, else from the ``generation_manifest.json`` the generation run
    wrote. Without either, the identity cannot be proven and scoring refuses.
    """
    kind = _check_kind(model_kind, adapter) if model else _kind_only(model_kind)
    choice = ScoringChoice.of(scoring, slice_by)
    split = choice.read(test_split)
    source = Path(generations)
    files = _generation_files(source)
    records = [record for path in files for record in read_generations(path)]
    target = Path(out_dir)
    from sommelier_mlflow.generation import (
        declared_adapter,
        declared_identity,
        find_recorded_identity,
    )

    adapter_info: dict[str, str] | None
    if model:
        identity = declared_identity(model, revision, tokenizer, tokenizer_revision)
        adapter_info = declared_adapter(adapter)
    else:
        recorded = find_recorded_identity(source)
        if recorded is None:
            raise ConfigError(
                "the model identity of these generations is unknown: pass model=... "
                "(and revision/tokenizer/adapter), or keep generation_manifest.json next to them"
            )
        identity, adapter_info = recorded.model_identity, recorded.adapter
    # Everything is written to a staging folder and moved into place only once
    # scoring passed: generations that fail a check (exit 5) must not replace
    # the ones a previous run scored.
    with staged_folder(target) as stage:
        copies = []
        for path in files:  # the arm's folder holds what it scored, as after `evaluate`
            copy = stage / "generations" / path.name
            atomic_write_bytes(copy, path.read_bytes())
            copies.append(copy)
        arm = _finish_arm(
            stage,
            split,
            records,
            model_kind=kind,
            identity=identity,
            adapter=adapter_info,
            decoding=None,
            seed=seed,
            resamples=resamples,
            written=copies,
            final_dir=target,
            scoring=choice,
            progress=progress,
        )
    return arm


def replay_precomputed(
    *,
    test_split: str | os.PathLike[str],
    precomputed: str | os.PathLike[str],
    model_kind: str,
    model: str,
    max_new_tokens: int,
    batch_size: int,
    out_dir: str | os.PathLike[str],
    revision: str | None = None,
    tokenizer: str | None = None,
    tokenizer_revision: str | None = None,
    adapter: str | None = None,
    backend: str | None = None,
    seed: int = 0,
    resamples: int = 2000,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
) -> ArmOutput:
    """Score completions produced elsewhere (``example_id`` + ``raw_text`` rows).

    They go through the same runner as live generation (a replay backend keyed
    by each example's stored prompt), so the records, the digests and the
    resume guarantees are identical. The producer's decoding cannot be read
    from the file, so it is declared here and recorded as declared: the
    maximum new tokens, the batch size and, when given, the backend that
    decoded (``hf``, ``server``...), which the gate then compares like a
    measured one. ``adapter`` may be the name an adapter was served under.

    Raises:
        InputError: A row names an example the split does not have, or an
            example has no completion.
        InvariantViolationError: A row's language disagrees with its example.
    """
    from sommelier_mlflow.generation import BackendRequest, create_backend

    kind = _check_kind(model_kind, adapter)
    # Replaying is transport, not the engine that decoded: the decoding (backend
    # included, when the producer declares it) is the producer's, as declared.
    decoding = Decoding(
        max_new_tokens=max_new_tokens, batch_size=batch_size, backend=backend or None
    )
    choice = ScoringChoice.of(scoring, slice_by)
    split = choice.read(test_split)
    by_id = split.by_id()
    outputs: dict[str, str] = {}
    given: set[str] = set()
    for row in read_precomputed(precomputed):
        given.add(row.example_id)
        example = by_id.get(row.example_id)
        if example is None:
            raise InputError(f"{precomputed}: example_id {row.example_id!r} is not in the split")
        if row.language is not None and row.language != example.language:
            raise InvariantViolationError(
                f"{precomputed}: {row.example_id!r} claims language {row.language!r} but the "
                f"split says {example.language!r}"
            )
        if example.prompt_text is None:
            raise InputError(f"{test_split} is not formatted: score needs the formatted split")
        outputs[example.prompt_text] = row.raw_text
    missing = [example.example_id for example in split.examples if example.example_id not in given]
    if missing:
        raise InputError(
            f"{precomputed}: no row for example_id {missing[0]!r}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "; supply one {example_id, raw_text} row for every example of the split"
        )
    generator = create_backend(
        "replay",
        BackendRequest(
            model=model,
            revision=revision or None,
            tokenizer=tokenizer or None,
            tokenizer_revision=tokenizer_revision or None,
            adapter=adapter or None,
            options={"outputs": outputs, "name": Path(precomputed).name},
        ),
    )
    # Replaying is cheap, so it runs in a staging folder: a refused replay
    # leaves the output folder exactly as it was.
    with staged_folder(out_dir) as stage:
        arm = _generate_and_score(
            split,
            generator,
            kind,
            decoding,
            stage,
            seed,
            resamples,
            progress,
            Path(out_dir),
            scoring=choice,
        )
    return arm


def compare_report_files(
    base_report: str | os.PathLike[str],
    adapter_report: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    resamples: int = 2000,
    claims: ClaimsSpec | None = None,
    registration: RegistrationRecord | None = None,
) -> ComparisonArtifacts:
    """Gate and compare two evaluation reports; files are written only if the gate passes."""
    return run_comparison(
        base_report,
        adapter_report,
        out_dir,
        seed=seed,
        resamples=resamples,
        claims=claims,
        registration=registration,
    )


def backend_options(args: argparse.Namespace, model_kind: str) -> dict[str, object]:
    """The ``server`` backend's options from the flags (empty for other backends).

    ``served_adapter`` goes to the adapter arm only, so ``main`` can pass one
    set of flags for both arms.
    """
    if args.backend != "server":
        for flag in ("base_url", "served_model", "served_adapter"):
            if getattr(args, flag):
                raise ConfigError(
                    f"--{flag.replace('_', '-')} applies to --backend server only "
                    f"(this run uses --backend {args.backend})"
                )
        return {}
    return {
        "base_url": args.base_url,
        "served_model": args.served_model,
        "served_adapter": args.served_adapter if model_kind == "adapter" else "",
        "concurrency": args.concurrency,
        "request_timeout": args.request_timeout,
        "api_key_env": args.api_key_env,
    }
