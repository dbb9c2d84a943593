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
JSON-style numbers): those are translated to JSON and read by orjson with the strict
loader's checks, and checks that refuse the shortcut for anything Python would read
differently; everything else takes the :mod:`ast` path, which is the
definition (a property test holds the two equal).
"""

from __future__ import annotations

import ast
import math
import re
from keyword import kwlist
from operator import add
from typing import Any, Final

from orjson import dumps as dump_piece

from sommelier_mlflow._json import JSONDecodeError, readable_int
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    NO_JSON,
    parse_piece,
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
# translated by substitutions that run in C: ``name(`` opens
# ``["<DEL>name",[``, ``kw=`` becomes the list items ``"<DEL><DEL>","kw",``
# (a mark, the keyword, then its value), ``)`` closes ``],"<DEL>"]``, and
# True/False/None become JSON's constants. Each call's arguments are read as a
# flat list of such triples, so one ``dict(zip(...))`` builds them without a
# Python loop. DEL is legal raw inside a JSON string, so the JSON needs no
# escapes, and no string of the output can hold it, so the marks are
# unforgeable. The checks after one orjson read prove that every call, keyword
# and paren was translated where Python would have read one: every ``(`` is a
# call head and every ``=`` a keyword (the substitutions count them); the list
# holds exactly one ``[name, arguments, close]`` triple per head (so no head
# and no close is nested in a value); each arguments list is mark-keyword-value
# triples only, and together they hold one mark per keyword (so no keyword is
# nested in a value, and no value is positional). Any doubt returns ``None``
# and the ast path decides. Numbers need no check: JSON's number syntax is a
# subset of Python's with the same values, orjson refuses what would be
# infinite, as the ast path does, and a float written back with an exponent
# (where an integer beyond 64 bits read as a float would show) goes to the ast
# path.

_MARK: Final = "\x7f"
_KEYWORD_MARK: Final = "\x7f\x7f"
_PLAIN: Final = r"A-Za-z0-9_.\[\]{}(),:=+\- \t\n\r\x01"
_STRINGS: Final = re.compile(r'("[^"\\\x00-\x1f\x7f]*"|\'[^\'"\\\x00-\x1f\x7f]*\')')
_PLAIN_CODE: Final = re.compile(f"[{_PLAIN}]*")
#: Plain code, then a quote whose string runs to the end: Python reads no literal there.
_UNTERMINATED: Final = re.compile(f"[{_PLAIN}]*[\"'][^\"'\\\\\x01]*")
#: A lowercase JSON constant where Python would read a bare name (JSON would take it).
_JSON_WORD: Final = re.compile(r"(?<![\w.])(?:true|false|null)(?![\w.(]|[ \t\n\r]*=)", re.ASCII)
#: A call head ``name(`` (a dotted name) or a keyword ``name=``, starting where a run
#: of word characters and dots starts. The lookbehind keeps the split linear:
#: without it, a run of n identifier characters followed by neither ``(`` nor
#: ``=`` was scanned again from each of its n characters (quadratic: 16k
#: characters took 15 s). A head glued to a word character or a dot was never one
#: Python reads (JSON would not read the glued text either), and a dotted name is
#: only a head: left untranslated, either leaves a ``(`` or ``=`` uncounted, and
#: the ast path decides.
_NAMED: Final = re.compile(r"([A-Za-z_](?<![\w.][A-Za-z_])[\w.]*)[ \t\n\r]*([(=])", re.ASCII)
#: What goes before and after a name, by what followed it (``(``: a call head).
_BEFORE: Final = {"(": '["' + _MARK, "=": f'"{_KEYWORD_MARK}","'}.__getitem__
_AFTER: Final = {"(": '",[', "=": '",'}.__getitem__
#: Names Python refuses as a call's name (or part of one) or a keyword's.
_RESERVED: Final = frozenset(kwlist)
_CONSTANTS: Final = tuple(
    (word, re.compile(rf"(?<![\w.\x7f]){word}(?!\w)", re.ASCII), json_word)
    for word, json_word in (("True", "true"), ("False", "false"), ("None", "null"))
)
#: Fewer brackets than this cannot reach the parser's nesting limit.
_SHALLOW: Final = 100


def _translated(code: str, heads: int, keywords: int) -> str | None:
    """``code`` with its ``heads`` call heads and ``keywords`` keywords marked, or ``None``.

    ``None`` when some ``(`` is not a call head, some ``=`` not a keyword, or
    a name is not one Python reads there. The split finds the names; the
    marks go around them by C-level maps, without a Python loop over them.
    """
    pieces = _NAMED.split(code)
    found = pieces[2::3]
    if len(found) != heads + keywords or found.count("(") != heads:
        return None
    names = pieces[1::3]
    if not _RESERVED.isdisjoint(names):
        return None
    if "." in "".join(names) and not _dotted_heads_only(names, found):
        return None
    pieces[1::3] = map(add, map(_BEFORE, found), names)
    pieces[2::3] = map(_AFTER, found)
    return "".join(pieces)


def _dotted_heads_only(names: list[str], found: list[str]) -> bool:
    """Whether every dotted name is a call head of identifiers that are not keywords."""
    for name, after in zip(names, found, strict=True):
        if "." in name:
            parts = name.split(".")
            if after != "(" or not all(map(str.isidentifier, parts)):
                return False
            if not _RESERVED.isdisjoint(parts):
                return False
    return True


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
    heads = code.count("(")
    if heads != code.count(")"):
        return INVALID_JSON
    if len(code) >= 2 * _SHALLOW:
        brackets = code.count("[")
        braces = code.count("{")
        if brackets != code.count("]") or braces != code.count("}"):
            return INVALID_JSON
        if heads + brackets + braces >= _SHALLOW:
            return None
    if ("true" in code or "false" in code or "null" in code) and _JSON_WORD.search(code):
        return None
    keywords = code.count("=")
    translated = _translated(code, heads, keywords)
    if translated is None:
        return None
    translated = translated.replace(")", '],"\x7f"]')
    for word, pattern, json_word in _CONSTANTS:
        if word in translated:
            translated = pattern.sub(json_word, translated)
    parts[0::2] = translated.split("\x01")
    if not joiner:
        parts[1::2] = [s if s[0] == '"' else f'"{s[1:-1]}"' for s in parts[1::2]]
    text = joiner.join(parts)
    try:
        value = parse_piece(text)
    except JSONDecodeError:
        return None if _balanced(code) else INVALID_JSON
    # As checked_small: no key of a dict literal was dropped (without escapes,
    # every colon of the text is a key's or a string's, and so is every colon
    # written back), and no float written back with an exponent may have been
    # an integer beyond 64 bits, which Python reads exactly.
    written = dump_piece(value)
    if written.find(b"e+") >= 0 or text.count(":") != written.count(b":"):
        return None
    if type(value) is not list or len(value) != heads:
        return None
    calls: list[dict[str, Any]] = []
    for element in value:
        if type(element) is not list or len(element) != 3 or element[2] != _MARK:
            return None
        head, items = element[0], element[1]
        if type(head) is not str or head[:1] != _MARK or type(items) is not list:
            return None
        count = len(items) // 3
        if len(items) != 3 * count or items[0::3].count(_KEYWORD_MARK) != count:
            return None
        arguments = dict(zip(items[1::3], items[2::3], strict=True))
        if len(arguments) != count:
            return None  # a keyword given twice: the ast path refuses it
        keywords -= count
        calls.append({"name": head[1:], "arguments": arguments})
    if keywords != 0:
        return None
    return ok_calls(tuple(calls))


def _balanced(code: str) -> bool:
    """Whether ``code`` (strings removed) closes as many ``[`` and ``{`` as it opens.

    Counted only once the JSON read has failed: unbalanced brackets are a
    syntax error in Python too, so the output is refused without the ast path
    (truncated outputs are common).
    """
    return code.count("[") == code.count("]") and code.count("{") == code.count("}")


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
