"""Resumable, batched generation into one JSONL file per language slice.

Greedy decoding of a batch depends on its composition (padding changes the
numerics), so the batch plan is computed once from the full example list and
never from what is left to do: a run resumed after a crash regenerates an
interrupted batch with exactly the prompts it had, keeps only the missing
records, and ends with files byte-identical to an uninterrupted run.

Layout written under ``out_dir``::

    generation_manifest.json     what the run is (guards resumption)
    generations/<language>.jsonl one GenerationRecord per line, test-split order
    generation_timing.jsonl      seconds per generated batch, steps too (trace durations; no digest)
    multi_turn_journal.jsonl     every step of the multi-turn questions (``_multi_turn.py``)
    trajectories.jsonl           their step texts per turn, as ``score --precomputed`` reads them

Multi-turn questions (rows with ``multi_turn``) are not one completion each:
the execution loop plays them, after the single-turn rows are generated, and
their records join the same slice files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from sommelier_mlflow._json import (
    JSONDecodeError,
    atomic_write_bytes,
    atomic_write_json,
    canonical_json,
    dumps_line,
    loads,
    naming_path,
    sha256_text,
)
from sommelier_mlflow._progress import progress_bar
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    ModelKind,
    TestExample,
    check_model_kind,
    is_multi_turn,
    read_generation_prefix,
)
from sommelier_mlflow.errors import (
    ConfigError,
    DataError,
    InputError,
    InvariantViolationError,
)
from sommelier_mlflow.generation._batching import (
    Prompted,
    batch_plan,
    generate_batch,
    make_record,
    skip_batch,
)
from sommelier_mlflow.generation._context import check_context
from sommelier_mlflow.generation._manifest import MANIFEST_NAME, MANIFEST_SCHEMA
from sommelier_mlflow.generation._multi_turn import (
    MULTI_TURN_JOURNAL_NAME,
    MultiTurnLoop,
    execution_identity,
    multi_turn_record,
    run_conversations,
    write_trajectories,
)
from sommelier_mlflow.generation._protocol import (
    Completion,
    SupportsFingerprint,
    TextGenerator,
)
from sommelier_mlflow.generation._timing import TimingLog
from sommelier_mlflow.toolcalls import PARSER_VERSION

__all__ = ["GENERATIONS_DIR", "run_generation"]

GENERATIONS_DIR: Final = "generations"

_FRESH_DIR: Final = "use a fresh output directory (or delete the existing one) to start over"


def _check_examples(examples: Sequence[TestExample]) -> list[Prompted]:
    if not examples:
        raise InputError("no examples to generate for; the test split is empty")
    seen: set[str] = set()
    checked = []
    for example in examples:
        if not isinstance(example, TestExample):
            raise InputError(f"examples must be TestExample objects, got {type(example).__name__}")
        if example.example_id in seen:
            raise InputError(f"duplicate example_id {example.example_id!r} in the test split")
        seen.add(example.example_id)
        if example.prompt_text is None or example.prompt_sha256 is None:
            raise InputError(
                f"example {example.example_id!r} has no prompt_text/prompt_sha256; format the "
                "split with the model's chat template before generating"
            )
        if sha256_text(example.prompt_text) != example.prompt_sha256:
            raise InvariantViolationError(
                f"example {example.example_id!r}: prompt_sha256 does not match its prompt_text; "
                "the formatted split was altered, re-format it"
            )
        checked.append(Prompted(example, example.prompt_text, example.prompt_sha256))
    return checked


def _manifest(
    prompted: Sequence[Prompted],
    generator: TextGenerator,
    model_kind: ModelKind,
    decoding: Decoding,
) -> dict[str, Any]:
    fingerprint = generator.fingerprint() if isinstance(generator, SupportsFingerprint) else None
    examples = [
        [item.example.example_id, item.example.language, item.prompt_sha256] for item in prompted
    ]
    return {
        "schema_version": MANIFEST_SCHEMA,
        "model_kind": model_kind,
        "decoding": decoding.to_dict(),
        "parser_version": PARSER_VERSION,
        "generator": fingerprint,
        "example_count": len(prompted),
        "examples_sha256": sha256_text(canonical_json(examples)),
    }


def _first_difference(expected: Any, found: Any, prefix: str = "") -> str:
    """Dotted name of the first field where two JSON values differ."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            if key not in expected or key not in found:
                return f"{prefix}{key}"
            if canonical_json(expected[key]) != canonical_json(found[key]):
                return _first_difference(expected[key], found[key], f"{prefix}{key}.")
    return prefix.rstrip(".") or "(whole manifest)"


def _check_manifest(path: Path, expected: dict[str, Any], has_records: bool) -> bool:
    """Compare a stored manifest with this run's; return whether one exists.

    Raises:
        ConfigError: If generations exist without a manifest, or the manifest
            describes a different run.
        DataError: If the manifest is not valid JSON.
    """
    if not path.exists():
        if has_records:
            raise ConfigError(
                f"{path.parent / GENERATIONS_DIR} holds generations but {path.name} is missing, "
                f"so they cannot be proven to come from this run; {_FRESH_DIR}"
            )
        return False
    try:
        found = loads(path.read_bytes())
    except JSONDecodeError as exc:
        raise DataError(f"not valid JSON ({exc}); {_FRESH_DIR}", path=str(path)) from exc
    if canonical_json(found) != canonical_json(expected):
        field = _first_difference(expected, found)
        raise ConfigError(
            f"{path} describes a different generation run (first difference: {field}); "
            f"resuming would mix outputs of two runs in one file; {_FRESH_DIR}"
        )
    return True


def _read_slice(
    path: Path,
    language: str,
    by_id: Mapping[str, Prompted],
    model_kind: ModelKind,
    decoding: Decoding,
) -> tuple[dict[str, GenerationRecord], int, int]:
    """Read and verify one slice file written by an earlier, interrupted run.

    A last line without its newline is the torn write of a killed process:
    it is dropped (and regenerated). Every complete line must be exactly what
    this run would have written for that example.

    Returns:
        ``(records by example_id, byte length of the complete lines, file size)``.
    """
    try:
        prefix = read_generation_prefix(path)
    except DataError as exc:
        hinted = DataError(f"{exc}; {_FRESH_DIR}")
        hinted.path, hinted.line = exc.path, exc.line
        raise hinted from exc
    records: dict[str, GenerationRecord] = {}
    expected_decoding = canonical_json(decoding.to_dict())
    for number, (stored, line) in enumerate(zip(prefix.records, prefix.lines, strict=True), 1):
        example_id = stored.example_id
        item = by_id.get(example_id)
        if item is None:
            raise ConfigError(
                f"{path}:{number}: example_id {example_id!r} is not in this test split; "
                f"the directory belongs to another run; {_FRESH_DIR}"
            )
        if stored.language != language or item.example.language != language:
            raise DataError(
                f"example {example_id!r} (language {stored.language!r}) does not belong in the "
                f"{language!r} slice; {_FRESH_DIR}",
                path=str(path),
                line=number,
            )
        if stored.prompt_sha256 != item.prompt_sha256:
            raise InvariantViolationError(
                f"{path}:{number}: example {example_id!r} was generated from a different prompt "
                f"(prompt_sha256 {stored.prompt_sha256!r}, split has {item.prompt_sha256!r}); "
                f"{_FRESH_DIR}"
            )
        if stored.model_kind != model_kind:
            raise ConfigError(
                f"{path}:{number}: record has model_kind {stored.model_kind!r}, this run is "
                f"{model_kind!r}; {_FRESH_DIR}"
            )
        if canonical_json(stored.decoding) != expected_decoding:
            raise ConfigError(
                f"{path}:{number}: record was generated with decoding {stored.decoding}, this "
                f"run uses {decoding.to_dict()}; {_FRESH_DIR}"
            )
        record = make_record(item, stored.raw_text, model_kind, decoding, stored.turns)
        if dumps_line(record.to_json()) != line:
            raise InvariantViolationError(
                f"{path}:{number}: record for {example_id!r} differs from what this run writes "
                f"for its raw_text (parse fields or encoding; parser {PARSER_VERSION}); "
                f"{_FRESH_DIR}"
            )
        records[example_id] = record
    return records, prefix.complete_bytes, prefix.size


class _SliceWriters:
    """Append-only handles, one per slice file, made durable batch by batch."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._handles: dict[str, IO[bytes]] = {}

    def append(self, language: str, line: bytes) -> None:
        handle = self._handles.get(language)
        if handle is None:
            handle = (self._directory / f"{language}.jsonl").open("ab")
            self._handles[language] = handle
        with naming_path(self._directory / f"{language}.jsonl"):
            handle.write(line)

    def sync(self) -> None:
        for language, handle in self._handles.items():
            with naming_path(self._directory / f"{language}.jsonl"):
                handle.flush()
                os.fsync(handle.fileno())

    def close(self) -> None:
        handles, self._handles = self._handles, {}
        failure: OSError | None = None
        for language, handle in handles.items():
            try:  # close every handle, then report the first failure
                with naming_path(self._directory / f"{language}.jsonl"):
                    handle.close()
            except OSError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


def _prepare_directory(
    gen_dir: Path,
    new_manifest: tuple[Path, dict[str, Any]] | None,
    truncations: Sequence[tuple[Path, int]],
    languages: Sequence[str],
) -> None:
    """Make the output directory ready to append to, once everything on it checked out.

    Writes the manifest of a new run, cuts each torn last line off (durably,
    before anything is appended after it) and removes temp files a killed
    rewrite left behind.
    """
    gen_dir.mkdir(parents=True, exist_ok=True)
    if new_manifest is not None:
        atomic_write_json(*new_manifest)
    for path, complete_end in truncations:
        with path.open("r+b") as handle:
            handle.truncate(complete_end)
            handle.flush()
            os.fsync(handle.fileno())
    for language in languages:
        for stale in gen_dir.glob(f".{language}.jsonl.*.tmp"):
            stale.unlink(missing_ok=True)


def _generate_missing(
    writers: _SliceWriters,
    prompted: Sequence[Prompted],
    plan: Sequence[Sequence[int]],
    records: dict[str, GenerationRecord],
    generator: TextGenerator,
    model_kind: ModelKind,
    decoding: Decoding,
    on_batch: Callable[[Sequence[Completion], float], None] | None,
    bar: Any,
    timing: TimingLog,
) -> None:
    """Generate every batch of ``plan`` that holds a missing example, appending as it goes.

    A batch runs whole (so each prompt sees the same batch as in an
    uninterrupted run) but only its missing examples are written; each batch
    is made durable before the next starts. ``records`` gains the new records.
    The batch's seconds go to ``timing`` before its records are written, so
    a record on disk always has its batch's time.
    """
    try:
        for batch in plan:
            missing = {i for i in batch if prompted[i].example.example_id not in records}
            if not missing:
                skip_batch(generator, [prompted[i] for i in batch])
                continue
            started = time.perf_counter()
            completions = generate_batch(
                generator, [prompted[i] for i in batch], decoding.max_new_tokens
            )
            seconds = time.perf_counter() - started
            if on_batch is not None:
                on_batch(completions, seconds)
            timing.append([prompted[i].example.example_id for i in batch], seconds)
            for position, index in enumerate(batch):
                if index not in missing:
                    continue
                item = prompted[index]
                record = make_record(item, completions[position].text, model_kind, decoding)
                writers.append(item.example.language, dumps_line(record.to_json()))
                records[item.example.example_id] = record
            writers.sync()
            bar.update(len(missing))
    finally:
        timing.close()
        writers.close()


def _rewrite_in_split_order(
    gen_dir: Path,
    prompted: Sequence[Prompted],
    records: Mapping[str, GenerationRecord],
    languages: Sequence[str],
) -> dict[str, Path]:
    """Atomically rewrite each slice file with its records in test-split order.

    Records were appended in batch order, a resumed run's after those an
    earlier run left; the rewrite is what makes the files byte-identical to
    an uninterrupted run's.
    """
    paths: dict[str, Path] = {}
    for language in languages:
        ordered = [
            records[item.example.example_id]
            for item in prompted
            if item.example.language == language
        ]
        path = gen_dir / f"{language}.jsonl"
        atomic_write_bytes(path, b"".join(dumps_line(record.to_json()) for record in ordered))
        paths[language] = path
    return paths


def run_generation(
    examples: Sequence[TestExample],
    generator: TextGenerator,
    *,
    decoding: Decoding,
    model_kind: ModelKind,
    out_dir: str | os.PathLike[str],
    progress: bool = True,
    on_batch: Callable[[Sequence[Completion], float], None] | None = None,
    multi_turn: MultiTurnLoop | None = None,
) -> dict[str, Path]:
    """Generate one greedy completion per example into per-language JSONL files.

    Re-running the same call after a crash (even ``kill -9``) resumes: records
    already on disk are verified and kept, an interrupted batch is regenerated
    with its original prompts, and the final files are rewritten atomically in
    test-split order, byte-identical to an uninterrupted run.

    Args:
        examples: The formatted test split, in file order; each example needs
            ``prompt_text`` and a matching ``prompt_sha256``.
        generator: Any :class:`TextGenerator` backend.
        decoding: Validated greedy decoding; ``batch_size`` fixes the batch plan.
        model_kind: ``"base"`` or ``"adapter"``.
        out_dir: Directory receiving ``generations/<language>.jsonl``,
            ``generation_manifest.json`` and ``generation_timing.jsonl`` (the
            seconds of each batch this call generated; see ``_timing.py``).
        progress: Show a tqdm progress bar (examples/s, ETA) on stderr.
        on_batch: Called after each generated batch with its completions (all
            of the batch, with the backend's details where it gives them, see
            :class:`SupportsCompletionDetails`) and the seconds the backend
            took; batches resumed from disk are not generated and not reported.
        multi_turn: How multi-turn questions (rows with ``multi_turn``) are
            played: the execution loop (``_multi_turn.py``) renders each step
            with it and decodes each step's calls in its output format; their
            records carry ``turns``, and ``multi_turn_journal.jsonl`` and
            ``trajectories.jsonl`` are written beside the generations. The
            other rows of the same split are generated as above. Required when
            the split has such rows, with ``decoding.execution`` set by
            :func:`loop_decoding`.

    Returns:
        Path of each slice file, keyed by language (sorted).

    Raises:
        InputError: Empty split, duplicate ids or an unformatted example.
        ConfigError: Bad decoding/model kind, ``out_dir`` holds another run, or a
            prompt plus ``max_new_tokens`` exceeds the backend's context
            (:class:`SupportsContextLength`); nothing is written then. Multi-turn
            rows without ``multi_turn`` or under a decoding that does not name
            the loop; a journal of another run.
        DataError: A malformed existing slice file or manifest.
        InvariantViolationError: A prompt digest mismatch, or a generator that
            returned the wrong number of completions.
    """
    if not isinstance(decoding, Decoding):
        raise ConfigError(
            f"decoding must be a validated Decoding, got {type(decoding).__name__}; "
            "build it with Decoding(...) or Decoding.from_dict(...)"
        )
    check_model_kind(model_kind, ConfigError)
    if not isinstance(generator, TextGenerator):
        raise ConfigError(
            f"generator {generator!r} has no generate(prompts, *, max_new_tokens) method"
        )
    prompted = _check_examples(examples)
    _check_loop(prompted, decoding, multi_turn)
    # A prompt past the model's context is refused before anything is touched.
    check_context(examples, generator, decoding.max_new_tokens).raise_if_overlong(len(prompted))
    by_id = {item.example.example_id: item for item in prompted}
    languages = sorted({item.example.language for item in prompted})
    root = Path(out_dir)
    gen_dir = root / GENERATIONS_DIR
    manifest_path = root / MANIFEST_NAME

    existing_files = sorted(gen_dir.glob("*.jsonl")) if gen_dir.is_dir() else []
    for path in existing_files:
        if path.stem not in languages:
            raise ConfigError(
                f"{path} is a slice this test split does not have (languages: "
                f"{', '.join(languages)}); the directory belongs to another run; {_FRESH_DIR}"
            )
    manifest = _manifest(prompted, generator, model_kind, decoding)
    played = (root / MULTI_TURN_JOURNAL_NAME).is_file()  # multi-turn steps are records too
    has_manifest = _check_manifest(manifest_path, manifest, bool(existing_files) or played)

    records: dict[str, GenerationRecord] = {}
    truncations: list[tuple[Path, int]] = []
    for path in existing_files:
        found, complete_end, size = _read_slice(path, path.stem, by_id, model_kind, decoding)
        records.update(found)
        if complete_end != size:
            truncations.append((path, complete_end))

    # Everything on disk checked out; only now touch it.
    single = [i for i, item in enumerate(prompted) if not is_multi_turn(item.example)]
    plan = [
        [single[j] for j in batch]
        for batch in batch_plan([prompted[i] for i in single], generator, decoding.batch_size)
    ]
    _prepare_directory(
        gen_dir, None if has_manifest else (manifest_path, manifest), truncations, languages
    )

    done = sum(prompted[i].example.example_id in records for i in single)
    with progress_bar(
        len(single), f"generate {model_kind}", enabled=progress and bool(single), initial=done
    ) as bar:
        _generate_missing(
            _SliceWriters(gen_dir),
            prompted,
            plan,
            records,
            generator,
            model_kind,
            decoding,
            on_batch,
            bar,
            TimingLog(root),
        )
    if multi_turn is not None and len(single) < len(prompted):
        _play_multi_turn(
            prompted, records, generator, decoding, model_kind, multi_turn, root, progress, on_batch
        )
    return _rewrite_in_split_order(gen_dir, prompted, records, languages)


def _check_loop(
    prompted: Sequence[Prompted], decoding: Decoding, multi_turn: MultiTurnLoop | None
) -> None:
    """Refuse multi-turn rows without the loop, or under a decoding that does not name it."""
    first = next((item for item in prompted if is_multi_turn(item.example)), None)
    if first is None:
        return
    if multi_turn is None:
        raise ConfigError(
            f"example {first.example.example_id!r} is a multi-turn question, which is played "
            "by the execution loop: pass multi_turn=MultiTurnLoop(render=..., output_format=...)"
        )
    expected = execution_identity(multi_turn.output_format)
    if decoding.execution is None or canonical_json(decoding.execution) != canonical_json(expected):
        raise ConfigError(
            f"the split has multi-turn questions, so the decoding must record the loop that "
            f"plays them: decoding.execution must be {canonical_json(expected)}, got "
            f"{decoding.execution!r} (build it with loop_decoding(...))"
        )


def _play_multi_turn(
    prompted: Sequence[Prompted],
    records: dict[str, GenerationRecord],
    generator: TextGenerator,
    decoding: Decoding,
    model_kind: ModelKind,
    multi_turn: MultiTurnLoop,
    root: Path,
    progress: bool,
    on_batch: Callable[[Sequence[Completion], float], None] | None,
) -> None:
    """Play the multi-turn questions (resuming from the journal) into ``records``.

    When every one of them is already in the slice files (a rerun of a
    finished run), nothing is played: ``trajectories.jsonl`` is written again
    from those records, the same bytes the loop wrote.
    """
    items = [item for item in prompted if is_multi_turn(item.example)]
    given = multi_turn.trajectories
    if given is not None:  # outputs made elsewhere: nothing to play
        missing = [
            item.example.example_id for item in items if item.example.example_id not in given
        ]
        if missing:
            raise InputError(
                f"no trajectory for multi-turn example {missing[0]!r}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )
        records.update(
            (
                item.example.example_id,
                multi_turn_record(item, given[item.example.example_id], model_kind, decoding),
            )
            for item in items
        )
    if all(item.example.example_id in records for item in items):
        write_trajectories(root, [records[item.example.example_id] for item in items])
        return
    records.update(
        run_conversations(
            items,
            generator,
            decoding=decoding,
            model_kind=model_kind,
            loop=multi_turn,
            out_dir=root,
            progress=progress,
            on_batch=on_batch,
        )
    )
