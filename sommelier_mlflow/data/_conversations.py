"""Conversation histories: the checks every reader applies and the facts slices read.

A conversation example holds ``messages``, the OpenAI-shaped history before
the assistant turn to predict (``docs/conversations.md``). The split reader,
the evaluation-dataset records and the evaluator plugin all check a history
here, so it is refused in the same words wherever it is read. Like the
checks of :mod:`~sommelier_mlflow.data._tools`, these return a problem (which
names the message index) instead of raising, so each caller raises its own
kind of error. Every check is one pass over the messages: a history of
10,000 turns costs linear time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "TURN_SLICE_FIELD",
    "AFTER_SLICE_FIELD",
    "CONVERSATION_SLICE_FIELDS",
    "messages_problem",
    "message_problem",
    "assistant_turns",
    "conversation_slice_values",
]

#: Slice of the assistant turn's position: ``turn:1`` (the first answer) or ``turn:2+``.
TURN_SLICE_FIELD: Final = "turn"
#: Slice of what the turn follows: ``after:user`` or ``after:tool`` (a tool result).
AFTER_SLICE_FIELD: Final = "after"
#: The slices every conversation split gets by default, in this order.
CONVERSATION_SLICE_FIELDS: Final = (TURN_SLICE_FIELD, AFTER_SLICE_FIELD)

_ROLES: Final = frozenset({"system", "user", "assistant", "tool"})
_KEYS: Final = {
    "system": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "tool_calls", "name"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
}
# What may come right before each role (None: the history's start).
_MAY_FOLLOW: Final = {
    "system": frozenset({None}),
    "user": frozenset({None, "system", "user", "assistant"}),
    "assistant": frozenset({"user", "tool"}),
    "tool": frozenset({"assistant", "tool"}),
}


def _call_problem(call: object, offered: frozenset[str] | None) -> tuple[str, str] | None:
    """What is wrong with one assistant ``tool_calls`` entry, as ``(reason, text)``, or ``None``."""
    if not isinstance(call, dict) or not call.keys() <= {"id", "type", "function"}:
        return "unreadable_call", (
            "must be {'id' (optional), 'type': 'function', 'function': {name, arguments}}"
        )
    if call.get("type", "function") != "function":
        return "unreadable_call", f"has type {call.get('type')!r}; only 'function' calls are read"
    if "id" in call and (not isinstance(call["id"], str) or not call["id"]):
        return "unreadable_call", "has an 'id' that is not a non-empty string"
    function = call.get("function")
    if not isinstance(function, dict) or function.keys() != {"name", "arguments"}:
        return "unreadable_call", "needs 'function': exactly {'name', 'arguments'}"
    name = function["name"]
    if not isinstance(name, str) or not name:
        return "unreadable_call", "needs a non-empty string function name"
    if not isinstance(function["arguments"], dict):
        return "unreadable_call", (
            f"calls {name!r} with arguments that are not a JSON object; a split row holds them "
            "as an object (importers convert JSON-string arguments)"
        )
    if offered is not None and name not in offered:
        return "unknown_tool", f"calls tool {name!r}, which the row does not offer"
    return None


def _answered_call(
    message: dict[str, Any], pending: list[tuple[str | None, str]]
) -> tuple[str | None, str] | None:
    """The pending call a tool message answers: by id, else by name, else the next one."""
    call_id, name = message.get("tool_call_id"), message.get("name")
    for entry in pending:
        if (call_id is not None and entry[0] == call_id) or (
            call_id is None and name is not None and entry[1] == name
        ):
            return entry
    if call_id is None and name is None and pending:
        return pending[0]
    return None


def message_problem(
    message: object,
    previous: str | None,
    pending: list[tuple[str | None, str]],
    offered: frozenset[str] | None,
) -> tuple[str, str] | None:
    """Check one message in its place; updates ``pending`` (calls awaiting a result).

    The one check of a history's message: the split reader words its refusal
    with the text, and the conversation importers (``prepare``) drop the turns
    from this message on under the reason, so every row they write reads back.

    Args:
        message: The message.
        previous: The role of the message before it (``None``: the start).
        pending: ``(id, name)`` of the calls not answered yet; updated.
        offered: The row's tool names; ``None`` checks no call name.

    Returns:
        ``None`` if the message fits, else ``(reason, text)``: the reason is
        one of the importers' drop reasons, the text (with the role in
        parentheses) what the reader says after the message index.
    """
    if not isinstance(message, dict) or message.get("role") not in _ROLES:
        return "roles_out_of_order", "must be an object with 'role' system, user, assistant or tool"
    role = message["role"]
    unknown = sorted(message.keys() - _KEYS[role])
    if unknown:
        allowed = ", ".join(sorted(_KEYS[role]))
        return "invalid_conversation", (
            f"({role}) has unknown key {unknown[0]!r}; allowed: {allowed}"
        )
    if previous not in _MAY_FOLLOW[role] or (role != "tool" and pending):
        after = "the start" if previous is None else f"a {previous} message"
        if pending:
            return "call_without_result", (
                f"({role}) comes before every tool call of the assistant turn was answered"
            )
        return "roles_out_of_order", f"({role}) is out of order: it cannot follow {after}"
    content = message.get("content")
    if role == "assistant":
        calls = message.get("tool_calls", [])
        if content is not None and not isinstance(content, str):
            return "missing_content", "(assistant) 'content' must be a string or null"
        if not isinstance(calls, list):
            return "unreadable_call", "(assistant) 'tool_calls' must be a list"
        if not calls and not (content or "").strip():
            return "empty_assistant_turn", "(assistant) has neither content nor tool calls"
        for index, call in enumerate(calls):
            problem = _call_problem(call, offered)
            if problem is not None:
                return problem[0], f"(assistant) tool_calls[{index}] {problem[1]}"
            pending.append((call.get("id"), call["function"]["name"]))
        return None
    if not isinstance(content, str):
        return "missing_content", f"({role}) 'content' must be a string"
    for key in ("tool_call_id", "name"):
        if key in message and (not isinstance(message[key], str) or not message[key]):
            return "invalid_conversation", f"({role}) '{key}' must be a non-empty string"
    if role == "tool":
        answered = _answered_call(message, pending)
        if answered is None:
            return "tool_result_without_call", (
                "(tool) answers no tool call of the assistant turn before it"
            )
        pending.remove(answered)
    return None


def messages_problem(
    messages: object, tools: Sequence[Any] | None, turn: object = None
) -> str | None:
    """What is wrong with a conversation history, naming the message index; ``None`` if usable.

    The history must start with an optional system message and a user
    message, alternate as a conversation does (an assistant turn follows a
    user message or tool results; tool messages follow the assistant turn
    whose calls they answer, by ``tool_call_id``, else by ``name``, else in
    order; every call is answered before the conversation goes on), and end
    with the user message or the tool results the predicted turn answers.
    Assistant calls must name offered tools with object arguments.

    Args:
        messages: The row's ``messages`` value.
        tools: The row's (already checked) tools; ``None`` when the caller
            has none (the evaluator without a tools column): call names are
            then not checked against them.
        turn: The row's ``turn`` if it has one: it must be the number of
            assistant messages in the history plus one.
    """
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list of chat messages"
    offered = None if tools is None else frozenset(tool["name"] for tool in tools)
    pending: list[tuple[str | None, str]] = []
    previous: str | None = None
    for index, message in enumerate(messages):
        problem = message_problem(message, previous, pending, offered)
        if problem is not None:
            return f"messages[{index}] {problem[1]}"
        previous = message["role"]
    if previous not in ("user", "tool"):
        return (
            f"messages[{len(messages) - 1}] is a {previous} message; the history must end with "
            "the user message or the tool results the predicted assistant turn answers"
        )
    if pending:
        return (
            f"messages[{len(messages) - 1}]: {len(pending)} tool call(s) of the last assistant "
            "turn have no tool result"
        )
    if turn is not None:
        expected = assistant_turns(messages) + 1
        if type(turn) is not int or turn != expected:
            return (
                f"'turn' is {turn!r} but the history holds {expected - 1} assistant message(s), "
                f"so the predicted turn is {expected}"
            )
    return None


def assistant_turns(messages: Sequence[Any]) -> int:
    """How many assistant messages a history holds."""
    return sum(1 for message in messages if message.get("role") == "assistant")


def conversation_slice_values(messages: Sequence[Any] | None) -> tuple[tuple[str, str], ...]:
    """A conversation example's default slice values; ``()`` for a single-turn example.

    ``turn`` is ``1`` for the first assistant turn and ``2+`` for any later
    one; ``after`` is the role the predicted turn follows (``user`` or
    ``tool``), which a checked history ends with.
    """
    if messages is None:
        return ()
    turn = "1" if assistant_turns(messages) == 0 else "2+"
    return ((AFTER_SLICE_FIELD, str(messages[-1]["role"])), (TURN_SLICE_FIELD, turn))
