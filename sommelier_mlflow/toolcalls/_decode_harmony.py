"""The ``harmony`` output format (gpt-oss), decoder ``harmony.v1``.

gpt-oss writes every turn as messages of OpenAI's harmony format. The prompt
ends with ``<|start|>assistant``; a completion that reasons, then calls::

    <|channel|>analysis<|message|>The user wants the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris"}<|call|>

(one line in the output; broken here to fit).

What the decoder accepts, exactly:

1. Text holding none of the harmony tokens (``<|start|>``, ``<|channel|>``,
   ``<|message|>``, ``<|constrain|>``, ``<|end|>``, ``<|call|>``,
   ``<|return|>``) makes no call (``no_json``).
2. Otherwise the whole text, less surrounding JSON whitespace, is a sequence
   of messages. Each is ``<|start|>`` + a header + ``<|message|>`` + its
   content; the first may leave out ``<|start|>`` and the role (the prompt
   wrote them). A message's content runs to the next harmony token, which
   must be ``<|end|>``, ``<|call|>`` or ``<|return|>``, or to the end of the
   text (where a backend cut the end-of-sequence token); only JSON
   whitespace may separate a message from the next ``<|start|>``.
3. A header is the role ``assistant`` (left out only in the first message),
   ``<|channel|>`` and a channel, ``analysis``, ``commentary`` or ``final``,
   with at most one recipient ``to=R`` (before or after the channel; R
   without whitespace or ``<``) and an optional content type at its end
   (``<|constrain|>json`` or `` json``).
4. Calls are the ``commentary`` messages to ``functions.NAME``, in output
   order: ``{"name": NAME, "arguments": content}``, the content (less JSON
   whitespace) one strict-JSON object; a content type other than ``json`` is
   refused. The ``analysis`` channel is reasoning: a message there is never a
   call, whatever its recipient (an output whose only ``functions.`` message
   is there is ``no_json`` flagged ``calls_in_reasoning``). ``final`` and
   recipient-less ``commentary`` messages are text.
5. Broken syntax (a header that does not read, a message cut by another
   header, content that is not JSON in a call) is ``invalid_json``; a
   ``commentary`` message to a recipient outside ``functions.`` (a built-in
   tool the product never offers), a recipient on ``final``, or a call whose
   JSON is not an object is ``invalid_shape``.

The tokens are special tokens of gpt-oss's tokenizer, so outputs must be
decoded with special tokens kept.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    JSON_WHITESPACE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    skip_whitespace,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._parse import NOT_JSON

__all__ = ["decode_harmony"]

_START: Final = "<|start|>"
_MESSAGE: Final = "<|message|>"
_ENDS: Final = ("<|end|>", "<|call|>", "<|return|>")
_TOKENS: Final = (_START, "<|channel|>", _MESSAGE, "<|constrain|>", *_ENDS)
_FUNCTIONS: Final = "functions."
_HEADER: Final = re.compile(
    r"(?P<role>assistant)?"
    r"(?:[ \t\n\r]*to=(?P<before>[^\s<]+))?"
    r"[ \t\n\r]*<\|channel\|>(?P<channel>analysis|commentary|final)"
    r"(?:[ \t\n\r]+to=(?P<after>[^\s<]+))?"
    r"(?:(?:[ \t\n\r]*<\|constrain\|>|[ \t\n\r]+)(?P<type>[A-Za-z_][\w.-]*))?"
    r"[ \t\n\r]*",
    re.ASCII,
)


def _content_end(text: str, pos: int) -> tuple[int, str | None]:
    """Where the content at ``pos`` ends, and the harmony token there (``None``: the text's end)."""
    while (found := text.find("<|", pos)) >= 0:
        for token in _TOKENS:
            if text.startswith(token, found):
                return found, token
        pos = found + 2
    return len(text), None


def decode_harmony(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``harmony`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept.
        tools: Unused: call arguments are JSON (the output-format seam passes
            the example's tools to every format).

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools
    if "<|" not in text or not any(token in text for token in _TOKENS):
        return NO_JSON
    text = text.rstrip(JSON_WHITESPACE)
    pos = skip_whitespace(text, 0)
    first = True
    calls: list[dict[str, Any]] = []
    reasoning_call = misshapen = False
    while True:
        starts = text.startswith(_START, pos)
        if starts:
            pos += len(_START)
        elif not first:
            return INVALID_JSON
        header_end = text.find(_MESSAGE, pos)
        if header_end < 0:
            return INVALID_JSON
        header = _HEADER.fullmatch(text, pos, header_end)
        if header is None or (starts and header["role"] is None):
            return INVALID_JSON
        if header["before"] is not None and header["after"] is not None:
            return INVALID_JSON
        recipient = header["before"] or header["after"]
        content_at = header_end + len(_MESSAGE)
        content_end, token = _content_end(text, content_at)
        if token is not None and token not in _ENDS:
            return INVALID_JSON
        channel = header["channel"]
        if channel == "analysis":
            reasoning_call = reasoning_call or (recipient or "").startswith(_FUNCTIONS)
        elif recipient is not None:
            if channel == "final" or not recipient.startswith(_FUNCTIONS):
                misshapen = True
            else:
                if header["type"] not in (None, "json"):
                    return INVALID_JSON
                arguments = strict_json(text[content_at:content_end])
                if arguments is NOT_JSON:
                    return INVALID_JSON
                name = recipient[len(_FUNCTIONS) :]
                if not name or type(arguments) is not dict:
                    misshapen = True
                else:
                    calls.append({"name": name, "arguments": arguments})
        if token is None:
            break
        pos = skip_whitespace(text, content_end + len(token))
        if pos == len(text):
            break
        first = False
    if misshapen:
        return INVALID_SHAPE
    if not calls:
        return NO_JSON_CALLS_IN_REASONING if reasoning_call else NO_JSON
    return ok_calls(tuple(calls))


register_output_format(
    OutputFormat(
        "harmony",
        "gpt-oss (harmony): commentary messages to=functions.NAME with a JSON object as "
        "content are the calls; the analysis channel is reasoning and never a call.",
        decode=decode_harmony,
        version="harmony.v1",
        special_tokens=True,
    )
)
