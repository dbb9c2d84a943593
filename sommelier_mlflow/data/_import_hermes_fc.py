"""``hermes_fc``: Hermes function-calling data (NousResearch's hermes-function-calling-v1 layout).

One record is one conversation::

    {"id": "...", "conversations": [
        {"from": "system", "value": "... <tools> [{...tool...}] </tools> ..."},
        {"from": "human", "value": "..."},
        {"from": "gpt", "value": "<tool_call>{'name': 'f', 'arguments': {'a': 1}}</tool_call>"},
        {"from": "tool", "value": "<tool_response><JSON: {name, content}></tool_response>"},
        {"from": "gpt", "value": "..."}]}

The tools are the value between ``<tools>`` and ``</tools>`` in the system
message: a JSON (or Python-literal) list of tools in the OpenAI or bare
shape, or tool objects one after another. Each ``<tool_call>`` of a ``gpt``
turn is one call, ``{"name", "arguments"}`` as JSON or as a Python literal
with single quotes (read without ``eval``, see ``literal_value``); text
outside the tags is the turn's content. Each ``<tool_response>`` of a
``tool`` turn is one tool result, named by its ``name`` when it reads as an
object that has one. The system message is kept as the source wrote it
(tools included): that is the text the model was trained on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sommelier_mlflow.data._conversation_import import (
    ConversationProblem,
    SourceConversation,
    assistant_calls,
    conversation_format,
    dump_content,
    from_value,
    json_values,
    literal_value,
    openai_tools,
)
from sommelier_mlflow.data._input_formats import register_input_format

__all__ = ["read_hermes_fc", "HERMES_FC"]

_ROLES: Final = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}
_TOOLS: Final = re.compile(r"<tools>(.*?)</tools>", re.DOTALL)
_CALL: Final = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_RESPONSE: Final = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)


def _tools(system: str | None) -> tuple[list[dict[str, Any]] | None, ConversationProblem | None]:
    # the first non-empty <tools> block: the instruction often names the empty tags first
    bodies = [body.strip() for body in _TOOLS.findall(system or "") if body.strip()]
    if not bodies:
        return [], None
    body = bodies[0]
    ok, value = literal_value(body)
    if not ok:
        value = json_values(body)  # tool objects one after another
    return openai_tools(value)


def _gpt(value: str) -> tuple[dict[str, Any], ConversationProblem | None]:
    bodies = _CALL.findall(value)
    content = _CALL.sub("", value).strip()
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if "<tool_call>" in content:
        return message, ConversationProblem(
            "unreadable_call", "a <tool_call> without its </tool_call>"
        )
    return assistant_calls(message, bodies, _call_item)


def _call_item(body: str) -> tuple[object, object] | ConversationProblem:
    ok, item = literal_value(body.strip())
    if not ok or not isinstance(item, dict):
        return ConversationProblem("unreadable_call", f"a <tool_call> that does not read: {body!r}")
    return item.get("name"), item.get("arguments")


def _responses(value: str) -> list[dict[str, Any]]:
    bodies = _RESPONSE.findall(value) or [value]
    out: list[dict[str, Any]] = []
    for body in bodies:
        message: dict[str, Any] = {"role": "tool", "content": body.strip()}
        ok, item = literal_value(body.strip())
        if ok and isinstance(item, dict) and isinstance(item.get("name"), str):
            message["name"] = item["name"]
        out.append(message)
    return out


def read_hermes_fc(record: Mapping[str, Any]) -> SourceConversation:
    """One Hermes function-calling record as a conversation (see the module docstring)."""
    turns = record["conversations"]
    if not isinstance(turns, list):
        raise TypeError("'conversations' must be a list")
    messages: list[dict[str, Any]] = []
    labels: list[str] = []
    problems: dict[int, ConversationProblem] = {}
    tools: list[dict[str, Any]] | None = []
    tools_problem: ConversationProblem | None = None
    for index, turn in enumerate(turns):
        speaker, value = from_value(turn)
        role = _ROLES.get(str(speaker), speaker)
        label = f"conversations[{index}]"
        if role == "system" and isinstance(value, str):
            tools, tools_problem = _tools(value)
        if role == "assistant" and isinstance(value, str):
            message, problem = _gpt(value)
            if problem is not None:
                problems[len(messages)] = problem
            added = [message]
        elif role == "tool" and isinstance(value, str):
            added = _responses(value)
        else:
            added = [{"role": role, "content": dump_content(value)}]
        messages.extend(added)
        labels.extend([label] * len(added))
    return SourceConversation.of_record(record, messages, labels, (tools, tools_problem), problems)


HERMES_FC = register_input_format(
    conversation_format(
        "hermes_fc",
        "Hermes function-calling: conversations of system/human/gpt/tool turns with <tools>, "
        "<tool_call> and <tool_response> tags.",
        read_hermes_fc,
    )
)
