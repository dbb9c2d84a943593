"""``toolace``: ToolACE's layout (Team-ACE/ToolACE).

One record is one conversation::

    {"system": "... Here is a list of functions in JSON format that you can invoke: [{...}] ...",
     "conversations": [{"from": "user", "value": "..."},
                       {"from": "assistant", "value": "[get_weather(city='Paris')]"},
                       {"from": "tool", "value": "<JSON: [{name, results}]>"},
                       {"from": "assistant", "value": "It is sunny in Paris."}]}

The tools are the first JSON array of tool objects in ``system``. An
assistant turn whose value is a bracketed call list (``[f(a=1), g(b='x')]``)
is read by the product's pythonic decoder (``ast`` only, never ``eval``); any
other assistant value is a text answer. ToolACE often names its APIs in words
(``[Weather Forecast(city="Oslo")]``): an offered tool name Python cannot
spell is matched where a call starts and read as that tool. A call list the
decoder still refuses (an argument named ``from``, which Python reserves) is
``unreadable_call``. A ``tool`` turn after parallel calls holding a JSON
array with one element per call is one result per call. ``system`` becomes
the system message, as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sommelier_mlflow.data._conversation_import import (
    ConversationProblem,
    SourceConversation,
    add_tool_results,
    assistant_calls,
    conversation_format,
    conversation_turns,
    dump_content,
    from_value,
    json_values,
    openai_tools,
    pythonic_calls,
)
from sommelier_mlflow.data._input_formats import register_input_format

__all__ = ["read_toolace", "TOOLACE"]

_ROLES: Final = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def _tools(system: object) -> tuple[list[dict[str, Any]] | None, ConversationProblem | None]:
    if not isinstance(system, str):
        return [], None
    for value in json_values(system):
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            return openai_tools(value)
    return [], None


def _spelled(text: str, tools: list[dict[str, Any]] | None) -> tuple[str, dict[str, str]]:
    """``text`` with each offered tool name Python cannot spell replaced where it is called.

    ToolACE's APIs are often named in words (``[Weather Forecast(city="Oslo")]``);
    such a name is read where a call starts (after ``[`` or ``,``, before
    ``(``) and replaced by a placeholder identifier for the pythonic reader.

    Returns:
        The text to decode, and placeholder -> tool name.
    """
    names = sorted(
        (tool["name"] for tool in tools or () if not tool["name"].isidentifier()),
        key=len,
        reverse=True,
    )
    if not names:
        return text, {}
    placeholders = {name: f"__toolace_tool_{index}" for index, name in enumerate(names)}
    # a quoted string is matched first and kept as it is, so a name inside one stays
    pattern = re.compile(
        r"('[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\")"
        r"|(?<=[\[,])(\s*)(" + "|".join(re.escape(name) for name in names) + r")(\s*)\("
    )
    spelled = pattern.sub(
        lambda match: (
            match[1] if match[1] is not None else f"{match[2]}{placeholders[match[3]]}{match[4]}("
        ),
        text,
    )
    return spelled, {placeholder: name for name, placeholder in placeholders.items()}


def _assistant(
    value: str, tools: list[dict[str, Any]] | None
) -> tuple[dict[str, Any], ConversationProblem | None]:
    text = value.strip()
    if not (text.startswith("[") and text.endswith("]") and "(" in text):
        return {"role": "assistant", "content": value}, None
    message: dict[str, Any] = {"role": "assistant", "content": None}
    spelled, names = _spelled(text, tools)
    decoded = pythonic_calls(spelled)
    if decoded.status != "ok" or decoded.calls is None:
        return message, ConversationProblem(
            "unreadable_call",
            f"a call list the pythonic reader refuses ({decoded.status}): {text!r}",
        )
    return assistant_calls(
        message,
        decoded.calls,
        lambda item: (names.get(item["name"], item["name"]), item["arguments"]),
    )


def read_toolace(record: Mapping[str, Any]) -> SourceConversation:
    """One ToolACE record as a conversation (see the module docstring)."""
    tools, tools_problem = _tools(record.get("system"))
    turns, messages, labels = conversation_turns(record)
    problems: dict[int, ConversationProblem] = {}
    for index, turn in enumerate(turns):
        speaker, value = from_value(turn)
        role = _ROLES.get(str(speaker), speaker)
        if role == "assistant" and isinstance(value, str):
            message, problem = _assistant(value, tools)
            if problem is not None:
                problems[len(messages)] = problem
        elif role == "tool":
            add_tool_results(messages, labels, value, f"conversations[{index}]")
            continue
        else:
            message = {"role": role, "content": dump_content(value)}
        messages.append(message)
        labels.append(f"conversations[{index}]")
    return SourceConversation.of_record(record, messages, labels, (tools, tools_problem), problems)


TOOLACE = register_input_format(
    conversation_format(
        "toolace",
        "ToolACE: tools in the system prompt, conversations of user/assistant/tool turns, "
        "calls written [f(a=1)].",
        read_toolace,
    )
)
