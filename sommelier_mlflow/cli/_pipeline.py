"""What each command does, without argument parsing or MLflow.

Every function writes its results to a local output folder first (atomically,
or append-and-resume for generations) so nothing is lost if logging to MLflow
fails afterwards. ``score`` validates everything before it writes anything and
then moves its whole result into place (:func:`staged_folder`), so a refused
or failed run leaves the previous result as it was. Each :class:`ArmOutput`
lists the files its command wrote, which is exactly what gets logged to MLflow.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow._json import (
    JSONDecodeError,
    atomic_write_bytes,
    dumps_line,
    loads,
    staged_folder,
)
from sommelier_mlflow.data import (
    TestSplit,
    check_prompt_formats,
    format_examples,
    is_multi_turn,
    read_generations,
    read_precomputed_outputs,
    sample_examples,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError, InputError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    EVALUATION_REPORT_FILENAME,
    EvaluationReport,
    SkippedOverlong,
    score_run,
    write_evaluation_report,
)
from sommelier_mlflow.toolcalls import output_format

if TYPE_CHECKING:
    from sommelier_mlflow.cli._options import (
        DeclaredModel,
        GenerationPlan,
        PromptOptions,
        ScoringOptions,
    )
    from sommelier_mlflow.data import (
        Decoding,
        GenerationRecord,
        ModelIdentity,
        ModelKind,
        PrecomputedGeneration,
        TestExample,
    )
    from sommelier_mlflow.evaluation import ScoredRun
    from sommelier_mlflow.generation import Completion, GenerationBackend

__all__ = [
    "FORMATTED_SPLIT_NAME",
    "USAGE_NAME",
    "ArmOutput",
    "LoadedArm",
    "evaluate_arm",
    "generate_arm",
    "load_arm",
    "format_split",
    "score_generations",
    "replay_precomputed",
]

FORMATTED_SPLIT_NAME = "test_split.formatted.jsonl"
#: The throughput of the last process that generated into an arm's folder.
THROUGHPUT_NAME = "generation_throughput.json"
THROUGHPUT_SCHEMA = "sommelier_mlflow.generation_throughput.v1"
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


@dataclass(frozen=True)
class LoadedArm:
    """One arm ready to generate: its kind, its loaded backend, its prompts rendered.

    :func:`generate_arm` hands it back so that ``main --parallel-arms`` can
    score the arm it generated in-process without loading the model again.
    Whoever loads an arm closes it (:meth:`close`, or ``with``), also on error:
    its backend lets go of its model then (a shared engine closes with its
    last user).
    """

    kind: ModelKind
    generator: GenerationBackend
    split: TestSplit
    #: How ``max_examples`` drew the rows (``None``: all of them), for the report.
    sample: Mapping[str, Any] | None = None
    #: What ``--skip-overlong`` left out (``None``: skipping was not allowed).
    skipped: SkippedOverlong | None = None
    #: How its prompts were rendered: the execution loop renders every later
    #: step of a multi-turn question the same way (``None``: prompts were given).
    prompt: PromptOptions | None = None

    def close(self) -> None:
        """Close the arm's backend (if it has a ``close()``)."""
        from sommelier_mlflow.generation import close_backend

        close_backend(self.generator)

    def __enter__(self) -> LoadedArm:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True)
class _ArmSource:
    """What produced an arm's generations: the kind, identities and decoding a report records."""

    kind: ModelKind
    identity: ModelIdentity
    adapter: dict[str, str] | None
    decoding: Decoding | None
    sample: Mapping[str, Any] | None = None
    skipped: SkippedOverlong | None = None


def _finish_arm(
    out_dir: Path,
    split: TestSplit,
    generations: Sequence[GenerationRecord],
    source: _ArmSource,
    scoring: ScoringOptions,
    written: Sequence[Path] = (),
    final_dir: Path | None = None,
) -> ArmOutput:
    """Score, then write the report and the formatted split into ``out_dir``.

    ``written`` are the files already written for this arm (generations, the
    manifest). With ``final_dir``, ``out_dir`` is a staging folder whose files
    will be moved there, and the returned paths already name their final place.
    """
    scored = score_run(
        split,
        generations,
        model_kind=source.kind,
        model_identity=source.identity,
        adapter=source.adapter,
        decoding=source.decoding,
        **scoring.run_keywords(),
    )
    report = EvaluationReport.from_run(scored)
    if source.sample is not None or source.skipped is not None:
        identity = replace(report.identity, sample=source.sample, skip_overlong=source.skipped)
        report = replace(report, identity=identity)
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
    source: TestSplit,
    declared: DeclaredModel,
    plan: GenerationPlan,
    out_dir: str | os.PathLike[str],
    scoring: ScoringOptions,
    loaded: LoadedArm | None = None,
) -> ArmOutput:
    """Generate greedily for one arm with a named backend, then score it.

    ``source`` is the split as :meth:`ScoringOptions.read` read it (``main``
    reads it once for both arms). Re-running with the same ``out_dir``
    resumes generation where it stopped. The backend's name is recorded in
    the decoding, so the gate refuses to compare arms generated by different
    backends. ``loaded`` is the arm :func:`load_arm` or :func:`generate_arm`
    already loaded from the same arguments, if any: its caller closes it.
    Otherwise the arm is loaded here and closed before returning, on error too.
    """
    if loaded is not None:
        return _generate_and_score(loaded, plan.decoding, Path(out_dir), scoring)
    with load_arm(source, declared, plan, scoring) as arm:
        return _generate_and_score(arm, plan.decoding, Path(out_dir), scoring)


def generate_arm(
    source: TestSplit,
    declared: DeclaredModel,
    plan: GenerationPlan,
    out_dir: str | os.PathLike[str],
    scoring: ScoringOptions,
) -> LoadedArm:
    """Only the generation half of :func:`evaluate_arm` (``main --parallel-arms``).

    ``main`` runs one arm's generation in a worker process while the other arm
    generates in its own; :func:`evaluate_arm` then finds every generation on
    disk (checked against the same fingerprint) and only scores. The caller
    closes the arm returned; one that fails here is closed before the error.
    """
    arm = load_arm(source, declared, plan, scoring)
    try:
        _generate(arm, _arm_decoding(arm, plan.decoding, scoring), Path(out_dir), scoring)
    except BaseException:
        arm.close()
        raise
    return arm


def load_arm(
    source: TestSplit, declared: DeclaredModel, plan: GenerationPlan, scoring: ScoringOptions
) -> LoadedArm:
    """Build the arm's backend and render its prompts; the caller closes the arm.

    A failure after the backend was built (a template that cannot render, every
    prompt past the context) closes it before the error goes on.
    """
    from sommelier_mlflow.generation import close_backend, create_backend

    kind = declared.checked_kind(plan.backend_options.names_adapter())
    sample = sample_examples(
        source.examples,
        plan.max_examples,
        seed=scoring.seed,
        slice_by=scoring.slice_by,
        scoring=scoring.mode,
    )
    backend = plan.decoding.backend or "hf"
    keep = output_format(scoring.output_format).special_tokens  # e.g. Hermes' <tool_call>
    generator = create_backend(backend, replace(plan.request(declared), keep_special_tokens=keep))
    try:
        tokenizer = generator.tokenizer
        formatted = _formatted(sample.examples, tokenizer, backend, source.path, plan.prompt)
        kept, skipped = _fitting(formatted, generator, plan)
    except BaseException:
        close_backend(generator)
        raise
    split = replace(source, examples=tuple(kept))
    return LoadedArm(kind, generator, split, sample.record, skipped, plan.prompt)


def _fitting(
    examples: Sequence[TestExample], generator: GenerationBackend, plan: GenerationPlan
) -> tuple[list[TestExample], SkippedOverlong | None]:
    """The examples whose prompts fit the model's context, and what was skipped.

    Without ``--skip-overlong`` every example is kept: the runner then
    refuses the run (exit 2) before generating if any prompt does not fit.
    The skip decision is a pure function of the prompts, the tokenizer and
    the backend's limit, so a resumed run skips the very same examples.

    Raises:
        ConfigError: Every prompt is too long, so nothing would be evaluated.
    """
    from sommelier_mlflow.generation import check_context

    if not plan.skip_overlong:
        return list(examples), None
    check = check_context(examples, generator, plan.decoding.max_new_tokens)
    dropped = {example_id for example_id, _ in check.overlong}
    if dropped and len(dropped) == len(examples):
        raise ConfigError(
            f"all {len(examples)} prompts exceed the model's context of {check.context_length} "
            f"tokens with max_new_tokens {plan.decoding.max_new_tokens}, so --skip-overlong "
            "would leave nothing to evaluate; lower --max-new-tokens or use a model with a "
            "longer context"
        )
    kept = [example for example in examples if example.example_id not in dropped]
    skipped = SkippedOverlong(check.context_length, tuple(i for i, _ in check.overlong))
    if dropped:
        print(
            f"skipping {len(dropped)} of {len(examples)} prompts past the model's context of "
            f"{check.context_length} tokens (first: {skipped.example_ids[0]!r}); the report "
            "lists them under identity.skip_overlong",
            file=sys.stderr,
        )
    return kept, skipped


def format_split(
    source: TestSplit,
    tokenizer: Any,
    out: str | os.PathLike[str],
    prompt: PromptOptions,
) -> Path:
    """Render every prompt of ``source`` as ``prompt`` says, without generating.

    The result is a formatted split (prompt text and digest per row) that any
    serving stack can answer; ``score --precomputed`` then checks the answers
    against exactly these prompts.
    """
    formatted = _formatted(source.examples, tokenizer, "format", source.path, prompt)
    return write_test_split(out, formatted)


def _formatted(
    examples: Sequence[TestExample],
    tokenizer: Any,
    backend: str,
    test_split: object,
    prompt: PromptOptions,
) -> list[TestExample]:
    """Render prompts with the backend's tokenizer, or insist they are already there."""
    if tokenizer is not None:
        return format_examples(
            examples,
            tokenizer,
            prompt_format=prompt.prompt_format,
            system_prompt=prompt.system_prompt or None,
            chat_template_kwargs=prompt.chat_template_kwargs,
            template_date=prompt.template_date or None,
        )
    check_prompt_formats(
        examples, prompt.prompt_format, prompt.chat_template_kwargs, prompt.template_date or None
    )
    missing = [example.example_id for example in examples if example.prompt_text is None]
    if missing:
        raise InputError(
            f"{test_split}: the {backend} backend has no chat template to render prompts with, "
            f"and {len(missing)} examples (first {missing[0]!r}) have none; pass a formatted "
            "split (the test_split.formatted.jsonl an evaluate run writes)"
        )
    return list(examples)


def _arm_decoding(arm: LoadedArm, decoding: Decoding, scoring: ScoringOptions) -> Decoding:
    """The arm's decoding, naming the execution loop when its split has multi-turn questions."""
    from sommelier_mlflow.generation import loop_decoding

    return loop_decoding(decoding, arm.split.examples, scoring.output_format)


def _generate_and_score(
    arm: LoadedArm,
    decoding: Decoding,
    target: Path,
    scoring: ScoringOptions,
    final_dir: Path | None = None,
    trajectories: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> ArmOutput:
    from sommelier_mlflow.generation import (
        MANIFEST_NAME,
        MULTI_TURN_JOURNAL_NAME,
        TIMING_NAME,
        TRAJECTORIES_NAME,
        SupportsRunRecord,
    )

    split, generator, kind = arm.split, arm.generator, arm.kind
    decoding = _arm_decoding(arm, decoding, scoring)
    paths, throughput = _generate(arm, decoding, target, scoring, trajectories)
    generations = [record for path in paths.values() for record in read_generations(path)]
    manifest = target / MANIFEST_NAME
    usage = target / USAGE_NAME
    timing = target / TIMING_NAME  # per-batch seconds: the traces' durations
    # Multi-turn questions: every step as played, and the texts to re-score them from.
    played = (target / MULTI_TURN_JOURNAL_NAME, target / TRAJECTORIES_NAME)
    source = _ArmSource(
        kind,
        generator.model_identity(),
        generator.adapter_info(),
        decoding,
        arm.sample,
        arm.skipped,
    )
    logged_beside = (manifest, timing, usage, *played)
    written = [*paths.values(), *(path for path in logged_beside if path.is_file())]
    output = _finish_arm(target, split, generations, source, scoring, written, final_dir)
    if not isinstance(generator, SupportsRunRecord):
        return replace(output, throughput=throughput)
    return replace(output, throughput=throughput, backend_params=generator.run_params())


def _generate(
    arm: LoadedArm,
    decoding: Decoding,
    target: Path,
    scoring: ScoringOptions,
    trajectories: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> tuple[dict[str, Path], dict[str, float]]:
    """Generate (or resume) the arm into ``target``; its slice files and its throughput.

    Multi-turn questions are played by the execution loop, each later step
    rendered as the arm's prompts were and its calls decoded in the arm's
    output format; ``trajectories`` (outputs made elsewhere) replace playing.
    """
    from sommelier_mlflow.generation import MultiTurnLoop, SupportsRunRecord, run_generation

    split, generator, kind = arm.split, arm.generator, arm.kind
    backend, prompt = decoding.backend or "hf", arm.prompt

    def render(examples: Sequence[TestExample]) -> list[TestExample]:
        if prompt is None:  # outputs made elsewhere come as trajectories, never played
            raise InputError(
                f"{split.path}: multi-turn questions are played with the model's tokenizer, and "
                "this arm has none; give their outputs as trajectory rows ({example_id, turns})"
            )
        return _formatted(examples, generator.tokenizer, backend, split.path, prompt)

    loop = MultiTurnLoop(render, scoring.output_format, trajectories)
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
        progress=scoring.progress,
        on_batch=meter.add,
        multi_turn=loop,
    )
    if recorder is not None:
        _compact_usage(target / USAGE_NAME, split.examples)
    # A served backend times its own requests and counts tokens from the server's usage.
    measured = meter.metrics() if recorder is None else recorder.run_metrics()
    return paths, _kept_throughput(target / THROUGHPUT_NAME, measured)


def _kept_throughput(path: Path, measured: Mapping[str, float]) -> dict[str, float]:
    """This process's throughput, or the one recorded by the process that generated.

    A run that finds every generation on disk (a rerun, or ``mlflow run``,
    which always resumes from the project's ``sommelier_out/``) generates
    nothing; it logs the throughput recorded next to the generations, so every
    run of an arm carries the same ``generation/*`` metrics whichever way it ran.
    """
    if measured:
        atomic_write_bytes(path, dumps_line({"schema_version": THROUGHPUT_SCHEMA, **measured}))
        return dict(measured)
    if not path.is_file():
        return {}
    try:
        document = loads(path.read_bytes())
    except JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc}); delete it to drop it", path=str(path)) from exc
    if not isinstance(document, dict) or document.pop("schema_version", None) != THROUGHPUT_SCHEMA:
        raise DataError(f"not a {THROUGHPUT_SCHEMA} file; delete it to drop it", path=str(path))
    if not all(type(value) in (int, float) for value in document.values()):
        raise DataError("throughput values must be numbers; delete it to drop it", path=str(path))
    return {str(name): float(value) for name, value in document.items()}


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
    split: TestSplit,
    generations: str | os.PathLike[str],
    declared: DeclaredModel,
    out_dir: str | os.PathLike[str],
    scoring: ScoringOptions,
) -> ArmOutput:
    """Re-score existing generations against a formatted (and read) split, without any model.

    The model identity comes from the declared model, revision, tokenizer and
    adapter when a model is declared, else from the ``generation_manifest.json``
    the generation run wrote. Without either, the identity cannot be proven
    and scoring refuses.
    """
    kind = declared.checked_kind()
    files = _generation_files(Path(generations))
    records = [record for path in files for record in read_generations(path)]
    source = _declared_source(declared, kind, Path(generations))
    target = Path(out_dir)
    # Everything is written to a staging folder and moved into place only once
    # scoring passed: generations that fail a check (exit 5) must not replace
    # the ones a previous run scored.
    with staged_folder(target) as stage:
        copies = []
        for path in files:  # the arm's folder holds what it scored, as after `evaluate`
            copy = stage / "generations" / path.name
            atomic_write_bytes(copy, path.read_bytes())
            copies.append(copy)
        arm = _finish_arm(stage, split, records, source, scoring, copies, target)
    return arm


def _declared_source(declared: DeclaredModel, kind: ModelKind, generations: Path) -> _ArmSource:
    """The identity of generations this process did not make: declared, or from their manifest."""
    from sommelier_mlflow.generation import find_recorded_identity

    request = declared.request
    if request is not None:
        return _ArmSource(kind, request.declared_identity(), request.declared_adapter(), None)
    recorded = find_recorded_identity(generations)
    if recorded is None:
        raise ConfigError(
            "the model identity of these generations is unknown: pass model=... "
            "(and revision/tokenizer/adapter), or keep generation_manifest.json next to them"
        )
    return _ArmSource(kind, recorded.model_identity, recorded.adapter, None)


def replay_precomputed(
    split: TestSplit,
    precomputed: str | os.PathLike[str],
    declared: DeclaredModel,
    decoding: Decoding,
    out_dir: str | os.PathLike[str],
    scoring: ScoringOptions,
) -> ArmOutput:
    """Score completions produced elsewhere (``example_id`` + ``raw_text`` rows, or trajectories).

    They go through the same runner as live generation (a replay backend keyed
    by ``example_id``: two examples may share a prompt and still have rows with
    different texts), so the records, the digests and the resume guarantees
    are identical. A row that carries ``prompt_sha256`` must name its
    example's prompt. The producer's decoding cannot be read
    from the file, so the caller declares it and it is recorded as declared: the
    maximum new tokens, the batch size and, when given, the backend that
    decoded (``hf``, ``server``...), which the gate then compares like a
    measured one. The declared adapter may be the name it was served under.

    Trajectory rows (``{"example_id", "turns"}``, the ``trajectories.jsonl``
    a played arm writes) answer the split's multi-turn questions: their
    records carry the step texts as ``turns``, exactly as the execution loop
    writes them, with the loop's identity in the decoding. One file may hold
    both kinds of row, each read by its shape, so a split mixing single-turn
    rows and multi-turn questions is re-scored from one file.

    Raises:
        DataError: A malformed row, a repeated id, or a row of the other kind
            than its example (a trajectory for a single-turn example, an
            output row for a multi-turn question), naming file and line.
        InputError: A row names an example the split does not have, or an
            example has no completion.
        InvariantViolationError: A row's language or prompt digest disagrees
            with its example.
    """
    from sommelier_mlflow.generation import create_backend

    kind = declared.checked_kind()
    read = read_precomputed_outputs(precomputed, split=split)
    answered = {row.example_id: row.turns for row in read.trajectories}
    outputs = _precomputed_outputs(split, read.outputs, precomputed, answered=set(answered))
    trajectories = answered if any(is_multi_turn(e) for e in split.examples) else None
    replay = {"outputs": outputs, "name": Path(precomputed).name, "keyed_by": "example_id"}
    generator = create_backend("replay", replace(declared.required_request(), options=replay))
    # Replaying is cheap, so it runs in a staging folder: a refused replay
    # leaves the output folder exactly as it was.
    with LoadedArm(kind, generator, split) as loaded, staged_folder(out_dir) as stage:
        arm = _generate_and_score(loaded, decoding, stage, scoring, Path(out_dir), trajectories)
    return arm


def _precomputed_outputs(
    split: TestSplit,
    rows: Iterable[PrecomputedGeneration],
    precomputed: str | os.PathLike[str],
    answered: set[str] | None = None,
) -> dict[str, str]:
    """Each single-turn example's output text, every row checked against its example.

    ``answered`` are the multi-turn questions the file's trajectory rows answer.
    """
    by_id = split.by_id()
    outputs: dict[str, str] = {}
    given: set[str] = set(answered or ())
    for row in rows:
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
            raise InputError(f"{split.path} is not formatted: score needs the formatted split")
        if row.prompt_sha256 is not None and row.prompt_sha256 != example.prompt_sha256:
            raise InvariantViolationError(
                f"{precomputed}: {row.example_id!r} answers the prompt with prompt_sha256 "
                f"{row.prompt_sha256!r} but the split's prompt has {example.prompt_sha256!r}; "
                "the outputs were produced for other prompts"
            )
        outputs[row.example_id] = row.raw_text
    missing = [example.example_id for example in split.examples if example.example_id not in given]
    if missing:
        raise InputError(
            f"{precomputed}: no row for example_id {missing[0]!r}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "; supply one {example_id, raw_text} row for every single-turn example of the "
            "split and one {example_id, turns} row for every multi-turn question (one file "
            "may hold both)"
        )
    return outputs
