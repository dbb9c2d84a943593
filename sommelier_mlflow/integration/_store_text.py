r"""The one rule for text a tracking store cannot hold: escape it, visibly, at the last moment.

A model's output is arbitrary text, and some of it no MLflow store keeps:

* U+0000 (NUL). PostgreSQL refuses it in every text column (``PostgreSQL text
  fields cannot contain NUL (0x00) bytes``), so one NUL in one output made a
  PostgreSQL-backed server refuse the arm's traces, tags and params (SQLite
  keeps it).
* Lone UTF-16 surrogates (U+D800 to U+DFFF). A Python string may hold one (a
  server's JSON can escape one half of a pair alone, and a user's DataFrame
  can hold anything), but it has no UTF-8 encoding: every store, and the
  HTTP client before any store, fails with ``surrogates not allowed``, the
  per-example table artifact included.

Nothing else was found by trying (C0 and C1 controls, U+FEFF, U+FFFF and
U+10FFFF are kept by SQLite and by PostgreSQL behind ``mlflow server``).

The rule: each such code point is written as its JSON escape, six ASCII
characters ``\u`` plus four lowercase hex digits (NUL becomes ``\u0000``, a
lone U+D800 becomes ``\ud800``); every other character is left as it is. It
applies to the strings MLflow keeps in its store or in a table it renders:
traces (spans, previews, tags, metadata), assessments, the per-example table,
params and tags. The run's ``sommelier/generations/`` artifact keeps the raw
text, byte for byte, which is what was scored.

The escape is visible (a reader sees where the NUL was) and idempotent (an
escaped text holds neither, so escaping it again changes nothing), but it is
not reversible: a text that already held the six characters ``\u0000`` reads
the same as one that held a NUL. Making it reversible would mean escaping every
backslash, which would rewrite almost every JSON output (``\"`` inside
strings) to protect a case the raw generations already answer.

The module imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["store_text", "store_value"]

#: What no tracking store keeps: NUL and every lone surrogate.
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def store_text(text: str) -> str:
    r"""``text`` with NUL and lone surrogates written as ``\uXXXX``; the rest unchanged.

    Cheap on the common clean string: one scan, no copy.
    """
    if "\x00" not in text and (text.isascii() or not _UNSTORABLE.search(text)):
        return text
    return _UNSTORABLE.sub(_escape, text)


def store_value(value: Any) -> Any:
    """:func:`store_text` applied to every string of a JSON-like value, keys included.

    Mappings come back as dicts and lists and tuples as lists (what a trace
    attribute, an assessment or a table cell needs anyway); numbers, booleans
    and ``None`` are returned as they are.
    """
    if isinstance(value, str):
        return store_text(value)
    if isinstance(value, Mapping):
        return {
            (store_text(key) if isinstance(key, str) else key): store_value(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [store_value(item) for item in value]
    return value
