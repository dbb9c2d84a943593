"""``glaive``: Glaive function-calling (glaiveai/glaive-function-calling-v2).

One record is one conversation, its turns in one text::

    {"system": "SYSTEM: You are a helpful assistant with access to the following
                functions. Use them if required - {<tool JSON>} {<tool JSON>}",
     "chat": "USER: ...  ASSISTANT: <functioncall> {<call JSON, see below>} <|endoftext|>
              FUNCTION RESPONSE: {...}  ASSISTANT: ... <|endoftext|>"}

(each label starting a line of ``chat``).
The tools are the JSON objects in ``system`` (one after another). ``chat``
is cut at each line that starts with ``USER:``, ``ASSISTANT:`` or
``FUNCTION RESPONSE:``; ``<|endoftext|>`` ends a turn and is left out. An
assistant turn holding ``<functioncall>`` makes the call that follows it:
``{"name": ..., "arguments": '<JSON text>'}`` as Glaive writes it (the
arguments' JSON wrapped in single quotes, which is not JSON: the quoted
text is read as the arguments' JSON), or plain JSON with ``arguments`` as
an object or a JSON string. Text before ``<functioncall>`` is the turn's
content. ``system`` becomes the system message without its ``SYSTEM:`` label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.data._conversation_import import (
    ConversationProblem,
    SourceConversation,
    conversation_format,
    json_values,
    openai_call,
    openai_tools,
)
from sommelier_mlflow.data._input_formats import register_input_format

__all__ = ["read_glaive", "GLAIVE"]

_SPEAKERS: Final = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool"}
_TURN: Final = re.compile(r"(?:^|\n)[ \t]*(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_QUOTED_ARGUMENTS: Final = re.compile(
    r"\A\{\s*\"name\"\s*:\s*(\"(?:[^\"\\]|\\.)*\")\s*,\s*\"arguments\"\s*:\s*'(.*)'\s*\}\Z",
    re.DOTALL,
)
_END: Final = "<|endoftext|>"


def _call(body: str) -> tuple[dict[str, Any] | None, ConversationProblem | None]:
    quoted = _QUOTED_ARGUMENTS.match(body)
    try:
        if quoted is not None:
            return openai_call(loads(quoted.group(1)), quoted.group(2))
        value = loads(body)
    except (JSONDecodeError, RecursionError) as exc:
        return None, ConversationProblem(
            "unreadable_call", f"a <functioncall> that does not read: {exc}"
        )
    if not isinstance(value, dict):
        return None, ConversationProblem(
            "unreadable_call", f"a <functioncall> that is not an object: {body!r}"
        )
    return openai_call(value.get("name"), value.get("arguments"))


def read_glaive(record: Mapping[str, Any]) -> SourceConversation:
    """One Glaive record as a conversation (see the module docstring)."""
    chat = record["chat"]
    if not isinstance(chat, str):
        raise TypeError("'chat' must be a string")
    system = record.get("system")
    messages: list[dict[str, Any]] = []
    labels: list[str] = []
    problems: dict[int, ConversationProblem] = {}
    tools, tools_problem = openai_tools(json_values(system) if isinstance(system, str) else None)
    if isinstance(system, str) and system.strip():
        messages.append({"role": "system", "content": re.sub(r"\ASYSTEM:\s*", "", system.strip())})
        labels.append("system")
    pieces = _TURN.split(chat)
    if pieces[0].strip():
        messages.append({"role": "unlabelled", "content": pieces[0]})
        labels.append("chat, before the first turn")
    for number, (speaker, text) in enumerate(zip(pieces[1::2], pieces[2::2], strict=True), start=1):
        role = _SPEAKERS[speaker]
        text = text.replace(_END, "").strip()
        labels.append(f"chat, turn {number} ({speaker})")
        if role != "assistant" or "<functioncall>" not in text:
            messages.append({"role": role, "content": text})
            continue
        before, _, body = text.partition("<functioncall>")
        message: dict[str, Any] = {"role": "assistant", "content": before.strip() or None}
        call, problem = _call(body.strip())
        if problem is not None:
            problems[len(messages)] = problem
        elif call is not None:
            message["tool_calls"] = [call]
        messages.append(message)
    return SourceConversation(
        messages=messages,
        labels=labels,
        tools=tools,
        conversation_id=record.get("conversation_id", record.get("id")),
        language=record.get("language", "en"),
        problem=tools_problem,
        problems=problems,
    )


GLAIVE = register_input_format(
    conversation_format(
        "glaive",
        "Glaive function-calling: a system text with the tools and one chat text of USER:, "
        "ASSISTANT: <functioncall> {...} and FUNCTION RESPONSE: turns.",
        read_glaive,
    )
)
