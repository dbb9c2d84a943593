"""The ``pythonic`` output format (Llama 3.2, BFCL's prompting mode), decoder ``pythonic.v1``.

These models answer with a Python list of calls::

    [get_weather(city="Paris"), pkg.convert(amount=10, to="USD")]

What the decoder accepts, exactly:

1. Text without ``(`` is zero calls (``no_json``).
2. Otherwise the text, trimmed of whitespace, must be one Python expression
   (read with the :mod:`ast` module only: nothing is ever evaluated or
   executed); text that is not (a syntax error, nesting deeper than Python
   reads, a keyword argument given twice, a dict literal naming a key twice,
   an integer of more than 308 digits in any spelling, as every format
   refuses) is refused as ``invalid_json``.
3. The expression must be a list whose every element is a call of a plain or
   dotted name (``f``, ``pkg.g``), with keyword arguments only, each value a
   literal as :func:`ast.literal_eval` reads it that is also a JSON value:
   strings, integers, finite floats, ``True``/``False``/``None``, lists,
   tuples (read as lists) and dicts with string keys. A positional argument,
   ``**kwargs``, a name, call, attribute, set, bytes or complex number as a
   value refuses the output as ``invalid_shape``.

The calls come out as ``{"name": "pkg.g", "arguments": {...}}`` in list order.
Most outputs are plain (double- or single-quoted strings without escapes,
JSON-style numbers): those are translated to JSON and read by the strict JSON
loader, with checks that refuse the shortcut for anything Python would read
differently; everything else takes the :mod:`ast` path, which is the
definition (a property test holds the two equal).
"""

from __future__ import annotations

import ast
import math
import re
from keyword import iskeyword
from typing import Any, Final

from sommelier_mlflow._json import readable_int
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    NO_JSON,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_pythonic"]

#: What ``ast.parse`` can raise on some ``str``: syntax, NUL bytes and lone
#: surrogates (ValueError), and nesting beyond the parser's own limits.
_UNREADABLE: Final = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)
#: What ``ast.literal_eval`` raises on a node that is not a literal.
_NOT_LITERAL: Final = (ValueError, TypeError, SyntaxError, RecursionError, MemoryError)


class _NotJSONValue(Exception):
    """A literal Python reads but JSON cannot hold (a set, bytes, ``inf``, a non-string key)."""


def _json_value(value: Any) -> Any:
    """``value`` as JSON data: tuples become lists; anything JSON cannot hold raises."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _NotJSONValue
        return value
    if kind is list or kind is tuple:
        return [_json_value(item) for item in value]
    if kind is dict:
        converted: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJSONValue
            converted[key] = _json_value(item)
        return converted
    raise _NotJSONValue


def _dotted_name(node: ast.expr) -> str | None:
    """``pkg.g`` for a name or an attribute chain of names, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _unreadable(tree: ast.AST) -> bool:
    """Whether some call repeats a keyword, some dict literal a string key, or an integer is long.

    Long: more than :data:`~sommelier_mlflow._json.MAX_INT_DIGITS` digits, in
    any spelling (``0xfff...`` too), which every format refuses, so that no
    format reads a number the JSON formats refuse (and none reaches scoring
    too long for Python to spell).
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if type(node.value) is int and not readable_int(node.value):
                return True
        elif isinstance(node, ast.Call):
            names = [keyword.arg for keyword in node.keywords if keyword.arg is not None]
            if len(set(names)) != len(names):
                return True
        elif isinstance(node, ast.Dict):
            keys = [
                key.value
                for key in node.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            ]
            if len(set(keys)) != len(keys):
                return True
    return False


def _call_of(node: ast.expr) -> dict[str, Any] | None:
    """One list element as ``{"name", "arguments"}``, or ``None`` when it is not a plain call."""
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _dotted_name(node.func)
    if name is None:
        return None
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        try:
            arguments[keyword.arg] = _json_value(ast.literal_eval(keyword.value))
        except (_NotJSONValue, *_NOT_LITERAL):
            return None
    return {"name": name, "arguments": arguments}


def _decode_with_ast(body: str) -> CallsParseResult:
    """The definition: read ``body`` with :mod:`ast` and accept only literal keyword calls."""
    try:
        tree = ast.parse(body, mode="eval")
        unreadable = _unreadable(tree)
    except _UNREADABLE:
        return INVALID_JSON
    if unreadable:
        return INVALID_JSON
    if not isinstance(tree.body, ast.List):
        return INVALID_SHAPE
    calls: list[dict[str, Any]] = []
    try:
        for element in tree.body.elts:
            call = _call_of(element)
            if call is None:
                return INVALID_SHAPE
            calls.append(call)
    except (RecursionError, MemoryError):
        return INVALID_SHAPE
    return CallsParseResult("ok", tuple(calls))


# --- the shortcut for plain outputs -------------------------------------------------
#
# Strings without escapes, control characters or DEL read the same in Python
# and JSON (single-quoted ones once requoted). The code between them is
# translated: ``name(`` opens ``["<DEL>name",{``, ``kw=`` becomes the key
# ``"<DEL>kw":``, ``)`` closes ``},"<DEL>"]``, and True/False/None become
# JSON's constants. DEL is legal raw inside a JSON string, so the JSON needs no
# escapes (which keeps the strict loader's duplicate-key check on its fast
# path), and no string of the output can hold it, so the markers are
# unforgeable. The checks after the strict JSON read prove that every call,
# keyword and paren was translated where Python would have read one; any
# doubt returns ``None`` and the ast path decides. Numbers need no check:
# JSON's number syntax is a subset of Python's with the same values, and the
# loader refuses what would be infinite, as the ast path does.

_MARK: Final = "\x7f"
_PLAIN: Final = r"A-Za-z0-9_.\[\]{}(),:=+\- \t\n\r\x01"
_STRINGS: Final = re.compile(r'("[^"\\\x00-\x1f\x7f]*"|\'[^\'"\\\x00-\x1f\x7f]*\')')
_PLAIN_CODE: Final = re.compile(f"[{_PLAIN}]*")
#: Plain code, then a quote whose string runs to the end: Python reads no literal there.
_UNTERMINATED: Final = re.compile(f"[{_PLAIN}]*[\"'][^\"'\\\\\x01]*")
#: A lowercase JSON constant where Python would read a bare name (JSON would take it).
_JSON_WORD: Final = re.compile(r"(?<![\w.])(?:true|false|null)(?![\w.(]|[ \t\n\r]*=)", re.ASCII)
#: A call head ``name(`` or a keyword ``name=``, starting where a run of word
#: characters and dots starts. The lookbehind keeps the split linear: without
#: it, a run of n identifier characters followed by neither ``(`` nor ``=`` was
#: scanned again from each of its n characters (quadratic: 16k characters took
#: 15 s). A head glued to a word character or a dot was never one Python reads
#: (JSON would not read the glued text either): left untranslated, it leaves
#: fewer heads than parentheses, and the ast path decides.
_NAMED: Final = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)[ \t\n\r]*([(=])", re.ASCII)
_CONSTANTS: Final = tuple(
    (word, re.compile(rf"(?<![\w.\x7f]){word}(?!\w)", re.ASCII), json_word)
    for word, json_word in (("True", "true"), ("False", "false"), ("None", "null"))
)
#: Fewer brackets than this cannot reach the parser's nesting limit.
_SHALLOW: Final = 100


def _decode_plain(body: str) -> CallsParseResult | None:
    """The result for a plain output, or ``None`` (the ast path decides).

    Besides ``ok`` results it settles the common refusals Python would raise a
    syntax error for: a string left open at the end, and unbalanced brackets.
    """
    if "\x01" in body or "\x7f" in body or '"""' in body or "'''" in body:
        return None
    if "'" in body or "\\" in body:
        parts = _STRINGS.split(body)
        code = "\x01".join(parts[0::2])
        if _PLAIN_CODE.fullmatch(code) is None:
            return INVALID_JSON if _UNTERMINATED.fullmatch(code) is not None else None
        joiner = ""
    else:
        # Double quotes only and no escapes: each quote opens or closes a
        # string, so a plain split finds them (a control character inside a
        # string is left to the strict JSON read, which refuses it).
        parts = body.split('"')
        code = "\x01".join(parts[0::2])
        if _PLAIN_CODE.fullmatch(code) is None:
            return None
        if len(parts) % 2 == 0:
            return INVALID_JSON  # the last quote opens a string that never closes
        joiner = '"'
    opened = code.count("(")
    brackets = code.count("[")
    braces = code.count("{")
    if opened != code.count(")") or brackets != code.count("]") or braces != code.count("}"):
        return INVALID_JSON
    if opened + brackets + braces >= _SHALLOW or (
        ("true" in code or "false" in code or "null" in code)
        and _JSON_WORD.search(code) is not None
    ):
        return None
    keywords = code.count("=")
    pieces = _NAMED.split(code)
    heads = 0
    for index in range(1, len(pieces), 3):
        if pieces[index + 1] == "(":
            heads += 1
            pieces[index] = '["' + _MARK + pieces[index] + '",{'
        else:
            pieces[index] = '"' + _MARK + pieces[index] + '":'
        pieces[index + 1] = ""
    if heads != opened:
        return None
    code = "".join(pieces).replace(")", '},"' + _MARK + '"]')
    for word, pattern, json_word in _CONSTANTS:
        if word in code:
            code = pattern.sub(json_word, code)
    parts[0::2] = code.split("\x01")
    if "'" in body:
        parts[1::2] = [s if s[0] == '"' else f'"{s[1:-1]}"' for s in parts[1::2]]
    value = strict_json(joiner.join(parts))
    if type(value) is not list or len(value) != heads:
        return None
    calls: list[dict[str, Any]] = []
    for element in value:
        if type(element) is not list or len(element) != 3 or element[2] != _MARK:
            return None
        head, arguments = element[0], element[1]
        if type(head) is not str or head[:1] != _MARK or type(arguments) is not dict:
            return None
        name = head[1:]  # dotted identifiers by _NAMED; Python refuses keywords among them
        if iskeyword(name) or ("." in name and any(map(iskeyword, name.split(".")))):
            return None
        converted: dict[str, Any] = {}
        for key, item in arguments.items():
            if key[:1] != _MARK or "." in key or iskeyword(key[1:]):
                return None
            converted[key[1:]] = item
        keywords -= len(converted)
        calls.append({"name": name, "arguments": converted})
    if keywords != 0:
        return None
    return CallsParseResult("ok", tuple(calls))


def decode_pythonic(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``pythonic`` format (see the module docstring).

    Args:
        text: The raw completion.
        tools: The example's tools; not read, since this format's values are
            typed already.

    Returns:
        The calls in list order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    del tools  # typed values: the schemas add nothing
    if "(" not in text:
        return NO_JSON
    body = text.strip()
    plain = _decode_plain(body)
    if plain is not None:
        return plain
    return _decode_with_ast(body)


register_output_format(
    OutputFormat(
        "pythonic",
        "A Python list of calls with literal keyword arguments, [f(a=1), pkg.g(b='x')], "
        "read with ast only.",
        decode=decode_pythonic,
        version="pythonic.v1",
        special_tokens=False,
    )
)
