"""Line-by-line JSONL reading that fails closed, plus torn-tail detection.

Every data file the product reads is JSON Lines. Reading it one line at a
time keeps memory flat for large splits and lets every error name the exact
1-based line, which is what a user needs to fix a hand-edited file. The
bytes are hashed as they stream past, so the digest that identifies a file
is computed from exactly the bytes that were parsed.

A file whose last line has no newline and does not parse was cut off
mid-write (a crashed or killed generation run). That case is told apart
from ordinary corruption so that a writer can resume: :func:`jsonl_valid_prefix`
says how many leading bytes hold complete, valid lines.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.errors import DataError

__all__ = [
    "open_data_file",
    "JsonlReader",
    "iter_jsonl_objects",
    "JsonlPrefix",
    "jsonl_valid_prefix",
]


def open_data_file(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a data file for binary reading, turning OS errors into :class:`DataError`.

    A missing or unreadable input is the user's to fix (exit 2), not a crash.
    """
    name = os.fspath(path)
    try:
        return Path(name).open("rb")
    except FileNotFoundError as exc:
        raise DataError("file not found; check the path", path=name) from exc
    except IsADirectoryError as exc:
        raise DataError("is a directory, expected a JSONL file", path=name) from exc
    except OSError as exc:
        raise DataError(f"cannot be read: {exc.strerror or exc}", path=name) from exc


def _check_text(raw: bytes, *, path: str, line_no: int) -> None:
    """Say plainly when a line is not text at all (orjson would blame "surrogates")."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"not UTF-8 text (gzip? decompress first): invalid byte at column {exc.start + 1}",
            path=path,
            line=line_no,
        ) from None


def _parse_object(raw: bytes, *, path: str, line_no: int) -> dict[str, Any]:
    try:
        # Input rows are read as strict readers do: a key named twice is an error,
        # not "the last one wins".
        value = loads(raw, reject_duplicate_keys=True)
    except (JSONDecodeError, RecursionError) as exc:
        _check_text(raw, path=path, line_no=line_no)
        reason = str(getattr(exc, "msg", exc))
        if reason.startswith("duplicate key"):
            raise DataError(
                f"{reason}; strict JSON readers refuse it: keep one", path=path, line=line_no
            ) from None
        raise DataError(
            f"line is not valid JSON ({exc}); every line must be one strict JSON object",
            path=path,
            line=line_no,
        ) from exc
    if not isinstance(value, dict):
        raise DataError(
            f"line holds a JSON {type(value).__name__}, expected one JSON object per line",
            path=path,
            line=line_no,
        )
    return value


class JsonlReader:
    """Iterate the objects of a JSONL file while hashing its bytes.

    Iterating yields ``(line_no, obj)`` with 1-based line numbers. After the
    iteration is exhausted, :attr:`sha256` is the hex digest of the whole file
    and :attr:`lines` the number of records read; reading them earlier raises,
    because a digest of a partly read file would silently identify the wrong
    content.

    A reader is single-use, so the digest always covers the file exactly once.
    Blank or whitespace-only lines are errors (a blank line in the middle of a
    split usually means a botched merge). The newline ending the final line
    is optional; a final line without one must still parse, otherwise it is
    reported as a torn (cut off) line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._digest = hashlib.sha256()
        self._lines = 0
        self._started = False
        self._done = False

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the file's bytes (only once fully read)."""
        if not self._done:
            raise RuntimeError("JsonlReader.sha256 is only known after the file was fully read")
        return self._digest.hexdigest()

    @property
    def lines(self) -> int:
        """Number of records read (only once fully read)."""
        if not self._done:
            raise RuntimeError("JsonlReader.lines is only known after the file was fully read")
        return self._lines

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        if self._started:
            raise RuntimeError("a JsonlReader reads its file once; create a new one to re-read")
        self._started = True
        with open_data_file(self.path) as handle:
            for line_no, raw in enumerate(handle, start=1):
                self._digest.update(raw)
                terminated = raw.endswith(b"\n")
                if not raw.strip():
                    raise DataError(
                        "blank line; remove it (JSONL allows no empty lines)",
                        path=self.path,
                        line=line_no,
                    )
                if not terminated:
                    try:
                        loads(raw)
                    except (JSONDecodeError, RecursionError) as exc:
                        _check_text(raw, path=self.path, line_no=line_no)
                        raise DataError(
                            "last line is cut off (no final newline and not valid JSON): "
                            "the file was truncated mid-write; regenerate or resume it, or "
                            "delete the partial line",
                            path=self.path,
                            line=line_no,
                        ) from exc
                # Complete JSON, newline or not: the same strict checks for every line.
                value = _parse_object(raw, path=self.path, line_no=line_no)
                self._lines = line_no
                yield line_no, value
        self._done = True


def iter_jsonl_objects(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_no, obj)`` for every line of a JSONL file, failing closed.

    This is the shared line loop of every reader; schema checks are the
    caller's. Use :class:`JsonlReader` directly when the file digest is needed.

    Raises:
        DataError: On a missing file, a blank line, a line that is not strict
            JSON, a line that is not an object, or a cut-off final line.
    """
    yield from JsonlReader(path)


@dataclass(frozen=True, slots=True)
class JsonlPrefix:
    """How much of a JSONL file is complete, for resuming an interrupted writer.

    Attributes:
        valid_bytes: Length of the leading run of newline-terminated lines that
            each hold one JSON object; truncate the file to this before appending.
        lines: How many such lines there are.
        torn_bytes: Bytes after them: a final line without a newline (written
            partly, or wholly but without its terminator). ``0`` if none. Such a
            line is never counted as done, because appending after it would glue
            two records onto one line.
    """

    valid_bytes: int
    lines: int
    torn_bytes: int

    @property
    def torn(self) -> bool:
        """Whether the file ends in an unterminated (torn) line."""
        return self.torn_bytes > 0


def jsonl_valid_prefix(path: str | os.PathLike[str]) -> JsonlPrefix:
    """Measure the complete prefix of a JSONL file that a writer may have left torn.

    Only the final line may be torn; anything wrong before it is corruption and
    raises, because truncating there would discard finished records silently.

    Raises:
        DataError: If the file cannot be read, or a newline-terminated line is
            blank, not JSON or not an object.
    """
    name = os.fspath(path)
    valid = 0
    lines = 0
    with open_data_file(name) as handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                return JsonlPrefix(valid_bytes=valid, lines=lines, torn_bytes=len(raw))
            if not raw.strip():
                raise DataError("blank line inside the file", path=name, line=line_no)
            _parse_object(raw, path=name, line_no=line_no)
            valid += len(raw)
            lines += 1
    return JsonlPrefix(valid_bytes=valid, lines=lines, torn_bytes=0)
