"""Strict JSON in, canonical JSON out, and atomic writes.

Everything the product compares or digests goes through :func:`canonical_json`
so that two values are equal exactly when their canonical strings are equal
(``1`` != ``1.0`` != ``true``). Parsing uses orjson, which accepts only
RFC 8259 JSON: no ``NaN``, no comments, no trailing commas.
"""

from __future__ import annotations

import contextlib
import decimal
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

import orjson

__all__ = [
    "JSONDecodeError",
    "MAX_INT_DIGITS",
    "readable_int",
    "holds_unreadable_int",
    "loads",
    "EXACT_INT_FLOAT_MIN",
    "EXACT_INT_FLOAT_MAX",
    "loads_small",
    "checked_small",
    "canonical_json",
    "field_dict",
    "dumps_line",
    "dumps_pretty",
    "sha256_text",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_jsonl",
    "staged_folder",
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


#: orjson refuses integers outside these bounds; they are spelled exactly instead.
_INT_MIN: Final = -(2**63)
_UINT_MAX: Final = 2**64 - 1
#: Below this magnitude ``str`` spells an integer whatever the interpreter's
#: ``int_max_str_digits`` (it may not be set below 640 digits).
_STR_SAFE: Final = 10**600


def _scalar(item: Any) -> str:
    if type(item) is int and not _INT_MIN <= item <= _UINT_MAX:
        if -_STR_SAFE < item < _STR_SAFE:
            return str(item)
        # ``str`` refuses integers beyond ``sys.get_int_max_str_digits()`` (4,300
        # digits by default); the decimal module converts from the binary digits,
        # with no such limit, to the same spelling.
        return str(decimal.Decimal(item))
    return orjson.dumps(item).decode("utf-8")


def _dumps_deep(value: Any, *, pretty: bool = False) -> str:
    """Sorted JSON written with an explicit stack instead of recursion.

    orjson writes at most 254 levels of nesting and no integer beyond 64 bits,
    but strict parsing accepts both (1024 levels, integers of 308 digits). Model output in
    between must still be written and digested, so this writer produces the
    same bytes orjson would (compact, or orjson's two-space indentation when
    ``pretty``) with no depth or integer limit.
    """
    parts: list[str] = []
    stack: list[tuple[Any, int]] = [(value, 0)]

    def newline(depth: int) -> _Raw:
        return _Raw("\n" + "  " * depth if pretty else "")

    colon = ": " if pretty else ":"
    while stack:
        item, depth = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item)
        elif isinstance(item, dict) and item:
            pending: list[tuple[Any, int]] = [(_Raw("{"), depth)]
            for index, key in enumerate(sorted(item)):
                if not isinstance(key, str):
                    raise TypeError(f"JSON object keys must be strings, got {key!r}")
                prefix = "," if index else ""
                head = prefix + newline(depth + 1) + orjson.dumps(key).decode("utf-8") + colon
                pending += [(_Raw(head), depth), (item[key], depth + 1)]
            pending.append((_Raw(newline(depth) + "}"), depth))
            stack.extend(reversed(pending))
        elif isinstance(item, list) and item:
            pending = [(_Raw("["), depth)]
            for index, child in enumerate(item):
                pending += [(_Raw(("," if index else "") + newline(depth + 1)), depth)]
                pending.append((child, depth + 1))
            pending.append((_Raw(newline(depth) + "]"), depth))
            stack.extend(reversed(pending))
        else:
            parts.append(_scalar(item))
    return "".join(parts)


def _dumps(value: Any, option: int, *, pretty: bool = False) -> bytes:
    """Serialise with orjson for speed, with the stack writer for what orjson cannot spell."""
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError as exc:
        message = str(exc).lower()
        if "recursion" not in message and "64-bit" not in message:
            raise
    text = _dumps_deep(value, pretty=pretty)
    if option & orjson.OPT_APPEND_NEWLINE:
        text += "\n"
    return text.encode("utf-8")


#: A number literal long enough to lie outside 64 bits (orjson reads those as floats).
_LONG_NUMBER_TEXT: Final = re.compile(r"\d{19,}")
_LONG_NUMBER_BYTES: Final = re.compile(rb"\d{19,}")
#: The tokens that matter for duplicate keys: strings (keys when a colon follows) and brackets.
#: Possessive runs (``++``, ``*+``): the regex engine keeps no backtracking state per
#: character, so a 20 MB string costs no memory beyond its own bytes (it cost ~125 bytes
#: per character with a plain alternation).
_KEY_TOKEN: Final = re.compile(rb'"(?:[^"\\]++|\\.)*+"\s*+(:)?|[{}\[\]]')
#: orjson has checked the nesting (at most 1024 levels) before the standard
#: library re-reads a document; this much headroom lets it recurse that deep.
_NESTING_HEADROOM: Final = 1100


#: The most digits an integer may have to be read (sign aside): every format, the
#: strict loader and the gold-call readers refuse a longer one. Every such integer
#: is below the largest double, so orjson (which reads an integer beyond 64 bits
#: as a double and refuses one beyond the double range) hands each to the exact
#: re-read instead of refusing some by magnitude; and each is far below the 640
#: digits Python converts whatever its ``int_max_str_digits`` setting, so no
#: spelling or reading of one can raise.
MAX_INT_DIGITS: Final = 308
_INT_BOUND: Final = 10**MAX_INT_DIGITS


def readable_int(value: int) -> bool:
    """Whether ``value`` has at most :data:`MAX_INT_DIGITS` decimal digits."""
    return -_INT_BOUND < value < _INT_BOUND


def holds_unreadable_int(value: Any) -> bool:
    """Whether some integer in the JSON data ``value`` has more than :data:`MAX_INT_DIGITS` digits.

    For values built in Python (a gold call passed as a dict), which did not
    go through the loader's check. An explicit stack: any nesting depth.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is int and not readable_int(item):
            return True
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _exact_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(
            f"an integer of {digits} digits: integers of more than {MAX_INT_DIGITS} digits "
            "are not read; write such a value as a string"
        )
    return int(text)


def _loads_exact(data: str | bytes) -> Any:
    """The standard library's parser, made as strict as orjson, for integers beyond 64 bits.

    It also refuses an integer of more than :data:`MAX_INT_DIGITS` digits.
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + _NESTING_HEADROOM)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_exact_int)
    except ValueError as exc:
        raise JSONDecodeError(str(exc), text, 0) from None
    finally:
        sys.setrecursionlimit(limit)


def _duplicate_key(data: str | bytes) -> str | None:
    """The first key some object of an already-valid document names twice, if any.

    A scan of string and bracket tokens with an explicit stack of the keys seen
    per open object: linear, and free of recursion at any nesting depth.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if b":" not in raw:
        return None
    open_objects: list[set[str] | None] = []
    for match in _KEY_TOKEN.finditer(raw):
        token = match.group()
        if token in (b"{", b"["):
            open_objects.append(set() if token == b"{" else None)
        elif token in (b"}", b"]"):
            open_objects.pop()
        elif match.group(1) is not None and open_objects:
            key: str = orjson.loads(token[: token.rindex(b'"') + 1])
            seen = open_objects[-1]
            if seen is not None:
                if key in seen:
                    return key
                seen.add(key)
    return None


def loads(data: str | bytes, *, reject_duplicate_keys: bool = False) -> Any:
    """Parse strict RFC 8259 JSON.

    Integers of up to :data:`MAX_INT_DIGITS` digits keep their exact value
    (orjson alone would turn one beyond 64 bits into a float, making
    ``18446744073709551617`` equal to its neighbour and to
    ``18446744073709551616.0``); a longer one is refused. Such numbers are
    rare, so they are detected by the length of their digit run and only then
    re-parsed with the standard library, as strictly.

    Args:
        data: The JSON text.
        reject_duplicate_keys: Refuse an object that names a key twice, as
            strict readers of input files do (otherwise the last one wins).

    Raises:
        orjson.JSONDecodeError: On anything that is not JSON, including lone
            surrogates, ``NaN``, an integer of more than :data:`MAX_INT_DIGITS`
            digits and, when asked, duplicate keys.
    """
    try:
        value = orjson.loads(data)
    except JSONDecodeError as exc:
        if "infinity" not in str(exc):
            raise
        # orjson's words for a number beyond the double range: say which rule refused it.
        raise JSONDecodeError(
            f"{exc.msg}: numbers beyond the double range (about 1.8e308), and integers of "
            f"more than {MAX_INT_DIGITS} digits, are not read; write such a value as a string",
            exc.doc,
            exc.pos,
        ) from None
    if reject_duplicate_keys:
        key = _duplicate_key(data)
        if key is not None:
            text = data if isinstance(data, str) else data.decode("utf-8")
            raise JSONDecodeError(f"duplicate key {key!r} in one object", text, 0)
    search = _LONG_NUMBER_BYTES.search if isinstance(data, bytes) else _LONG_NUMBER_TEXT.search
    if search(data) is not None:  # type: ignore[arg-type]
        return _loads_exact(data)
    return value


#: orjson reads integers in [-2**63, 2**64) exactly; one outside becomes a float
#: at least this large in magnitude, so smaller floats need no second look.
EXACT_INT_FLOAT_MIN: Final = -9.2e18
EXACT_INT_FLOAT_MAX: Final = 1.8e19


def _has_huge_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is float and not EXACT_INT_FLOAT_MIN < item < EXACT_INT_FLOAT_MAX:
            return True
    return False


def loads_small(data: str | bytes, *, reject_duplicate_keys: bool = False) -> Any:
    """:func:`loads` for short documents parsed in a hot loop (model completions).

    Same result, for little more than the parse itself on a typical tool
    call: see :func:`checked_small`.

    Args:
        data: The JSON text.
        reject_duplicate_keys: Refuse an object that names a key twice.

    Raises:
        orjson.JSONDecodeError: On anything that is not strict JSON, and, when
            asked, on duplicate keys.
    """
    return checked_small(data, orjson.loads(data), reject_duplicate_keys=reject_duplicate_keys)


def checked_small(data: str | bytes, value: Any, *, reject_duplicate_keys: bool = False) -> Any:
    """What :func:`loads` returns for ``data``, given ``value``, orjson's parse of it.

    The checks orjson's parse lacks, at little cost on a short document: the
    parsed value is written back once by orjson (in C), and that one string
    serves both. The duplicate-key check (when asked) compares the colons of
    the text with those of the written value (one per key plus those inside
    strings; a dropped duplicate loses at least one), and scans the text's
    tokens only when they differ or an escape could hide a colon. The
    big-integer check looks for a float that could have been an integer
    beyond 64 bits, and only then re-reads the text exactly.

    Raises:
        orjson.JSONDecodeError: When asked, on duplicate keys.
    """
    try:
        written: bytes | None = orjson.dumps(value)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        written = None
    if reject_duplicate_keys and not _colons_match(data, written):
        key = _duplicate_key(data)
        if key is not None:
            text = data if isinstance(data, str) else data.decode("utf-8")
            raise JSONDecodeError(f"duplicate key {key!r} in one object", text, 0)
    # orjson writes every float of magnitude 1e16 or more with an exponent
    # ("1.8e+19"), so without "e+" in the written value no float is large
    # enough to have been an integer beyond 64 bits (a string holding "e+"
    # only costs the walk). ``find``, not ``in``: bytes' ``in`` first tries
    # its argument as an integer, which costs more than the search.
    if (written is None or written.find(b"e+") >= 0) and _has_huge_float(value):
        search = _LONG_NUMBER_BYTES.search if isinstance(data, bytes) else _LONG_NUMBER_TEXT.search
        if search(data) is not None:  # type: ignore[arg-type]
            return _loads_exact(data)
    return value


def _colons_match(data: str | bytes, written: bytes | None) -> bool:
    r"""Whether ``data`` has exactly as many colons as its parsed value ``written`` back.

    Without ``\u`` escapes every string keeps its colons when written back,
    so equal counts prove that no key was dropped; unequal counts (or an
    escape, or a value orjson could not write) only mean "scan the tokens".
    """
    if written is None:
        return False
    if isinstance(data, str):
        return "\\u" not in data and data.count(":") == written.count(b":")
    return data.find(b"\\u") < 0 and data.count(b":") == written.count(b":")


def canonical_json(value: Any) -> str:
    r"""Return the one spelling of a JSON value used for equality and digests.

    Keys are sorted, separators compact and every non-ASCII character is
    escaped as ``\\u`` plus four hex digits (surrogate pairs above the BMP), so the result is
    pure ASCII and byte-stable across platforms. Any nesting depth and any
    integer size are spelled exactly (beyond Python's ``int_max_str_digits``
    too: a value built in Python may hold an integer no loader reads).

    Raises:
        TypeError: If the value is not JSON-serialisable (orjson's error).
    """
    text = _dumps(value, orjson.OPT_SORT_KEYS).decode("utf-8")
    if text.isascii():
        return text
    return _NON_ASCII.sub(_escape_char, text)


def field_dict(record: Any, *, skip: Container[str] = ()) -> dict[str, Any]:
    """A flat dataclass record as ``{field name: value}``, in declaration order, less ``skip``.

    Records whose JSON keys are their own field names write themselves with
    this rather than spelling every name twice, so the class and its JSON
    cannot drift apart (the readers' exact-field checks then catch any change).
    """
    return {
        item.name: getattr(record, item.name) for item in fields(record) if item.name not in skip
    }


def dumps_line(value: Any) -> bytes:
    """Serialise one JSONL record (sorted keys, UTF-8, trailing newline), at any depth."""
    return _dumps(value, orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def dumps_pretty(value: Any) -> bytes:
    """Serialise a report for humans and diffs (sorted keys, two-space indent), at any depth."""
    return _dumps(
        value,
        orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE,
        pretty=True,
    )


def sha256_text(text: str) -> str:
    """Hex SHA-256 of the UTF-8 encoding of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def naming_path(path: str | os.PathLike[str]) -> Iterator[None]:
    """Give an ``OSError`` raised without a file name the name of ``path``.

    A write, flush or fsync that fails on a full or broken disk raises an
    error that names no file; the command line turns filesystem errors into
    one ``error:`` line naming the path, and only can when it knows the path.
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc


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
        with naming_path(target), os.fdopen(fd, "wb") as handle:
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


@contextmanager
def staged_folder(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Prepare a result in an empty staging folder, then move it into ``target`` whole.

    A command that refuses its input, or fails half-way (a full disk), must
    leave the previous result untouched rather than half-replaced. The caller
    writes everything into the yielded folder (a sibling of ``target``, so on
    the same filesystem); when the block succeeds each file is renamed into
    place, when it raises the staging folder is deleted and ``target`` has not
    been touched. Files already in ``target`` that the result does not
    replace are left alone: the folder may hold things that are not ours.

    The files of one result belong together (a split and its drop summary),
    so they appear together or not at all: if one cannot be moved into place
    (its path is a folder, the disk is full), those already moved are put
    back as they were, and the error names the user's path, not the staging
    folder that is gone by the time anyone reads the message.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.staging-", dir=final.parent))
    try:
        yield stage
        staged = [path for path in sorted(stage.rglob("*")) if path.is_file()]
        _move_all(stage, staged, final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _move_all(stage: Path, staged: list[Path], final: Path) -> None:
    """Rename every staged file into ``final``; on a failure, undo the renames done so far."""
    keep = Path(tempfile.mkdtemp(prefix="previous-", dir=stage))
    done: list[tuple[Path, Path | None]] = []  # (destination, a copy of what it held)
    try:
        for index, path in enumerate(staged):
            destination = final / path.relative_to(stage)
            try:
                destination.parent.mkdir(parents=True, exist_ok=True)
                previous = None
                if destination.is_file():
                    # A link (a copy where links fail) keeps the old bytes while the
                    # rename replaces the name in one step, so readers never miss it.
                    previous = keep / str(index)
                    try:
                        os.link(destination, previous)
                    except OSError:
                        shutil.copy2(destination, previous)
                os.replace(path, destination)
            except OSError as exc:
                # os.replace names the staged file first; the user knows only their own path.
                raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(destination)) from exc
            done.append((destination, previous))
    except BaseException:
        for destination, previous in reversed(done):
            with contextlib.suppress(OSError):
                if previous is None:
                    destination.unlink()
                else:
                    os.replace(previous, destination)
        raise
