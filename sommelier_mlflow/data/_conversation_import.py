"""The one pipeline every conversation input format feeds: checks, examples, split, summary.

An importer (``data/_import_<name>.py``) only translates one source record
into OpenAI-shaped messages (:class:`SourceConversation`), noting what it
could not read. Everything else is decided here, once, for every format:

- **Examples.** Every assistant turn is an example: its ``messages`` are the
  conversation before it, its ``gold_calls`` the calls it made (``[]`` when it
  answered in text: an abstention example), ``turn`` its 1-based index among
  the conversation's assistant turns, ``example_id`` ``"<conversation_id>:<turn>"``.
  Parallel calls and text turns are kept: they are the data.
- **Drops, in assistant turns.** A problem found at message ``i`` drops every
  assistant turn from ``i`` on (their history holds the problem); earlier
  turns stay examples. A problem of the whole conversation (unreadable
  tools, a reused id) drops every turn. A turn with ``weight: 0`` is dropped
  as an example but stays in the history of later turns. So, per language,
  turns in splits + unassigned turns + dropped turns = assistant turns.
- **Split by conversation.** Conversations with at least one example are
  shuffled with a seeded numpy Generator and cut into the requested numbers
  of conversations; all turns of one conversation land in one split.
- ``strict``: the first drop is a :class:`DataError` naming file, line and
  message (exit 2), and nothing is written.

Reasons, in the order the checks run on a conversation:
``invalid_conversation`` (the record has no readable conversation),
``invalid_language``, ``duplicate_conversation_id``, ``unreadable_tools``,
``no_tools``, then per message ``roles_out_of_order``, ``unreadable_call``
(call text or ``arguments`` that do not read), ``unknown_tool`` (a call to a
tool the row does not offer), ``empty_assistant_turn`` (neither content nor
calls), ``tool_result_without_call``, and per turn ``weight_zero``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

import numpy as np

from sommelier_mlflow._json import (
    JSONDecodeError,
    canonical_json,
    loads,
    sha256_text,
)
from sommelier_mlflow.data._conversations import message_problem
from sommelier_mlflow.data._input_formats import InputFormat
from sommelier_mlflow.data._jsonl import JsonlReader, open_data_file
from sommelier_mlflow.data._prepare import (
    DEFAULT_MAX_QUERY_CHARS,
    DEFAULT_MIN_QUERY_CHARS,
    SPLIT_NAMES,
    UNASSIGNED,
    PrepareResult,
    check_split_sizes,
    drop_counts,
    identifier,
    write_prepared,
)
from sommelier_mlflow.data._schemas import (
    DROP_SUMMARY_SCHEMA,
    TEST_EXAMPLE_SCHEMA,
    validate_language,
)
from sommelier_mlflow.data._tools import tools_problem
from sommelier_mlflow.errors import ConfigError, DataError, InputError
from sommelier_mlflow.toolcalls import CallsParseResult, output_format

__all__ = [
    "CONVERSATION_DROP_REASONS",
    "ConversationProblem",
    "SourceConversation",
    "ConversationReader",
    "openai_tools",
    "openai_call",
    "conversation_format",
    "read_records",
    "conversation_rows",
    "prepare_conversations",
    "json_values",
    "pythonic_calls",
    "literal_value",
    "calls_before",
    "tool_results",
    "add_tool_results",
    "assistant_calls",
    "from_value",
    "dump_content",
]

#: Every drop reason, in the order the checks run.
CONVERSATION_DROP_REASONS: Final = (
    "invalid_conversation",
    "invalid_language",
    "duplicate_conversation_id",
    "unreadable_tools",
    "no_tools",
    "roles_out_of_order",
    "unreadable_call",
    "unknown_tool",
    "empty_assistant_turn",
    "missing_content",
    "tool_result_without_call",
    "call_without_result",
    "weight_zero",
)
_NO_EXAMPLE: Final = "without_examples"  # every turn dropped, or no assistant turn at all


@dataclass(frozen=True, slots=True)
class ConversationProblem:
    """Why a conversation (or its turns from one message on) cannot be used.

    Attributes:
        reason: One of :data:`CONVERSATION_DROP_REASONS`.
        detail: What exactly is wrong, for ``--strict``'s message.
    """

    reason: str
    detail: str


@dataclass(slots=True)
class SourceConversation:
    """One source record, translated into the contract's OpenAI-shaped messages.

    Attributes:
        messages: ``system``/``user``/``assistant``/``tool`` messages; an
            assistant message's ``tool_calls`` carry ``arguments`` as objects;
            an optional ``weight`` (OpenAI) is read and then left out.
        labels: Where each message sits in the source, for messages
            (``"messages[3]"``, ``"conversations[2]"``, ``"chat, turn 4"``).
        tools: The offered tools as ``{name, description, parameters}``, or
            ``None`` when the record's tools do not read (see ``problem``).
        conversation_id: The record's own id, if it has one.
        language: The record's ``language`` field as it is (``"en"`` if absent).
        problem: A problem of the whole conversation, found by the importer.
        problems: Problems the importer found at one message (its index).
    """

    messages: list[dict[str, Any]]
    labels: list[str]
    tools: list[dict[str, Any]] | None
    conversation_id: object = None
    language: object = "en"
    problem: ConversationProblem | None = None
    problems: dict[int, ConversationProblem] = field(default_factory=dict)

    @classmethod
    def of_record(
        cls,
        record: Mapping[str, Any],
        messages: list[dict[str, Any]],
        labels: list[str],
        tools: tuple[list[dict[str, Any]] | None, ConversationProblem | None],
        problems: dict[int, ConversationProblem],
    ) -> SourceConversation:
        """A record's conversation: its id and language read as every format names them."""
        offered, problem = tools
        return cls(
            messages=messages,
            labels=labels,
            tools=offered,
            conversation_id=record.get("conversation_id", record.get("id")),
            language=record.get("language", "en"),
            problem=problem,
            problems=problems,
        )


def conversation_turns(
    record: Mapping[str, Any],
) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """A ShareGPT-style record's ``conversations`` list, and the messages it starts with.

    Those are its ``system`` column as a system message, when it has one; the
    labels name where each message sits in the source.

    Raises:
        TypeError: ``conversations`` is not a list (the record is dropped as malformed).
    """
    turns = record["conversations"]
    if not isinstance(turns, list):
        raise TypeError("'conversations' must be a list")
    system = record.get("system")
    if isinstance(system, str) and system:
        return turns, [{"role": "system", "content": system}], ["system"]
    return turns, [], []


#: An importer: one source record (a JSON object) -> its conversation.
ConversationReader = Callable[[Mapping[str, Any]], SourceConversation]


def openai_tools(value: object) -> tuple[list[dict[str, Any]] | None, ConversationProblem | None]:
    """Tools as the split holds them (``{name, description, parameters}``).

    Read from the OpenAI shape (``{"type": "function", "function": ...}``), the
    bare shape, or a JSON string of either.

    Returns:
        The tools and ``None``, or ``None`` and why they do not read.
    """
    if isinstance(value, str):
        try:
            value = loads(value)
        except (JSONDecodeError, RecursionError) as exc:
            return None, ConversationProblem("unreadable_tools", f"tools are not JSON: {exc}")
    if value is None:
        return [], None
    if not isinstance(value, list):
        return None, ConversationProblem(
            "unreadable_tools", f"tools must be a list, got {type(value).__name__}"
        )
    tools: list[dict[str, Any]] = []
    for item in value:
        if isinstance(item, dict) and item.get("type") == "function" and "function" in item:
            item = item["function"]
        tools.append(item)
    if not tools:
        return [], None
    problem = tools_problem(tools)
    if problem is not None:
        return None, ConversationProblem("unreadable_tools", problem)
    return tools, None


def openai_call(
    name: object, arguments: object, call_id: object = None
) -> tuple[dict[str, Any] | None, ConversationProblem | None]:
    """One history call in the contract's shape, ``arguments`` read from JSON text if need be.

    Returns:
        ``{"id"?, "type": "function", "function": {"name", "arguments": object}}``
        and ``None``, or ``None`` and why the call does not read.
    """
    if not isinstance(name, str) or not name:
        return None, ConversationProblem(
            "unreadable_call", f"a call needs a non-empty string name, got {name!r}"
        )
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments)
        except (JSONDecodeError, RecursionError) as exc:
            return None, ConversationProblem(
                "unreadable_call", f"arguments of {name!r} are not JSON: {exc}"
            )
    if not isinstance(arguments, dict):
        return None, ConversationProblem(
            "unreadable_call",
            f"arguments of {name!r} must be a JSON object, got {type(arguments).__name__}",
        )
    call: dict[str, Any] = {}
    if isinstance(call_id, str) and call_id:
        call["id"] = call_id
    call["type"] = "function"
    call["function"] = {"name": name, "arguments": arguments}
    return call, None


# ---------------------------------------------------------------------------
# Reading a file as its source ships it: a JSON array or JSONL.

# A JSON string (the unrolled form: one step per run of plain characters), or a
# bracket, or a newline (newlines inside strings are escaped in valid JSON).
_OPENING: Final = re.compile(r"[\[{]")
_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}\n]')


def assistant_calls(
    message: dict[str, Any],
    items: Iterable[Any],
    unpack: Callable[[Any], tuple[object, object] | ConversationProblem],
) -> tuple[dict[str, Any], ConversationProblem | None]:
    """``message`` with the calls ``items`` hold as its ``tool_calls``, or the first problem.

    Every format writes its calls its own way; ``unpack`` reads one item as
    ``(name, arguments)`` (or says why it does not read), and each call is then
    read as :func:`openai_call` reads it. ``message`` gets ``tool_calls`` only
    when there is at least one call and no problem.
    """
    calls: list[dict[str, Any]] = []
    for item in items:
        unpacked = unpack(item)
        if isinstance(unpacked, ConversationProblem):
            return message, unpacked
        call, problem = openai_call(*unpacked)
        if problem is not None:
            return message, problem
        assert call is not None
        calls.append(call)
    if calls:
        message["tool_calls"] = calls
    return message, None


def from_value(turn: object) -> tuple[object, object]:
    """A ShareGPT-style turn's ``from`` and ``value``; ``None`` each when the turn is no object."""
    if not isinstance(turn, dict):
        return None, None
    return turn.get("from"), turn.get("value")


def _element_lines(text: str) -> list[int]:
    """The 1-based line each object or array in a top-level JSON array starts on (one scan)."""
    lines: list[int] = []
    depth = 0
    line = 1
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token in "[{":
            if depth == 1:
                lines.append(line)
            depth += 1
        elif token in "]}":
            depth -= 1
    return lines


def read_records(path: str | os.PathLike[str]) -> tuple[list[tuple[int, Any]], str]:
    """The records of ``path`` with their line numbers, and the file's SHA-256.

    A file whose first non-blank byte is ``[`` is one JSON array (how
    LLaMA-Factory and many Hugging Face datasets ship); anything else is
    JSONL, read by the strict line reader.

    Raises:
        DataError: Not JSON, not objects, or empty.
    """
    name = os.fspath(path)
    with open_data_file(name) as handle:
        data = handle.read()
    if data.lstrip()[:1] != b"[":
        reader = JsonlReader(name)
        records: list[tuple[int, Any]] = list(reader)
        digest = reader.sha256
    else:
        try:
            text = data.decode("utf-8")
            value = loads(text, reject_duplicate_keys=True)
        except (UnicodeDecodeError, JSONDecodeError, RecursionError) as exc:
            raise DataError(
                f"not a valid JSON array ({exc}); fix or convert it to JSONL", path=name
            ) from exc
        if not isinstance(value, list):
            raise DataError("expected a JSON array of records", path=name)
        for position, record in enumerate(value, start=1):
            if not isinstance(record, dict):
                raise DataError(
                    f"array element {position} is a JSON {type(record).__name__}, expected "
                    "one object per conversation",
                    path=name,
                )
        # every element is an object, so each one starts with a '{' at depth 1
        records = list(zip(_element_lines(text), value, strict=True))
        digest = sha256_text(text)
    if not records:
        raise DataError("raw file holds no records", path=name)
    return records, digest


# ---------------------------------------------------------------------------
# One conversation -> its turns.


@dataclass(slots=True)
class _Turn:
    """One assistant turn: an example, or a drop with its reason."""

    index: int
    number: int
    reason: str | None = None


@dataclass(slots=True)
class _Conversation:
    line: int
    conversation_id: str
    language: str
    source: SourceConversation
    turns: list[_Turn]
    first_problem: tuple[int, ConversationProblem] | None = None
    split: str | None = None


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    """The message as a split row holds it: the contract's keys only (``weight`` left out)."""
    role = message.get("role")
    out: dict[str, Any] = {"role": role, "content": message.get("content")}
    if role == "assistant" and message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    if role == "tool":
        for key in ("tool_call_id", "name"):
            if isinstance(message.get(key), str) and message[key]:
                out[key] = message[key]
    return out


def _history_problem(
    message: dict[str, Any],
    previous: str | None,
    pending: list[tuple[str | None, str]],
    offered: frozenset[str],
) -> ConversationProblem | None:
    """The split reader's check of the message as the row will hold it (``_clean``), as a drop.

    One check for both, so a row ``prepare`` keeps always reads back.
    """
    problem = message_problem(_clean(message), previous, pending, offered)
    return None if problem is None else ConversationProblem(*problem)


def _turns(
    source: SourceConversation,
) -> tuple[list[_Turn], tuple[int, ConversationProblem] | None]:
    """Every assistant turn with its fate, and the first problem (message index, problem)."""
    first: tuple[int, ConversationProblem] | None = (
        (0, source.problem) if source.problem is not None else None
    )
    offered = frozenset(tool["name"] for tool in source.tools or ())
    pending: list[tuple[str | None, str]] = []
    previous: str | None = None
    turns: list[_Turn] = []
    for index, message in enumerate(source.messages):
        if message.get("role") == "assistant":
            turns.append(_Turn(index=index, number=len(turns) + 1))
        if first is None:
            problem = source.problems.get(index) or _history_problem(
                message, previous, pending, offered
            )
            if problem is not None:
                first = (index, problem)
        previous = message.get("role") if isinstance(message.get("role"), str) else previous
    for turn in turns:
        if first is not None and turn.index >= first[0]:
            turn.reason = first[1].reason
        elif source.messages[turn.index].get("weight") == 0:
            turn.reason = "weight_zero"
    return turns, first


def _read_conversations(
    records: list[tuple[int, Any]], read: ConversationReader
) -> list[_Conversation]:
    conversations: list[_Conversation] = []
    seen: dict[str, int] = {}
    for number, (line, record) in enumerate(records, start=1):
        try:
            source = read(record)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a malformed record
            source = SourceConversation(
                messages=[],
                labels=[],
                tools=None,
                problem=ConversationProblem(
                    "invalid_conversation", f"the record does not read: {exc}"
                ),
            )
        own_id = identifier(source.conversation_id)
        conversation_id = own_id if own_id is not None else f"conversation-{number}"
        try:
            language = validate_language(source.language)
        except InputError as exc:
            language = "en"
            source.problem = source.problem or ConversationProblem("invalid_language", str(exc))
        if conversation_id in seen and source.problem is None:
            source.problem = ConversationProblem(
                "duplicate_conversation_id",
                f"conversation id {conversation_id!r} is already used at line "
                f"{seen[conversation_id]}",
            )
        seen.setdefault(conversation_id, line)
        if source.problem is None and source.tools is not None and not source.tools:
            source.problem = ConversationProblem("no_tools", "the conversation offers no tools")
        turns, first = _turns(source)
        conversations.append(_Conversation(line, conversation_id, language, source, turns, first))
    return conversations


def _first_drop(conversation: _Conversation) -> tuple[int, ConversationProblem, str] | None:
    """The conversation's first drop: message index, problem, and what ``--strict`` adds."""
    if conversation.first_problem is not None and not conversation.turns:
        index, problem = conversation.first_problem
        return (
            index,
            problem,
            ("a conversation without assistant turns; --strict stops at the first problem"),
        )
    for turn in conversation.turns:
        if turn.reason is None:
            continue
        if turn.reason == "weight_zero":
            index, problem = (
                turn.index,
                ConversationProblem("weight_zero", "an assistant turn with weight 0"),
            )
        else:
            assert conversation.first_problem is not None
            index, problem = conversation.first_problem
        return (
            index,
            problem,
            (
                "--strict stops at the first drop; without it the turn is dropped and counted in "
                "drop_summary.json"
            ),
        )
    return None


def _raise_first(conversations: list[_Conversation], path: str) -> None:
    """``--strict``: the first dropped turn, as a DataError naming file, line and message."""
    for conversation in conversations:
        drop = _first_drop(conversation)
        if drop is None:
            continue
        index, problem, note = drop
        labels = conversation.source.labels
        where = labels[index] if index < len(labels) else "the record"
        raise DataError(
            f"{where}: {problem.reason}: {problem.detail} ({note})",
            path=path,
            line=conversation.line,
        )


def conversation_rows(conversation: _Conversation) -> Iterator[dict[str, Any]]:
    """The split rows of one conversation's kept turns, in the contract's shape."""
    source = conversation.source
    history: list[dict[str, Any]] = []
    done = 0
    for turn in conversation.turns:
        if turn.reason is not None:
            continue
        history.extend(_clean(message) for message in source.messages[done : turn.index])
        done = turn.index
        calls = source.messages[turn.index].get("tool_calls") or []
        yield {
            "schema_version": TEST_EXAMPLE_SCHEMA,
            "example_id": f"{conversation.conversation_id}:{turn.number}",
            "language": conversation.language,
            "source_example_id": None,
            "messages": list(history),
            "tools": source.tools,
            "gold_calls": [
                {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
                for call in calls
            ],
            "conversation_id": conversation.conversation_id,
            "turn": turn.number,
        }


def _assign(
    conversations: list[_Conversation], sizes: Mapping[str, int], seed: int, path: str
) -> dict[str, list[_Conversation]]:
    usable = [c for c in conversations if any(turn.reason is None for turn in c.turns)]
    needed = sum(sizes.values())
    if len(usable) < needed:
        asked = ", ".join(f"{name} {sizes[name]}" for name in SPLIT_NAMES)
        raise ConfigError(
            f"{path}: only {len(usable)} conversations have a usable assistant turn, but the "
            f"split sizes ask for {needed} conversations ({asked}); lower the sizes or supply "
            "more conversations (drop_summary.json is not written: see --strict to find the "
            "first drop). Nothing was written."
        )
    order = np.random.default_rng(seed).permutation(len(usable))
    splits: dict[str, list[_Conversation]] = {name: [] for name in SPLIT_NAMES}
    start = 0
    for name in SPLIT_NAMES:
        chosen = sorted(int(index) for index in order[start : start + sizes[name]])
        for index in chosen:  # file order inside a split
            usable[index].split = name
            splits[name].append(usable[index])
        start += sizes[name]
    for index in order[start:]:
        usable[int(index)].split = UNASSIGNED
    return splits


def _summary(
    conversations: list[_Conversation],
    *,
    input_format: str,
    input_name: str,
    input_sha256: str,
    seed: int,
    sizes: Mapping[str, int],
) -> dict[str, Any]:
    split_conversations = dict.fromkeys([*SPLIT_NAMES, UNASSIGNED, _NO_EXAMPLE], 0)
    for conversation in conversations:
        split_conversations[conversation.split or _NO_EXAMPLE] += 1
    outcomes = (
        (conversation.language, turn.reason, conversation.split)
        for conversation in conversations
        for turn in conversation.turns
    )
    return {
        "schema_version": DROP_SUMMARY_SCHEMA,
        "input": {"file": input_name, "sha256": input_sha256, "rows": len(conversations)},
        "input_format": input_format,
        "counted_in": "assistant_turns",
        "seed": seed,
        "requested_split_sizes": dict(sizes),
        "split_sizes_count": "conversations",
        **drop_counts(CONVERSATION_DROP_REASONS, outcomes),
        "conversations": split_conversations,
    }


def prepare_conversations(
    raw_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int,
    split_sizes: Mapping[str, int],
    min_query_chars: int = DEFAULT_MIN_QUERY_CHARS,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
    keep_multi_call: bool = False,
    strict: bool = False,
    input_format: str,
    read: ConversationReader,
) -> PrepareResult:
    """Read a conversation file with ``read``, write its turns as split rows and a drop summary.

    ``split_sizes`` count conversations. Everything is computed before the
    first byte is written, each file atomically, so a failure leaves
    ``out_dir`` as it was.

    Raises:
        ConfigError: Options that do not apply to conversations, or too few conversations.
        DataError: A file that does not read, or (``strict``) the first drop.
    """
    sizes = check_split_sizes(seed, split_sizes)
    if keep_multi_call:
        raise ConfigError(
            f"--keep-multi-call applies to --input-format xlam only; {input_format!r} keeps "
            "every assistant turn (parallel calls and text answers included) already"
        )
    if (min_query_chars, max_query_chars) != (DEFAULT_MIN_QUERY_CHARS, DEFAULT_MAX_QUERY_CHARS):
        raise ConfigError(
            f"query length limits apply to --input-format xlam only; {input_format!r} rows "
            "carry messages, not a query"
        )
    if not isinstance(strict, bool):
        raise ConfigError(f"strict must be true or false, got {strict!r}")
    path = os.fspath(raw_path)
    records, digest = read_records(path)
    conversations = _read_conversations(records, read)
    if strict:
        _raise_first(conversations, path)
    splits = _assign(conversations, sizes, seed, path)
    summary = _summary(
        conversations,
        input_format=input_format,
        input_name=Path(path).name,
        input_sha256=digest,
        seed=seed,
        sizes=sizes,
    )
    rows = {
        name: tuple(row for conversation in splits[name] for row in conversation_rows(conversation))
        for name in SPLIT_NAMES
    }
    return write_prepared(out_dir, rows, rows, summary)


def conversation_format(name: str, description: str, read: ConversationReader) -> InputFormat:
    """An :class:`InputFormat` that reads records with ``read`` and runs this pipeline."""
    return InputFormat(
        name,
        description,
        prepare=partial(prepare_conversations, input_format=name, read=read),
        read=read,
    )


def json_values(text: str) -> list[Any]:
    """Every top-level JSON object or array in ``text`` that reads, in order (one linear scan).

    System prompts list their tools inside prose (ToolACE: an array after a
    sentence; Glaive: objects one after another), so the values are found
    by bracket matching, strings skipped inside a value only (a quote in the
    prose opens no string), and each span is read strictly. A span that does
    not read is skipped whole (values nested in it are not looked for), so the
    scan stays linear.
    """
    values: list[Any] = []
    pos = 0
    while (opening := _OPENING.search(text, pos)) is not None:
        start = opening.start()
        depth = 0
        end = None
        for match in _TOKENS.finditer(text, start):
            token = match.group()
            if token in "[{":
                depth += 1
            elif token in "]}":
                depth -= 1
                if depth == 0:
                    end = match.end()
                    break
        if end is None:
            break
        with suppress(JSONDecodeError, RecursionError):
            values.append(loads(text[start:end]))
        pos = end  # never back inside a span: one pass over the text
    return values


def pythonic_calls(text: str) -> CallsParseResult:
    """``[f(a=1), g(b='x')]`` read by the product's ``pythonic`` output format (``ast`` only)."""
    decode = output_format("pythonic").decode
    assert decode is not None  # a registered native format always has its decoder
    return decode(text, ())


def literal_value(text: str) -> tuple[bool, Any]:
    """Read strict JSON, or a Python literal (single quotes, ``True``/``None``) without ``eval``.

    The literal is read by the product's pythonic decoder (``ast`` only, the
    same refusals of duplicate keys, long integers and non-JSON values as
    scoring), as the one keyword argument of a call it is given.

    Returns:
        ``(True, value)``, or ``(False, None)`` when the text reads as neither.
    """
    try:
        return True, loads(text)
    except (JSONDecodeError, RecursionError):
        pass
    decoded = pythonic_calls(f"[_literal(value={text})]")
    calls = decoded.calls
    if decoded.status != "ok" or calls is None or len(calls) != 1:
        return False, None
    (call,) = calls
    if call["name"] != "_literal" or set(call["arguments"]) != {"value"}:
        return False, None
    return True, call["arguments"]["value"]


def calls_before(messages: list[dict[str, Any]]) -> int:
    """How many calls the message just before made (0 unless it is an assistant turn)."""
    if messages and messages[-1].get("role") == "assistant":
        return len(messages[-1].get("tool_calls") or ())
    return 0


def add_tool_results(
    messages: list[dict[str, Any]], labels: list[str], content: object, label: str
) -> None:
    """Append the tool results ``content`` holds for the calls before it, labelled ``label``."""
    results = tool_results(content, calls_before(messages))
    messages.extend(results)
    labels.extend([label] * len(results))


def tool_results(content: object, calls: int) -> list[dict[str, Any]]:
    """One tool message per call from a message that holds the results of ``calls`` calls.

    ShareGPT's ``observation`` and ToolACE's ``tool`` turn hold the results of
    parallel calls in one message; a row needs one result per call. When the
    text is a JSON array with one element per call, each element is one
    result (in call order, answering the calls in order); otherwise the
    message stays one result (and, for several calls, the turn after it is
    ``call_without_result``).
    """
    text = dump_content(content)
    if calls > 1 and isinstance(text, str):
        with suppress(JSONDecodeError, RecursionError):
            value = loads(text)
            if isinstance(value, list) and len(value) == calls:
                return [{"role": "tool", "content": dump_content(item)} for item in value]
    return [{"role": "tool", "content": text}]


def dump_content(value: object) -> str | None:
    """Tool-result content as text: a string as it is, anything else as canonical JSON."""
    if value is None or isinstance(value, str):
        return value
    return canonical_json(value)
