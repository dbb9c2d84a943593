"""``openai``: OpenAI fine-tuning chat JSONL, and TRL's conversational format (the same shape).

One record is one conversation::

    {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": ...},
                  {"role": "assistant", "content": null, "weight": 1,
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "f", "arguments": "<JSON text>"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "..."}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "parallel_tool_calls": false}

``arguments`` is a JSON string (OpenAI) or an object (TRL); a tool result
names its call by ``tool_call_id`` (OpenAI) or only by the tool's ``name``
(TRL). ``weight: 0`` on an assistant turn (OpenAI: do not train on it) drops
the turn as an example and keeps it as history. With
``parallel_tool_calls: false`` a turn making several calls contradicts its
row and is dropped as ``unreadable_call``. The legacy single
``function_call`` of an assistant message and the ``function`` role are read
as one call and a tool result. Optional ``id``/``conversation_id`` and
``language`` fields are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sommelier_mlflow.data._conversation_import import (
    ConversationProblem,
    SourceConversation,
    conversation_format,
    dump_content,
    openai_call,
    openai_tools,
)
from sommelier_mlflow.data._input_formats import register_input_format

__all__ = ["read_openai", "OPENAI"]


def _text(content: object) -> str | None:
    """Message text: a string, or the text parts of a content list joined."""
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        if parts and all(isinstance(part, str) for part in parts):
            return "".join(parts)  # type: ignore[arg-type]
    return dump_content(content)


def _assistant(
    message: Mapping[str, Any], parallel: object
) -> tuple[dict[str, Any], ConversationProblem | None]:
    calls_in = message.get("tool_calls")
    if calls_in is None and isinstance(message.get("function_call"), dict):
        calls_in = [{"function": message["function_call"]}]
    out: dict[str, Any] = {"role": "assistant", "content": _text(message.get("content"))}
    if "weight" in message:
        out["weight"] = message["weight"]
    if calls_in is None:
        return out, None
    if not isinstance(calls_in, list):
        return out, ConversationProblem("unreadable_call", "tool_calls must be a list")
    calls: list[dict[str, Any]] = []
    for call in calls_in:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return out, ConversationProblem(
                "unreadable_call", f"a tool call without a function: {call!r}"
            )
        made, problem = openai_call(function.get("name"), function.get("arguments"), call.get("id"))
        if problem is not None:
            return out, problem
        assert made is not None
        calls.append(made)
    if parallel is False and len(calls) > 1:
        return out, ConversationProblem(
            "unreadable_call",
            f"{len(calls)} calls in one turn of a row with parallel_tool_calls false",
        )
    if calls:
        out["tool_calls"] = calls
    return out, None


def read_openai(record: Mapping[str, Any]) -> SourceConversation:
    """One OpenAI/TRL record as a conversation (see the module docstring)."""
    tools, tools_problem = openai_tools(record.get("tools"))
    raw = record["messages"]
    if not isinstance(raw, list):
        raise TypeError("'messages' must be a list")
    messages: list[dict[str, Any]] = []
    problems: dict[int, ConversationProblem] = {}
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            messages.append({"role": None})
            problems[index] = ConversationProblem(
                "roles_out_of_order", f"a message that is not an object: {message!r}"
            )
            continue
        role = message.get("role")
        if role == "assistant":
            out, problem = _assistant(message, record.get("parallel_tool_calls"))
            if problem is not None:
                problems[index] = problem
        elif role in ("tool", "function"):
            out = {"role": "tool", "content": _text(message.get("content"))}
            for key in ("tool_call_id", "name"):
                if key in message:
                    out[key] = message[key]
        else:
            out = {"role": role, "content": _text(message.get("content"))}
        messages.append(out)
    return SourceConversation(
        messages=messages,
        labels=[f"messages[{index}]" for index in range(len(messages))],
        tools=tools,
        conversation_id=record.get("conversation_id", record.get("id")),
        language=record.get("language", "en"),
        problem=tools_problem,
        problems=problems,
    )


OPENAI = register_input_format(
    conversation_format(
        "openai",
        "OpenAI fine-tuning chat JSONL and TRL's conversational format: messages with "
        "assistant tool_calls and tool results, plus tools.",
        read_openai,
    )
)
