"""Strict JSON in, canonical JSON out, and atomic writes.

Everything the product compares or digests goes through :func:`canonical_json`
so that two values are equal exactly when their canonical strings are equal
(``1`` != ``1.0`` != ``true``). Parsing uses orjson, which accepts only
RFC 8259 JSON: no ``NaN``, no comments, no trailing commas.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "JSONDecodeError",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_jsonl",
    "canonical_json",
    "dumps_line",
    "dumps_pretty",
    "loads",
    "sha256_text",
]

JSONDecodeError = orjson.JSONDecodeError

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class _Raw(str):
    """Literal output text on the serialisation stack, as opposed to a value."""

    __slots__ = ()


def _dumps_deep(value: Any) -> str:
    """Sorted, compact JSON with an explicit stack instead of recursion."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item)
        elif isinstance(item, dict) and item:
            pending: list[Any] = [_Raw("{")]
            for index, key in enumerate(sorted(item)):
                if not isinstance(key, str):
                    raise TypeError(f"JSON object keys must be strings, got {key!r}")
                prefix = "," if index else ""
                pending += [_Raw(prefix + orjson.dumps(key).decode("utf-8") + ":"), item[key]]
            pending.append(_Raw("}"))
            stack.extend(reversed(pending))
        elif isinstance(item, list) and item:
            pending = [_Raw("[")]
            for index, child in enumerate(item):
                if index:
                    pending.append(_Raw(","))
                pending.append(child)
            pending.append(_Raw("]"))
            stack.extend(reversed(pending))
        else:
            parts.append(orjson.dumps(item).decode("utf-8"))
    return "".join(parts)


def loads(data: str | bytes) -> Any:
    """Parse strict RFC 8259 JSON.

    Raises:
        orjson.JSONDecodeError: On anything that is not JSON, including lone
            surrogates, ``NaN`` and integers beyond 64 bits.
    """
    return orjson.loads(data)


def canonical_json(value: Any) -> str:
    r"""Return the one spelling of a JSON value used for equality and digests.

    Keys are sorted, separators compact and every non-ASCII character is
    escaped as ``\\u`` plus four hex digits (surrogate pairs above the BMP), so the result is
    pure ASCII and byte-stable across platforms.

    Raises:
        TypeError: If the value is not JSON-serialisable (orjson's error).
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except orjson.JSONEncodeError as exc:
        if "recursion" not in str(exc).lower():
            raise
        # orjson serialises at most 254 levels but parses 1024; model output
        # in between must still get its canonical spelling.
        text = _dumps_deep(value)
    if text.isascii():
        return text
    return _NON_ASCII.sub(_escape_char, text)


def dumps_line(value: Any) -> bytes:
    """Serialise one JSONL record (sorted keys, UTF-8, trailing newline)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def dumps_pretty(value: Any) -> bytes:
    """Serialise a report for humans and diffs (sorted keys, two-space indent)."""
    return orjson.dumps(
        value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    )


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the UTF-8 encoding of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write a file so readers see either the old content or the whole new one.

    The bytes go to a temporary file in the same directory, are flushed and
    fsynced, and then renamed over the target, which is atomic on POSIX.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would.
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], value: Any) -> Path:
    """Atomically write ``value`` as pretty, sorted JSON."""
    return atomic_write_bytes(path, dumps_pretty(value))


def atomic_write_jsonl(path: str | os.PathLike[str], rows: Iterable[Any]) -> Path:
    """Atomically write an iterable of records as JSON Lines."""
    return atomic_write_bytes(path, b"".join(dumps_line(row) for row in rows))
