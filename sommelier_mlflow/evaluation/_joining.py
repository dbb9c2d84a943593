"""Join one arm's generations to the test split, check their provenance, score them.

Scoring is where the product's guarantees are enforced, so it refuses rather
than repairs: every generation must belong to a known example, carry that
example's language and prompt digest, and use the run's one decoding; every
evaluated example must have exactly one generation. The stored parse is an
audit copy only: each ``raw_text`` is parsed again with the current parser,
and a stored parse that disagrees is an invariant violation, because it means
either the record was edited or it was produced by a different parser than the
``parser_version`` the report is about to claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    ModelIdentity,
    ModelKind,
    TestExample,
    TestSplit,
    check_model_kind,
    check_scoring_mode,
    check_slice_fields,
    conversation_slice_values,
    validate_language,
)
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from sommelier_mlflow.evaluation._results import (
    AnsweredExample,
    BootstrapSettings,
    ExampleResult,
    ScoredRun,
)
from sommelier_mlflow.evaluation._scoring import preview_ids, score_completions
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    JSON_FORMAT,
    PARSER_VERSION,
    ParseResult,
    parse_tool_call,
)
from sommelier_mlflow.toolcalls import output_format as registered_output_format

__all__ = ["score_run"]


def _check_adapter(model_kind: str, adapter: Mapping[str, Any] | None) -> dict[str, str] | None:
    if model_kind == "base":
        if adapter is not None:
            raise ConfigError(
                "a base arm must not name an adapter; score it with model_kind='adapter' "
                "or pass adapter=None"
            )
        return None
    if adapter is None:
        raise ConfigError(
            "an adapter arm needs adapter={'source': ..., 'sha256': ...} identifying the adapter"
        )
    if (
        not isinstance(adapter, Mapping)
        or set(adapter) != {"source", "sha256"}
        or not all(isinstance(adapter[key], str) and adapter[key] for key in adapter)
    ):
        raise ConfigError(
            f"adapter must be {{'source': non-empty str, 'sha256': non-empty str}}, got {adapter!r}"
        )
    return {"source": adapter["source"], "sha256": adapter["sha256"]}


def _select_examples(split: TestSplit, languages: Sequence[str] | None) -> list[TestExample]:
    if not split.examples:
        raise InputError(f"test split {split.path!r} has no examples to score")
    if languages is None:
        chosen = set(split.languages)
    else:
        if isinstance(languages, str):
            raise ConfigError("languages must be a list of language codes, not one string")
        chosen = {validate_language(language) for language in languages}
        if not chosen:
            raise ConfigError("languages is empty; omit it to score every language in the split")
        empty = sorted(chosen - set(split.languages))
        if empty:
            raise InputError(
                f"configured language slice(s) {empty} have no rows in test split "
                f"{split.path!r} (it has {list(split.languages)}); fix the language list"
            )
    selected = sorted(
        (example for example in split.examples if example.language in chosen),
        key=lambda example: example.example_id,
    )
    unformatted = [example.example_id for example in selected if example.prompt_sha256 is None]
    if unformatted:
        raise InputError(
            f"{len(unformatted)} example(s) have no prompt_sha256 ({preview_ids(unformatted)}): "
            "scoring verifies every generation against its prompt digest, so score against "
            "the formatted split the generations were produced from"
        )
    return selected


def _prompt_format(selected: Sequence[TestExample]) -> str:
    """The one prompt format of the arm's prompts; a split mixing two is refused."""
    formats: dict[str, str] = {}
    for example in selected:
        formats.setdefault(example.prompt_format, example.example_id)
    if len(formats) > 1:
        seen = ", ".join(
            f"{name!r} (e.g. {example!r})" for name, example in sorted(formats.items())
        )
        raise InputError(
            f"the split's prompts were rendered in {len(formats)} prompt formats (field "
            f"prompt_format: {seen}); render every row in one format"
        )
    return next(iter(formats))


def _chat_template_kwargs(selected: Sequence[TestExample]) -> dict[str, Any]:
    """The one set of template variables the arm's prompts were rendered with; mixed is refused."""
    seen: dict[str, str] = {}
    for example in selected:
        seen.setdefault(canonical_json(example.chat_template_kwargs), example.example_id)
    if len(seen) > 1:
        listed = ", ".join(f"{value} (e.g. {example!r})" for value, example in sorted(seen.items()))
        raise InputError(
            f"the split's prompts were rendered with {len(seen)} different template variable "
            f"sets (field chat_template_kwargs: {listed}); render every row with the same "
            "--chat-template-kwargs"
        )
    return dict(selected[0].chat_template_kwargs) if selected else {}


def _template_date(selected: Sequence[TestExample]) -> str | None:
    """The one day the arm's prompts were rendered on (``--template-date``); mixed is refused."""
    seen: dict[str | None, str] = {}
    for example in selected:
        seen.setdefault(example.template_date, example.example_id)
    if len(seen) > 1:
        listed = ", ".join(
            f"{day or 'none'} (e.g. {example!r})"
            for day, example in sorted(seen.items(), key=lambda item: item[0] or "")
        )
        raise InputError(
            f"the split's prompts were rendered on {len(seen)} different template days (field "
            f"template_date: {listed}); render every row with the same --template-date"
        )
    return selected[0].template_date if selected else None


def _join(
    split: TestSplit,
    selected: Sequence[TestExample],
    generations: Iterable[GenerationRecord],
) -> list[GenerationRecord]:
    """Return the one generation of each selected example, in ``selected`` order."""
    known = split.by_id()
    wanted = {example.example_id for example in selected}
    by_id: dict[str, GenerationRecord] = {}
    unknown: list[str] = []
    outside: list[str] = []
    duplicates: list[str] = []
    for record in generations:
        if not isinstance(record, GenerationRecord):
            raise InputError(
                f"generations must be GenerationRecord objects, got {type(record).__name__}"
            )
        example_id = record.example_id
        if example_id not in known:
            unknown.append(example_id)
        elif example_id not in wanted:
            outside.append(example_id)
        elif example_id in by_id:
            duplicates.append(example_id)
        else:
            by_id[example_id] = record
    if unknown:
        raise InputError(
            f"{len(unknown)} generation(s) reference example ids not in test split "
            f"{split.path!r}: {preview_ids(unknown)}; score them against the split they "
            "were generated from"
        )
    if outside:
        raise InputError(
            f"{len(outside)} generation(s) belong to languages outside the configured slices: "
            f"{preview_ids(outside)}; add their languages or drop those generations"
        )
    if duplicates:
        unique = sorted(set(duplicates))
        raise InputError(
            f"{len(unique)} example id(s) have more than one generation: {preview_ids(unique)}; "
            "each example must be generated exactly once per arm"
        )
    missing = [example.example_id for example in selected if example.example_id not in by_id]
    if missing:
        raise InputError(
            f"{len(missing)} example(s) have no generation: {preview_ids(missing)}; "
            "generate every example of the split (metrics never drop examples)"
        )
    return [by_id[example.example_id] for example in selected]


def _run_decoding(records: Sequence[GenerationRecord], declared: Decoding | None) -> Decoding:
    seen: dict[str, str] = {}
    for record in records:
        key = canonical_json(record.decoding)
        seen.setdefault(key, record.example_id)
    if len(seen) > 1:
        variants = "; ".join(f"{key} (e.g. {example})" for key, example in sorted(seen.items()))
        raise InvariantViolationError(
            f"generations of one run used {len(seen)} different decodings: {variants}; "
            "regenerate the arm with one decoding configuration"
        )
    decoding = Decoding.from_dict(records[0].decoding)
    if declared is not None and declared.to_dict() != decoding.to_dict():
        raise InvariantViolationError(
            f"generations were decoded with {decoding.to_dict()} but the run declares "
            f"{declared.to_dict()}; the recorded decoding must be the one used"
        )
    return decoding


def _check_record(example: TestExample, record: GenerationRecord, model_kind: str) -> None:
    if record.model_kind != model_kind:
        raise InputError(
            f"generation for {example.example_id!r} is from a {record.model_kind!r} arm but "
            f"this run scores the {model_kind!r} arm; pass that arm's generations"
        )
    if record.language != example.language:
        raise InvariantViolationError(
            f"generation for {example.example_id!r} says language {record.language!r} but the "
            f"example is {example.language!r}; the generations do not belong to this split"
        )
    if record.prompt_sha256 != example.prompt_sha256:
        raise InvariantViolationError(
            f"generation for {example.example_id!r} was produced from prompt "
            f"{record.prompt_sha256} but the split's prompt is {example.prompt_sha256}; "
            "regenerate from this split's stored prompts"
        )


def _audit_stored_parse(record: GenerationRecord, result: ExampleResult, same: bool) -> None:
    # Generation records always store the single-call JSON parse (the record
    # schema's audit copy). When the run scored with exactly that parse
    # (``same``) the row's own result is reused; otherwise it is re-derived.
    fresh: ParseResult | ExampleResult = result if same else parse_tool_call(record.raw_text)
    fresh_status = fresh.parse_status if isinstance(fresh, ExampleResult) else fresh.status
    fresh_parsed = fresh.parsed_call if isinstance(fresh, ExampleResult) else fresh.call
    stored_call = None if record.parsed_call is None else canonical_json(record.parsed_call)
    fresh_call = None if fresh_parsed is None else canonical_json(fresh_parsed)
    if fresh_status != record.parse_status or stored_call != fresh_call:
        raise InvariantViolationError(
            f"generation for {record.example_id!r} stores parse {record.parse_status!r} "
            f"{stored_call} but {PARSER_VERSION} parses its raw_text as {fresh_status!r} "
            f"{fresh_call}; the record was edited or written by another parser, so regenerate "
            "or re-parse it before scoring"
        )


def _conversation_slices(example: TestExample) -> tuple[tuple[str, str], ...]:
    """The ``turn`` and ``after`` values of a conversation row; none for a multi-turn question.

    A multi-turn question's ``messages`` are its first user turn, not a
    history before one predicted reply: it is scored over all its turns
    (``bfcl_turn_accuracy``), so ``turn:1`` would only repeat the whole split.
    """
    return () if example.multi_turn is not None else conversation_slice_values(example.messages)


def _answered(example: TestExample, record: GenerationRecord) -> AnsweredExample:
    """What scoring needs of one example and its (already verified) generation."""
    return AnsweredExample(
        example_id=example.example_id,
        language=example.language,
        source_example_id=example.source_example_id,
        gold_call=example.gold_calls[0] if len(example.gold_calls) == 1 else None,
        raw_text=record.raw_text,
        prompt_sha256=record.prompt_sha256,  # verified equal to the example's digest
        gold_calls=example.gold_calls,
        slice_values=tuple(sorted(example.slice_values + _conversation_slices(example))),
        tools=example.tools,
        conversation_id=example.conversation_id,
        multi_turn=example.multi_turn,
        turns=record.turns,
    )


def score_run(
    split: TestSplit,
    generations: Iterable[GenerationRecord],
    *,
    model_kind: ModelKind,
    model_identity: ModelIdentity,
    adapter: Mapping[str, Any] | None,
    decoding: Decoding | None = None,
    languages: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float = 0.95,
    scoring: str = DEFAULT_MODE,
    slice_by: Sequence[str] = (),
    progress: bool = False,
    output_format: str = JSON_FORMAT,
) -> ScoredRun:
    """Score one arm's generations against the test split.

    The join and every provenance check happen here; the scoring itself is
    :func:`score_completions`.

    Args:
        split: The (formatted) test split the generations were produced from.
        generations: One record per evaluated example, in any order.
        model_kind: ``"base"`` or ``"adapter"``; every record must carry it.
        model_identity: The base model and tokenizer that generated.
        adapter: ``{"source", "sha256"}`` for an adapter arm, ``None`` for base.
        decoding: The decoding the run declares; if given, the records' decoding
            must equal it.
        languages: Language slices to evaluate (default: every language of the
            split). Each must have rows; examples of other languages are left
            out of the run, and so must their generations be.
        seed: Base seed of the gap bootstraps (each derives
            ``derive_seed(seed, f"gap/{model_kind}/{language}")``).
        resamples: Bootstrap resamples per gap.
        confidence: Nominal coverage of the gap intervals.
        scoring: The declared scoring mode; ``single`` refuses a split with an
            example of zero or several gold calls (exit 2, naming its line).
        slice_by: Slice fields beyond language, read from each example's
            ``slice_values`` (see :func:`score_completions`).
        progress: Allow the scoring progress bar (see :func:`score_completions`).
        output_format: The registered output format of the completions
            (default ``json``); its decoder version joins ``parser_version``.

    Returns:
        The scored run; ``EvaluationReport.from_run`` gives its report.

    Raises:
        InputError: Unknown, missing or duplicate generations, a wrong
            ``model_kind``, an empty configured slice, unformatted examples, or
            translated rows none of whose roots are evaluated (exit 2).
        ConfigError: Bad adapter, languages or bootstrap settings (exit 2).
        InvariantViolationError: A prompt-digest or language mismatch, mixed
            decoding, a stored parse the current parser disagrees with, or a
            matched pair whose gold calls differ (exit 5).
    """
    check_model_kind(model_kind)
    if not isinstance(model_identity, ModelIdentity):
        raise ConfigError(
            f"model_identity must be a ModelIdentity, got {type(model_identity).__name__}"
        )
    adapter_info = _check_adapter(model_kind, adapter)
    registered_output_format(output_format)  # an unknown format is a configuration error first
    settings = BootstrapSettings(seed=seed, resamples=resamples, confidence=confidence)
    check_slice_fields(slice_by, scoring=scoring)  # configuration first, then the data
    check_scoring_mode(split, scoring)
    selected = _select_examples(split, languages)
    prompt_format = _prompt_format(selected)
    chat_template_kwargs = _chat_template_kwargs(selected)
    template_date = _template_date(selected)
    records = _join(split, selected, generations)
    for example, record in zip(selected, records, strict=True):
        _check_record(example, record, model_kind)
    run_decoding = _run_decoding(records, decoding)
    scored = score_completions(
        [_answered(example, record) for example, record in zip(selected, records, strict=True)],
        bootstrap=settings,
        gap_scope=model_kind,
        scoring=scoring,
        slice_by=slice_by,
        progress=progress,
        output_format=output_format,
    )
    # selected is in example_id order, as are the scored rows.
    same = scoring == DEFAULT_MODE and output_format == JSON_FORMAT
    for record, result in zip(records, scored.examples, strict=True):
        _audit_stored_parse(record, result, same)
    return ScoredRun(
        model_kind=model_kind,
        model_identity=model_identity,
        adapter=adapter_info,
        parser_version=scored.parser_version,
        decoding=run_decoding,
        test_split_sha256=split.sha256,
        bootstrap=settings,
        scored=scored,
        prompt_format=prompt_format,
        dataset=split.dataset,
        chat_template_kwargs=chat_template_kwargs,
        template_date=template_date,
    )
