"""The ``gemma4`` output format (Gemma 4), decoder ``gemma4.v1``, and its family's value syntax.

Gemma 4 answers with one block per call, in a compact object syntax of its
own whose strings are wrapped in a delimiter token::

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>

FunctionGemma writes the same syntax with other tokens (see
:mod:`~sommelier_mlflow.toolcalls._decode_functiongemma`); both read it with
:func:`decode_call_blocks`. What the decoder accepts, exactly:

1. Thoughts are removed first: each ``<|channel>`` up to the first
   ``<channel|>`` after it (Gemma 4's thinking channel), and everything up to
   a first ``<channel|>`` that comes before any ``<|channel>``; one that never
   closes is ``invalid_json``. No block in the answer is ``no_json`` (flagged
   ``calls_in_reasoning`` when a thought held one).
2. Zero or more blocks ``<|tool_call>`` … ``<tool_call|>``, in output order;
   text outside blocks is ignored.
3. Each block holds, with JSON whitespace allowed between tokens, exactly
   ``call:NAME{...}`` and nothing else (``call:NAME`` unbroken): NAME is non-empty, without
   whitespace, brackets, braces, ``<``, ``>``, ``:``, ``,`` or ``"``.
4. ``{...}`` holds ``KEY:VALUE`` members separated by ``,`` (KEY as NAME; a
   KEY given twice is refused). A VALUE is a string between two delimiters
   (``<|"|>…<|"|>``, its text exactly, with no escapes: a delimiter ends it),
   an object ``{...}``, a list ``[VALUE,...]``, or a bare JSON number,
   ``true``, ``false`` or ``null``. A bare word, a JSON-quoted string, an
   empty member or a trailing comma is not one.
5. A block that breaks these rules, or is never closed, is ``invalid_json``
   (so is an integer of more than 308 digits, as in every format). The
   syntax types every value, so no schema is needed.

Nesting is read with an explicit stack, so any depth ends in a status.
The tags and the delimiter are special tokens, so outputs must be decoded
with special tokens kept.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    JSON_WHITESPACE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    answer_and_thoughts,
    skip_whitespace,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._parse import NOT_JSON

__all__ = ["decode_call_blocks", "plain_object", "decode_gemma4"]

_WORD: Final = re.compile(r'[^\s{}\[\]<>:,"]+')
#: ``call:NAME`` and the whitespace up to the ``{`` of its arguments (left unmatched).
_HEAD: Final = re.compile(rf"[ \t\n\r]*call:({_WORD.pattern})[ \t\n\r]*(?={{)")
_SCALAR: Final = re.compile(r"[^\s{}\[\],<]+")
_OPEN: Final = "<|tool_call>"
_CLOSE: Final = "<tool_call|>"
_QUOTE: Final = '<|"|>'
_THOUGHT: Final = "<|channel>"
_THOUGHT_END: Final = "<channel|>"


class _Unreadable(Exception):
    """The block breaks the syntax (``invalid_json``)."""


def _scalar(token: str) -> Any:
    """A bare value: a JSON number, ``true``, ``false`` or ``null``."""
    value = strict_json(token)
    if value is NOT_JSON or isinstance(value, (str, list, dict)):
        raise _Unreadable
    return value


def _object_at(text: str, pos: int, quote: str) -> tuple[dict[str, Any], int]:
    """The object whose ``{`` is at ``pos`` and the position after its ``}``.

    An explicit stack of open containers, so the depth is unbounded and the
    time linear: each step consumes at least one character.

    Raises:
        _Unreadable: The text breaks the syntax.
    """
    root: dict[str, Any] = {}
    stack: list[dict[str, Any] | list[Any]] = [root]
    pos += 1
    expect_item = True  # after an opening bracket or a comma: an item (or, first, a close)
    first = True
    size = len(text)
    while True:
        pos = skip_whitespace(text, pos)
        if pos >= size:
            raise _Unreadable
        container = stack[-1]
        char = text[pos]
        if (first or not expect_item) and char == ("}" if type(container) is dict else "]"):
            stack.pop()
            pos += 1
            if not stack:
                return root, pos
            expect_item, first = False, False
            continue
        if not expect_item:
            if char != ",":
                raise _Unreadable
            pos += 1
            expect_item, first = True, False
            continue
        key = ""
        if type(container) is dict:
            match = _WORD.match(text, pos)
            if match is None:
                raise _Unreadable
            key = match.group()
            pos = skip_whitespace(text, match.end())
            if not text.startswith(":", pos) or key in container:
                raise _Unreadable
            pos = skip_whitespace(text, pos + 1)
        value: Any
        opened = False
        if text.startswith(quote, pos):
            end = text.find(quote, pos + len(quote))
            if end < 0:
                raise _Unreadable
            value = text[pos + len(quote) : end]
            pos = end + len(quote)
        elif text.startswith("{", pos) or text.startswith("[", pos):
            value = {} if text[pos] == "{" else []
            pos += 1
            opened = True
        else:
            match = _SCALAR.match(text, pos)
            if match is None:
                raise _Unreadable
            value = _scalar(match.group())
            pos = match.end()
        if type(container) is dict:
            container[key] = value
        else:
            container.append(value)  # type: ignore[union-attr]
        if opened:
            stack.append(value)
            expect_item, first = True, True
        else:
            expect_item, first = False, False


# --- the shortcut for plain blocks ---------------------------------------------------
#
# Most blocks hold keys spelled as identifiers and values that are strings,
# numbers, booleans, lists and objects. Such a block is JSON once each
# delimited string is written as a JSON string and each key is quoted, so
# orjson reads it in one call. Anything the translation cannot vouch for
# (another character between strings, a piece that does not read, a lone
# surrogate JSON cannot write) returns ``None`` and the reader above decides,
# which is the definition; ``tests/toolcalls/test_decode_gemma4.py`` holds the
# two equal on generated blocks.

_PLAIN_CODE: Final = re.compile(r"[A-Za-z0-9_.+\-{}\[\],: \t\n\r]*")
#: A key: an identifier right before its colon. Quoting every match is enough: a
#: match that was not a key (a word glued to a number, a value before a stray colon)
#: leaves text no JSON reads, so the strict read refuses the translation, and a key
#: the pattern misses (a space before its colon, a key of other characters) stays
#: bare, which JSON refuses too. Either way the reader above decides.
_KEY: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*):")
#: What a JSON string cannot hold as it is. (A lone surrogate quoted as it is makes
#: text orjson refuses to read, so the reader above decides that block.)
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f]')


def plain_object(segment: str, quote: str) -> dict[str, Any] | None:
    """The object ``segment`` (``{`` to its end, nothing after) holds, read as JSON; or ``None``."""
    parts = segment.split(quote)
    if len(parts) % 2 == 0 or "\x01" in segment:
        return None  # a delimiter left open (the reader says where), or the joiner itself
    code = "\x01".join(parts[0::2])
    if _PLAIN_CODE.fullmatch(code.replace("\x01", "")) is None:
        return None
    texts = parts[1::2]
    if _NEEDS_ESCAPE.search("".join(texts)) is None:  # most strings: quoted as they are
        strings = [f'"{piece}"' for piece in texts]
    else:
        try:
            strings = [orjson.dumps(piece).decode() for piece in texts]
        except orjson.JSONEncodeError:  # a lone surrogate: JSON cannot write it
            return None
    pieces = _KEY.split(code)
    pieces[1::2] = [f'"{key}":' for key in pieces[1::2]]
    parts[0::2] = "".join(pieces).split("\x01")
    parts[1::2] = strings
    value = strict_json("".join(parts))
    return value if type(value) is dict else None


def decode_call_blocks(text: str, open_tag: str, close_tag: str, quote: str) -> CallsParseResult:
    """Decode ``open_tag call:NAME{...} close_tag`` blocks (rules 2 to 5 of the module docstring).

    Shared by the Gemma family's formats, which differ only in their tokens.
    """
    start = text.find(open_tag)
    if start < 0:
        return NO_JSON
    calls: list[dict[str, Any]] = []
    try:
        while start >= 0:
            head = _HEAD.match(text, start + len(open_tag))
            if head is None:
                return INVALID_JSON
            pos = head.end()
            end = text.find(close_tag, pos)
            plain = None if end < 0 else plain_object(text[pos:end].rstrip(JSON_WHITESPACE), quote)
            if plain is not None:
                arguments, pos = plain, end
            else:
                arguments, pos = _object_at(text, pos, quote)
                pos = skip_whitespace(text, pos)
                if not text.startswith(close_tag, pos):
                    return INVALID_JSON
            calls.append({"name": head.group(1), "arguments": arguments})
            start = text.find(open_tag, pos + len(close_tag))
    except _Unreadable:
        return INVALID_JSON
    return ok_calls(tuple(calls))


def decode_gemma4(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``gemma4`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept.
        tools: Unused: the syntax types every value (the output-format seam
            passes the example's tools to every format).

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    del tools
    split = answer_and_thoughts(text, _THOUGHT, _THOUGHT_END, "channel")
    if split is None:
        return INVALID_JSON
    text, thoughts = split
    result = decode_call_blocks(text, _OPEN, _CLOSE, _QUOTE)
    if _OPEN in thoughts and result.status == "no_json":
        return NO_JSON_CALLS_IN_REASONING
    return result


register_output_format(
    OutputFormat(
        "gemma4",
        'Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|> blocks; '
        "thoughts in <|channel>…<channel|> removed.",
        decode=decode_gemma4,
        version="gemma4.v1",
        special_tokens=True,
    )
)
