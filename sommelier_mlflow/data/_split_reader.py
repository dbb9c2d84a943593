"""The test-split reader, which refuses anything it cannot trust.

A comparison is only as good as the files under it, so nothing here guesses:
an unknown schema version, a mistyped field, a duplicate id, a malformed
gold call or a translated row without its root stops the read with a
:class:`~sommelier_mlflow.errors.DataError` naming the file and the 1-based
line. A stored prompt whose digest does not match its text is worse than bad
input (it means something rewrote a prompt after it was digested) and raises
:class:`~sommelier_mlflow.errors.InvariantViolationError`.

Three test-split row kinds are read:

``sommelier_mlflow.test_example.v1`` (native)
    ``example_id``, ``query``, ``tools``, ``gold_calls`` (a list of zero or
    more calls) or ``gold_call`` (one call); optional ``language`` (default ``"en"``),
    ``source_example_id``, ``prompt_text`` + ``prompt_sha256``. No other field.
    A conversation row gives ``messages`` (the history before the assistant
    turn to predict) instead of ``query``, and may give ``conversation_id``
    and ``turn``; rows sharing a ``conversation_id`` must offer the same tools
    (``docs/conversations.md``). A multi-turn row (BFCL's ``multi_turn_*``)
    adds ``multi_turn`` (checked as ``data/_multi_turn.py`` describes), with
    the first user turn as ``messages`` and ``gold_calls`` ``[]``.

``sommelier.prepared_example.v2`` (original Sommelier pipeline, prepared)
    ``example_id``, ``source_id``, ``language``, ``source_example_id``,
    ``query``, ``tools``, ``gold_calls``, ``split``, ``query_sha256``,
    ``source_revision``: all required, as the pipeline declares them.
    ``source_id``, ``split``, ``query_sha256`` and ``source_revision`` are
    type-checked and otherwise not used (the pipeline's query normalisation
    is not part of its published schema, so ``query_sha256`` is not recomputed).

``sommelier.formatted_example.v2`` (original Sommelier pipeline, formatted)
    ``example_id``, ``split``, ``language``, ``source_example_id``,
    ``messages``, ``prompt_text``, ``target_text``, ``full_text``,
    ``prompt_sha256``, ``tokenizer_id``, ``tokenizer_revision``,
    ``template_policy``. These rows carry no separate query, tools or gold
    field, so they are recovered: the query is the user message, the gold
    call is ``target_text`` (canonical JSON list holding the call), and the
    tools are the JSON after the ``Available tools:`` line that pipeline
    appends to its system message. The prompt is replayed byte for byte.

Every row kind may hold zero, one or several gold calls; a split that holds
anything but exactly one per example can only be scored in ``calls`` mode,
which :func:`check_scoring_mode` enforces before any scoring starts.

Fields of the original pipeline's rows beyond those listed are ignored,
because later pipeline versions may add provenance fields this package does
not use; the listed ones are required.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Final

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads
from sommelier_mlflow._json import sha256_text as _sha256_text
from sommelier_mlflow.data._conversations import CONVERSATION_SLICE_FIELDS, messages_problem
from sommelier_mlflow.data._format import read_template_date
from sommelier_mlflow.data._jsonl import JsonlReader
from sommelier_mlflow.data._row_checks import _HEX64, _kind, _Line, _schema_of
from sommelier_mlflow.data._schemas import (
    DEFAULT_PROMPT_FORMAT,
    TEST_EXAMPLE_SCHEMA,
    TestExample,
    TestSplit,
)
from sommelier_mlflow.data._tools import gold_call_problem, tools_problem
from sommelier_mlflow.errors import ConfigError, DataError, InputError
from sommelier_mlflow.toolcalls import scoring_mode

__all__ = [
    "PREPARED_EXAMPLE_V2_SCHEMA",
    "FORMATTED_EXAMPLE_V2_SCHEMA",
    "TEST_SPLIT_SCHEMAS",
    "read_test_split",
    "check_scoring_mode",
]

PREPARED_EXAMPLE_V2_SCHEMA: Final = "sommelier.prepared_example.v2"
FORMATTED_EXAMPLE_V2_SCHEMA: Final = "sommelier.formatted_example.v2"
#: Every ``schema_version`` a test-split row may carry.
TEST_SPLIT_SCHEMAS: Final = (
    TEST_EXAMPLE_SCHEMA,
    PREPARED_EXAMPLE_V2_SCHEMA,
    FORMATTED_EXAMPLE_V2_SCHEMA,
)

_NATIVE_REQUIRED: Final = frozenset({"schema_version", "example_id", "tools"})
_NATIVE_OPTIONAL: Final = frozenset(
    {
        "query",
        "messages",
        "conversation_id",
        "turn",
        "language",
        "source_example_id",
        "gold_calls",
        "gold_call",
        "prompt_text",
        "prompt_sha256",
        "prompt_format",
        "chat_template_kwargs",
        "template_date",
        "multi_turn",
    }
)
_PREPARED_V2_FIELDS: Final = (
    "example_id",
    "source_id",
    "language",
    "source_example_id",
    "query",
    "tools",
    "gold_calls",
    "split",
    "query_sha256",
    "source_revision",
)
_FORMATTED_V2_FIELDS: Final = (
    "example_id",
    "split",
    "language",
    "source_example_id",
    "messages",
    "prompt_text",
    "target_text",
    "full_text",
    "prompt_sha256",
    "tokenizer_id",
    "tokenizer_revision",
    "template_policy",
)
_SPLIT_NAMES: Final = frozenset({"train", "validation", "test"})
# The original pipeline ends its system message with this line and then the
# compact JSON of the tools; a JSON string cannot contain a raw newline, so
# the last occurrence is always the real separator.
_FORMATTED_TOOLS_MARKER: Final = "\nAvailable tools:\n"


def _checked_tools(src: _Line, tools: object) -> list[Any]:
    problem = tools_problem(tools)
    if problem is not None or not isinstance(tools, list):
        raise src.error(problem or "'tools' must be a list")
    return tools


def _gold_list(src: _Line, calls: object, tools: list[Any], *, field: str) -> list[dict[str, Any]]:
    """Check a list of gold calls: zero (abstention), one, or several (parallel calls).

    The reader accepts every length; whether a split may hold anything but
    single calls is the scoring mode's decision (:func:`check_scoring_mode`),
    so the same file can be read once and refused with a precise reason.
    """
    if not isinstance(calls, list):
        raise src.error(f"field {field!r} must be a list of calls, got {_kind(calls)}")
    return [_checked_gold(src, call, tools) for call in calls]


def _checked_gold(src: _Line, call: object, tools: list[Any]) -> dict[str, Any]:
    problem = gold_call_problem(call, tools)
    if problem is not None or not isinstance(call, dict):
        raise src.error(problem or "the gold call must be an object")
    return call


def _checked_prompt(src: _Line, text: object, digest: object) -> tuple[str, str]:
    if not isinstance(text, str) or not text:
        raise src.error(f"field 'prompt_text' must be a non-empty string, got {_kind(text)}")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise src.error("field 'prompt_sha256' must be 64 lowercase hex digits")
    actual = _sha256_text(text)
    if actual != digest:
        raise src.invariant(
            f"prompt_sha256 {digest} does not match the SHA-256 of prompt_text ({actual}); "
            "the stored prompt was altered after it was digested, so it cannot be replayed: "
            "regenerate the formatted split"
        )
    return text, digest


def _build_example(
    src: _Line, slice_by: tuple[str, ...], default_language: str | None, **fields: Any
) -> TestExample:
    """Build one example from its checked fields plus those every row kind reads alike.

    Those are the id, the language (``default_language`` where the row kind
    lets it be left out), the translation root and the declared slice values.
    """
    fields["example_id"] = src.string("example_id")
    fields["language"] = src.language(default=default_language)
    fields["source_example_id"] = src.optional_string("source_example_id")
    fields["slice_values"] = _declared_values(src, slice_by)
    try:
        return TestExample(**fields)
    except InputError as exc:
        raise src.error(str(exc)) from exc


def _declared_values(src: _Line, slice_by: tuple[str, ...]) -> dict[str, str]:
    """The row's declared slice fields: each must be there, as a non-empty string."""
    values: dict[str, str] = {}
    for field in slice_by:
        if field in CONVERSATION_SLICE_FIELDS:
            continue  # derived from the history, not read from the row
        if field not in src.row:
            raise src.error(
                f"missing slice field {field!r} (declared with --slice-by); every row needs it"
            )
        value = src.row[field]
        if not isinstance(value, str) or not value:
            raise src.error(f"slice field {field!r} must be a non-empty string, got {_kind(value)}")
        values[field] = value
    return values


def _native_example(src: _Line, slice_by: tuple[str, ...] = ()) -> TestExample:
    declared = frozenset(slice_by) - frozenset(CONVERSATION_SLICE_FIELDS)
    src.exact_fields(_NATIVE_REQUIRED, _NATIVE_OPTIONAL | declared)
    tools = _checked_tools(src, src.row["tools"])
    has_list, has_one = "gold_calls" in src.row, "gold_call" in src.row
    if has_list == has_one:
        raise src.error(
            "give the gold answer as exactly one of 'gold_calls' (a list of calls) "
            "or 'gold_call' (one call)"
        )
    gold_calls = (
        _gold_list(src, src.row["gold_calls"], tools, field="gold_calls")
        if has_list
        else [_checked_gold(src, src.row["gold_call"], tools)]
    )
    prompt_text: str | None = None
    prompt_sha256: str | None = None
    if "prompt_text" in src.row or "prompt_sha256" in src.row:
        if "prompt_text" not in src.row or "prompt_sha256" not in src.row:
            raise src.error("'prompt_text' and 'prompt_sha256' must be given together")
        prompt_text, prompt_sha256 = _checked_prompt(
            src, src.row["prompt_text"], src.row["prompt_sha256"]
        )
    prompt_format = DEFAULT_PROMPT_FORMAT
    if "prompt_format" in src.row:
        if prompt_text is None:
            raise src.error("'prompt_format' names how 'prompt_text' was rendered; give both")
        prompt_format = src.string("prompt_format")
    chat_template_kwargs: dict[str, Any] = {}
    if "chat_template_kwargs" in src.row:
        chat_template_kwargs = src.row["chat_template_kwargs"]
        if prompt_text is None or not isinstance(chat_template_kwargs, dict):
            raise src.error(
                "'chat_template_kwargs' is the object of template variables 'prompt_text' was "
                "rendered with; give both"
            )
    template_date = None
    if "template_date" in src.row:
        if prompt_text is None:
            raise src.error("'template_date' is the day 'prompt_text' was rendered on; give both")
        template_date = src.string("template_date")
        try:
            read_template_date(template_date)
        except ConfigError as exc:
            raise src.error(str(exc)) from exc
    return _build_example(
        src,
        slice_by,
        "en",
        **_request(src, tools),
        tools=tools,
        gold_calls=gold_calls,
        prompt_text=prompt_text,
        prompt_sha256=prompt_sha256,
        prompt_format=prompt_format,
        chat_template_kwargs=chat_template_kwargs,
        template_date=template_date,
        multi_turn=src.row.get("multi_turn"),
    )


def _request(src: _Line, tools: list[Any]) -> dict[str, Any]:
    """The request of a native row: its ``query``, or its ``messages`` with their conversation.

    A row has exactly one of the two; ``conversation_id`` and ``turn`` belong
    to a conversation row only.
    """
    has_query, has_messages = "query" in src.row, "messages" in src.row
    if not has_query and not has_messages:
        raise src.error(
            "missing field 'query' (a string); a conversation row gives 'messages' (the "
            "conversation before the assistant turn to predict) instead"
        )
    if has_query and has_messages:
        raise src.error(
            "give the request as exactly one of 'query' (a string) or 'messages' (the "
            "conversation before the assistant turn to predict)"
        )
    if has_query:
        for key in ("conversation_id", "turn"):
            if key in src.row:
                raise src.error(f"field {key!r} belongs to a conversation row (with 'messages')")
        return {"query": src.string("query")}
    turn = src.row.get("turn")
    problem = messages_problem(src.row["messages"], tools, turn)
    if problem is not None:
        raise src.error(problem)
    return {
        "query": "",
        "messages": src.row["messages"],
        "conversation_id": src.optional_string("conversation_id"),
        "turn": turn,
    }


def _check_legacy_common(src: _Line, fields: tuple[str, ...]) -> None:
    for key in fields:
        src.require(key)
    split = src.row["split"]
    if split not in _SPLIT_NAMES:
        raise src.error(f"field 'split' must be train, validation or test, got {split!r}")
    if src.row["source_example_id"] is not None:
        src.optional_string("source_example_id")


def _prepared_v2_example(src: _Line, slice_by: tuple[str, ...] = ()) -> TestExample:
    _check_legacy_common(src, _PREPARED_V2_FIELDS)
    for key in ("source_id", "query_sha256", "source_revision"):
        src.string(key)
    tools = _checked_tools(src, src.row["tools"])
    return _build_example(
        src,
        slice_by,
        None,
        query=src.string("query"),
        tools=tools,
        gold_calls=_gold_list(src, src.row["gold_calls"], tools, field="gold_calls"),
    )


def _formatted_messages(src: _Line) -> tuple[str, str, str | None]:
    """Return (system, user, assistant-or-None) contents of a formatted row."""
    messages = src.row["messages"]
    roles = ("system", "user", "assistant")
    if not isinstance(messages, list) or len(messages) not in (2, 3):
        raise src.error("field 'messages' must list system, user and (optionally) assistant")
    contents: list[str] = []
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.keys() != {"role", "content"}
            or message["role"] != roles[index]
            or not isinstance(message["content"], str)
        ):
            raise src.error(
                f"messages[{index}] must be {{'role': {roles[index]!r}, 'content': string}}"
            )
        contents.append(message["content"])
    return contents[0], contents[1], contents[2] if len(contents) == 3 else None


def _formatted_v2_example(src: _Line, slice_by: tuple[str, ...] = ()) -> TestExample:
    _check_legacy_common(src, _FORMATTED_V2_FIELDS)
    for key in ("full_text", "tokenizer_id", "template_policy"):
        src.string(key, non_empty=False)
    revision = src.row["tokenizer_revision"]
    if revision is not None and not isinstance(revision, str):
        raise src.error(
            f"field 'tokenizer_revision' must be a string or null, got {_kind(revision)}"
        )
    system, query, assistant = _formatted_messages(src)
    if not query.strip():
        raise src.error("the user message (the query) is empty")
    _, marker, tools_json = system.rpartition(_FORMATTED_TOOLS_MARKER)
    if not marker:
        raise src.error(
            "cannot recover the tool list: the system message has no 'Available tools:' line "
            "followed by the JSON tool list"
        )
    try:
        tools_value = loads(tools_json)
    except (JSONDecodeError, RecursionError) as exc:
        raise src.error(f"the tool list in the system message is not valid JSON ({exc})") from exc
    tools = _checked_tools(src, tools_value)
    target_text = src.string("target_text")
    if assistant is not None and assistant != target_text:
        raise src.error("the assistant message differs from 'target_text'")
    try:
        target = loads(target_text)
    except (JSONDecodeError, RecursionError) as exc:
        raise src.error(f"'target_text' is not valid JSON ({exc})") from exc
    gold_calls = _gold_list(src, target, tools, field="target_text")
    prompt_text, prompt_sha256 = _checked_prompt(
        src, src.row["prompt_text"], src.row["prompt_sha256"]
    )
    return _build_example(
        src,
        slice_by,
        None,
        query=query,
        tools=tools,
        gold_calls=gold_calls,
        prompt_text=prompt_text,
        prompt_sha256=prompt_sha256,
    )


_ROW_READERS: Final = {
    TEST_EXAMPLE_SCHEMA: _native_example,
    PREPARED_EXAMPLE_V2_SCHEMA: _prepared_v2_example,
    FORMATTED_EXAMPLE_V2_SCHEMA: _formatted_v2_example,
}


def _check_pairs(examples: list[TestExample], sources: dict[str, _Line]) -> None:
    """Every translated row must join to exactly one untranslated root in the split.

    Matched-pair language gaps are computed on these joins; a dangling or
    chained link would silently shrink or distort the pair set.
    """
    by_id = {example.example_id: example for example in examples}
    pair_rows: dict[tuple[str, str], str] = {}
    for example in examples:
        root_id = example.source_example_id
        if root_id is None:
            continue
        src = sources[example.example_id]
        if root_id == example.example_id:
            raise src.error("source_example_id points at the row itself")
        root = by_id.get(root_id)
        if root is None:
            raise src.error(
                f"translated row's root {root_id!r} (source_example_id) is not in this split; "
                "keep each root in the same file as its translations"
            )
        if root.source_example_id is not None:
            raise src.error(
                f"root {root_id!r} ({sources[root_id].where}) is itself a translation of "
                f"{root.source_example_id!r}; source_example_id must name an untranslated root"
            )
        if root.language == example.language:
            raise src.error(
                f"translated row has the same language {example.language!r} as its root "
                f"{root_id!r}; a translation must be in another language"
            )
        key = (root_id, example.language)
        if key in pair_rows:
            raise src.error(
                f"root {root_id!r} already has a {example.language!r} translation at "
                f"{pair_rows[key]}; keep one translation per root and language"
            )
        pair_rows[key] = src.where


def _check_conversations(examples: list[TestExample], sources: dict[str, _Line]) -> None:
    """Rows of one conversation must offer the same tools: otherwise the id is reused.

    The turns of a conversation are resampled together; two unrelated rows
    under one ``conversation_id`` would be treated as one user's task.
    """
    first: dict[str, TestExample] = {}
    for example in examples:
        if example.conversation_id is None:
            continue
        seen = first.setdefault(example.conversation_id, example)
        if seen is not example and canonical_json(seen.tools) != canonical_json(example.tools):
            raise sources[example.example_id].error(
                f"conversation_id {example.conversation_id!r} is reused: this row offers other "
                f"tools than {sources[seen.example_id].where}; give unrelated conversations "
                "their own ids"
            )


def checked_examples(
    sources: Iterable[_Line], slice_by: tuple[str, ...]
) -> tuple[TestExample, ...]:
    """Build and check every row's example, then the split-wide rules: unique ids, pairs.

    Files and MLflow evaluation datasets both come through here, so a row is
    held to the same rules wherever it is stored.
    """
    examples: list[TestExample] = []
    seen: dict[str, _Line] = {}
    for src in sources:
        example = _ROW_READERS[_schema_of(src, TEST_SPLIT_SCHEMAS)](src, slice_by)
        first = seen.get(example.example_id)
        if first is not None:
            raise src.error(f"duplicate example_id {example.example_id!r} (first at {first.where})")
        seen[example.example_id] = src
        examples.append(example)
    _check_pairs(examples, seen)
    _check_conversations(examples, seen)
    return tuple(examples)


def read_test_split(path: str | os.PathLike[str], *, slice_by: Iterable[str] = ()) -> TestSplit:
    """Read and validate a test split, streaming it line by line.

    Args:
        path: A JSONL file of native ``sommelier_mlflow.test_example.v1`` rows
            and/or rows of the original pipeline (see the module docstring).
        slice_by: Declared slice fields (``--slice-by``) beyond ``language``:
            every row must carry each as a non-empty string; on native rows
            they are the only extra fields allowed.

    Returns:
        The examples in file order and the SHA-256 of the file's bytes.

    Raises:
        DataError: On any malformed, mistyped, duplicate or dangling row, or an
            empty file; the message names the file and line.
        InvariantViolationError: If a stored prompt does not match its digest.
    """
    reader = JsonlReader(path)
    examples = checked_examples(
        (_Line(reader.path, line_no, row) for line_no, row in reader), tuple(slice_by)
    )
    if not examples:
        raise DataError("test split is empty; it needs at least one example", path=reader.path)
    return TestSplit(path=reader.path, sha256=reader.sha256, examples=examples)


def check_scoring_mode(split: TestSplit, scoring: str) -> None:
    """Refuse a split whose gold calls the declared scoring mode cannot score.

    The mode is declared, never guessed from the data: a split that happens
    to hold one multi-call row must not silently switch to other metrics.
    The registered mode says which gold-call counts it scores: ``single``
    (the spec's five metrics) needs exactly one gold call per example;
    ``calls`` accepts zero, one or several.

    Raises:
        ConfigError: If ``scoring`` is not a known mode.
        DataError: Naming the file and line of the first example with zero or
            several gold calls when ``scoring`` is ``single``.
    """
    mode = scoring_mode(scoring)
    for line, example in enumerate(split.examples, start=1):
        problem = mode.gold_problem(len(example.gold_calls))
        if problem is not None:
            raise DataError(f"example {example.example_id!r} {problem}", path=split.path, line=line)
