"""``sharegpt``: ShareGPT as LLaMA-Factory reads it, with its tool layout.

One record is one conversation::

    {"conversations": [{"from": "human", "value": "..."},
                       {"from": "function_call", "value": "<JSON: {name, arguments}>"},
                       {"from": "observation", "value": "..."},
                       {"from": "gpt", "value": "..."}],
     "system": "...", "tools": "<JSON: [{name, description, parameters}, ...]>"}

``human`` is a user turn, ``gpt`` an assistant turn in text,
``function_call`` an assistant turn calling a tool (its value JSON: one
``{name, arguments}`` or a list of them for parallel calls; ``arguments`` an
object or a JSON string), ``observation`` the tool result(s) (no id, no name;
after parallel calls, a JSON array with one element per call is one result
per call),
and ``system`` (or the ``system`` column) the system prompt. ``tools`` is a
JSON string or a list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.data._conversation_import import (
    ConversationProblem,
    SourceConversation,
    add_tool_results,
    assistant_calls,
    conversation_format,
    conversation_turns,
    dump_content,
    from_value,
    openai_tools,
)
from sommelier_mlflow.data._input_formats import register_input_format

__all__ = ["read_sharegpt", "SHAREGPT"]

_ROLES: Final = {"system": "system", "human": "user", "gpt": "assistant", "observation": "tool"}


def _call_item(item: object) -> tuple[object, object] | ConversationProblem:
    if not isinstance(item, dict):
        return ConversationProblem(
            "unreadable_call", f"a function_call that is not an object: {item!r}"
        )
    return item.get("name"), item.get("arguments")


def _function_call(value: object) -> tuple[dict[str, Any], ConversationProblem | None]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    try:
        parsed = loads(value) if isinstance(value, str) else value
    except (JSONDecodeError, RecursionError) as exc:
        return message, ConversationProblem(
            "unreadable_call", f"a function_call that is not JSON: {exc}"
        )
    return assistant_calls(message, parsed if isinstance(parsed, list) else [parsed], _call_item)


def read_sharegpt(record: Mapping[str, Any]) -> SourceConversation:
    """One LLaMA-Factory ShareGPT record as a conversation (see the module docstring)."""
    tools, tools_problem = openai_tools(record.get("tools"))
    turns, messages, labels = conversation_turns(record)
    problems: dict[int, ConversationProblem] = {}
    for index, turn in enumerate(turns):
        speaker, value = from_value(turn)
        if speaker == "observation":
            add_tool_results(messages, labels, value, f"conversations[{index}]")
            continue
        labels.append(f"conversations[{index}]")
        if speaker == "function_call":
            message, problem = _function_call(value)
            if problem is not None:
                problems[len(messages)] = problem
        else:
            message = {"role": _ROLES.get(str(speaker), speaker), "content": dump_content(value)}
        messages.append(message)
    return SourceConversation.of_record(record, messages, labels, (tools, tools_problem), problems)


SHAREGPT = register_input_format(
    conversation_format(
        "sharegpt",
        "ShareGPT as LLaMA-Factory reads it: conversations of human/gpt/function_call/"
        "observation turns, with tools and system columns.",
        read_sharegpt,
    )
)
