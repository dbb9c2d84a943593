"""Slices over declared row fields: names, the call-count slice, and MLflow-safe key sections.

Language slices are built in and keep their keys (``<language>/<metric>``).
Any other slice comes from a field the user declares (``--slice-by F``) or,
in ``calls`` scoring, from the number of gold calls (``calls:0``, ``calls:1``,
``calls:2+``), or, on a split of conversation rows, from the history
(``turn:1``/``turn:2+`` and ``after:user``/``after:tool``, on by default).
A slice over field ``F`` with value ``V`` is named ``F:V`` in reports and
logged under the MLflow key section ``F:<encoded V>``.

Encoding rule for ``V`` (documented in the README): ASCII letters, digits,
``_`` and ``-`` stay as they are; every other character is written as ``.``
followed by two lowercase hex digits for each byte of its UTF-8 form
(``2+`` becomes ``2.2b``, ``été`` becomes ``.c3.a9t.c3.a9``). Because ``.`` is
always followed by two hex digits, the encoding is reversible, so two values
can only share a section when an encoding longer than
:data:`MAX_ENCODED_VALUE` is shortened (to its first characters, ``..`` and
8 hex digits of the value's SHA-256, a form no full encoding has); that case
is checked and refused (exit 2) rather than letting two slices share keys.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Final

from sommelier_mlflow.data._conversations import CONVERSATION_SLICE_FIELDS
from sommelier_mlflow.data._schemas import RESERVED_SLICE_NAMES
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.toolcalls import (
    CALLS_SLICE_FIELD,
    call_count_value,
    scoring_mode,
    scoring_mode_names,
)

__all__ = [
    "CALLS_SLICE_FIELD",
    "call_count_value",
    "LANGUAGE_FIELD",
    "MAX_ENCODED_VALUE",
    "slice_field_names",
    "check_slice_fields",
    "CONVERSATION_SLICE_FIELDS",
    "with_conversation_slices",
    "slice_name",
    "encode_slice_value",
    "slice_section",
    "slice_sections",
]

LANGUAGE_FIELD: Final = "language"
#: Longest encoded value kept whole; keeps every key well under MLflow's 250 characters.
MAX_ENCODED_VALUE: Final = 80

_FIELD: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Fields every row already has: slicing by them would shadow row content.
_ROW_FIELDS: Final = frozenset(
    {
        "schema_version",
        "example_id",
        "source_example_id",
        "query",
        "tools",
        "gold_calls",
        "gold_call",
        "prompt_text",
        "prompt_sha256",
        "prompt_format",
        "chat_template_kwargs",
        "template_date",
        "messages",
        "conversation_id",
        "multi_turn",
        "split",
    }
)
_KEEP: Final = re.compile(r"[A-Za-z0-9_-]")


def slice_field_names(values: str | Iterable[str]) -> list[str]:
    """The fields named by ``slice_by`` in any of its spellings, one name each.

    The MLproject passes one comma-separated string (``-P slice_by=topic,tier``),
    ``--slice-by`` may be repeated and each value comma-separated, and the
    evaluator config takes either form; all of them mean the same list.

    Raises:
        ConfigError: An item that is not a string.
    """
    names: list[str] = []
    for item in [values] if isinstance(values, str) else values:
        if not isinstance(item, str):
            raise ConfigError(f"slice fields are names (strings), got {item!r}")
        names += [part.strip() for part in item.split(",") if part.strip()]
    return names


def check_slice_fields(fields: Iterable[str], *, scoring: str) -> tuple[str, ...]:
    """Validate declared slice fields; return the slice definition in effect.

    ``language`` is always sliced (reports, the gate and the matched-pair gaps
    rest on it), so naming it adds nothing. The scoring mode's default slices
    (``calls`` for the calls mode) are on by default and come first.

    Raises:
        ConfigError: A malformed, reserved or repeated field name, an unknown
            scoring mode, or a slice another mode derives (``calls`` outside
            ``calls`` scoring).
    """
    if isinstance(fields, str):
        raise ConfigError("slice fields must be a list of field names, not one string")
    mode = scoring_mode(scoring)
    chosen: list[str] = list(mode.default_slices)
    seen: set[str] = set()
    for field in fields:
        if not isinstance(field, str) or _FIELD.fullmatch(field) is None:
            raise ConfigError(
                f"slice field {field!r} must match [a-z][a-z0-9_]* (at most 32 characters): "
                "it becomes part of MLflow metric keys"
            )
        if field in seen:
            raise ConfigError(f"slice field {field!r} is given twice")
        seen.add(field)
        if field == LANGUAGE_FIELD:
            continue
        if field in RESERVED_SLICE_NAMES or field in _ROW_FIELDS:
            raise ConfigError(
                f"slice field {field!r} is reserved (an MLflow key section or a row field "
                "every example has); slice by a field of your own"
            )
        if field in chosen:
            continue
        owners = [
            name for name in scoring_mode_names() if field in scoring_mode(name).derived_slices
        ]
        if owners and scoring not in owners:
            raise ConfigError(
                f"the {field!r} slice is derived from the gold calls and exists only with "
                f"--scoring {' or '.join(owners)}"
            )
        chosen.append(field)
    return tuple(chosen)


def with_conversation_slices(fields: tuple[str, ...], conversational: bool) -> tuple[str, ...]:
    """The slice definition of a split: ``fields`` plus the conversation slices if it has turns.

    A split with conversation rows gets ``turn`` and ``after`` after the
    checked ``fields`` (unless already declared); a single-turn split gets
    ``fields`` unchanged, so its reports and keys stay as they were.
    """
    if not conversational:
        return fields
    return fields + tuple(name for name in CONVERSATION_SLICE_FIELDS if name not in fields)


def slice_name(field: str, value: str) -> str:
    """The slice's name in reports: ``F:V``."""
    return f"{field}:{value}"


def encode_slice_value(value: str) -> str:
    """Spell ``value`` in MLflow's key alphabet by the module's reversible rule."""
    parts: list[str] = []
    for char in value:
        if _KEEP.fullmatch(char):
            parts.append(char)
        else:
            parts.extend(f".{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    encoded = "".join(parts)
    if len(encoded) <= MAX_ENCODED_VALUE:
        return encoded
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{encoded[: MAX_ENCODED_VALUE - 10]}..{digest}"


def slice_section(name: str, encode: Callable[[str], str] = encode_slice_value) -> str:
    """The MLflow key section of a field slice named ``F:V``: ``F:<encoded V>``."""
    field, separator, value = name.partition(":")
    if not separator:
        raise InputError(f"slice {name!r} is not named field:value")
    return f"{field}:{encode(value)}"


def slice_sections(
    names: Iterable[str], *, encode: Callable[[str], str] = encode_slice_value
) -> dict[str, str]:
    """Map each field-slice name to its key section, refusing two that would share one.

    Args:
        names: Field-slice names ``F:V``.
        encode: The value spelling (the module's rule; replaceable to exercise the guard).

    Raises:
        InputError: Two slices whose values encode to the same key section
            (possible only for very long values); rename one value.
    """
    sections: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name in names:
        section = slice_section(name, encode)
        if section in owner and owner[section] != name:
            raise InputError(
                f"slices {owner[section]!r} and {name!r} would be logged under the same MLflow "
                f"key section {section!r} (values longer than {MAX_ENCODED_VALUE} encoded "
                "characters are shortened); shorten or rename one of the values"
            )
        owner[section] = name
        sections[name] = section
    return sections
