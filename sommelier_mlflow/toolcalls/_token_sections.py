"""Calls written between special tokens, in sections: what ``kimi_k2`` and ``deepseek_v31`` share.

Kimi K2 and DeepSeek-V3.1 write their calls the same way with different
tokens: a section token opens a run of calls, each call is a begin token, a
head (Kimi's call id, DeepSeek's name), a separator token, the JSON arguments
and an end token, and a section token closes the run::

    <SECTION_BEGIN><CALL_BEGIN>head<SEPARATOR>{"city": "Paris"}<CALL_END><SECTION_END>

One reading serves both, so that the two formats cannot drift apart:

1. Thoughts are removed first (:func:`~sommelier_mlflow.toolcalls._decode.split_thoughts`);
   a thought that never closes refuses the output (``invalid_json``), and an
   output with no section whose thoughts open one is ``no_json`` flagged
   ``calls_in_reasoning`` (a call written while thinking is not the answer,
   but the report counts it).
2. Zero or more sections, in output order; a section ends at the first
   section-end token after it. Text outside sections is the message's
   content and is ignored, but holds none of the format's tokens: a call
   token outside a section, or a section that never closes, is
   ``invalid_json``. No section is zero calls (``no_json``).
3. A section holds one or more calls, with only JSON whitespace around them;
   a call ends at the first call-end token after its separator. The head,
   less surrounding JSON whitespace, must name a call (each format says how);
   the arguments, less surrounding JSON whitespace, are one strict JSON value.
4. Broken syntax (a missing token, a bad head, text between calls, an empty
   section, arguments that are not JSON) is ``invalid_json``; arguments that
   are JSON but not an object are ``invalid_shape``.

Every step is a ``str.find`` from the previous position, so the reading is
linear in the output and never recurses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    JSON_WHITESPACE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    answer_and_thoughts,
    skip_whitespace,
    strict_json,
)
from sommelier_mlflow.toolcalls._parse import NOT_JSON

__all__ = ["SectionTokens", "decode_sections"]


@dataclass(frozen=True, slots=True)
class SectionTokens:
    """The tokens of one section format, and how a call's head names the call.

    Attributes:
        section_begin: Opens a run of calls.
        section_end: Closes it.
        call_begin: Opens one call; its head follows.
        separator: Ends the head; the JSON arguments follow.
        call_end: Ends the arguments.
        name_of: The call's name from its head (trimmed of JSON whitespace),
            or ``None`` when the head names no call.
    """

    section_begin: str
    section_end: str
    call_begin: str
    separator: str
    call_end: str
    name_of: Callable[[str], str | None]

    def inner_tokens(self) -> tuple[str, ...]:
        """The tokens that may appear only inside a section."""
        return (self.section_end, self.call_begin, self.separator, self.call_end)


def _section_calls(body: str, tokens: SectionTokens) -> list[tuple[str, Any]] | None:
    """``(name, arguments)`` for each call of one section's body, or ``None`` when broken."""
    calls: list[tuple[str, Any]] = []
    size = len(body)
    pos = skip_whitespace(body, 0)
    while pos < size:
        if not body.startswith(tokens.call_begin, pos):
            return None
        head_at = pos + len(tokens.call_begin)
        separator_at = body.find(tokens.separator, head_at)
        if separator_at < 0:
            return None
        head = body[head_at:separator_at]
        if tokens.call_begin in head:  # a call that never reached its separator
            return None
        name = tokens.name_of(head.strip(JSON_WHITESPACE))
        if name is None:
            return None
        arguments_at = separator_at + len(tokens.separator)
        end = body.find(tokens.call_end, arguments_at)
        if end < 0:
            return None
        value = strict_json(body[arguments_at:end])
        if value is NOT_JSON:
            return None
        calls.append((name, value))
        pos = skip_whitespace(body, end + len(tokens.call_end))
    return calls or None  # an empty section announces calls and makes none


def decode_sections(text: str, tokens: SectionTokens) -> CallsParseResult:
    """Decode one completion written in the section format ``tokens`` (see the module docstring).

    Never raises for any ``str``.
    """
    split = answer_and_thoughts(text)
    if split is None:
        return INVALID_JSON
    text, thoughts = split
    thought_call = tokens.section_begin in thoughts
    inner = tokens.inner_tokens()
    start = text.find(tokens.section_begin)
    if start < 0:
        if any(token in text for token in inner):
            return INVALID_JSON
        return NO_JSON_CALLS_IN_REASONING if thought_call else NO_JSON
    calls: list[tuple[str, Any]] = []
    pos = 0
    while start >= 0:
        if any(token in text[pos:start] for token in inner):
            return INVALID_JSON
        body_at = start + len(tokens.section_begin)
        end = text.find(tokens.section_end, body_at)
        if end < 0:
            return INVALID_JSON
        body = text[body_at:end]
        if tokens.section_begin in body:  # a section opened inside another
            return INVALID_JSON
        section = _section_calls(body, tokens)
        if section is None:
            return INVALID_JSON
        calls.extend(section)
        pos = end + len(tokens.section_end)
        start = text.find(tokens.section_begin, pos)
    if any(token in text[pos:] for token in inner):
        return INVALID_JSON
    if not all(type(arguments) is dict for _, arguments in calls):
        return INVALID_SHAPE
    return ok_calls(tuple({"name": name, "arguments": arguments} for name, arguments in calls))
