"""Turn raw xlam-shaped rows into seeded train/validation/test splits with counted drops.

:func:`prepare` is the one entry for every input format: it looks the
format up by name (``data/_input_formats.py``) and runs it. This module is
the ``xlam`` format (:func:`prepare_xlam`, the default, registered by
``data/_import_xlam.py``); the conversation formats live in
``data/_conversation_import.py`` and the ``data/_import_<name>.py`` modules.

Raw rows carry ``tools`` and ``answers`` as JSON *strings*, exactly as the
xlam-function-calling-60k dataset ships them, plus an optional ``language``
and, on translated rows, the ``source_example_id`` of the root they
translate. Every row is either written to a split or accounted for: a drop
reason (the first check it fails), or "unassigned" (valid, but its root was
not drawn into any split because the requested sizes were smaller than the
pool). ``drop_summary.json`` records all of it per language.

Checks, in the order they are applied (the first failure is the one counted):

1. ``missing_query``: no query, not a string, or only whitespace.
2. ``query_too_short`` / ``query_too_long``: the query's length in characters,
   surrounding whitespace excluded, is outside ``[min_query_chars, max_query_chars]``.
3. ``invalid_tools_json``: ``tools`` absent, not a string, or not strict JSON.
4. ``invalid_tools_shape``: not a non-empty list of tool schemas with unique names.
5. ``invalid_answers_json``: ``answers`` absent, not a string, or not strict JSON.
6. ``invalid_answers_shape``: not a list, an empty list, an element that is not
   ``{name, arguments}``, or a call naming a tool that is not offered (such a
   gold call cannot be answered correctly, so it would score every model as wrong).
7. ``multi_call_answer``: the answers list holds more than one call (checked
   before the element shape of step 6, as soon as the list length is known).

With ``keep_multi_call`` (``prepare --keep-multi-call``), steps 6 and 7 let
answer lists of any length through: several calls are parallel-call examples
and an empty list is an abstention example (no offered tool applies); each
element is still checked as in step 6. Such splits are scored with
``--scoring calls``. The default stays the spec's single-call data.

Then, for untranslated (root) rows in file order:

8. ``duplicate_query``: the normalised query (NFKC, casefold, whitespace
   collapsed) was already kept in the same language.

Then, for translated rows in file order:

9. ``missing_root``: the root is absent, was dropped, or is itself translated.
10. ``tools_mismatch`` / ``answers_mismatch``: the ``tools`` / ``answers`` string
    is not byte-identical to the root's (a translation changes the query only,
    or the matched-pair gap would compare different tasks).
11. ``duplicate_pair``: the root already has a kept translation in this language.
12. ``duplicate_query``: as in step 8, against every kept row of the language.

Roots are shuffled with a seeded numpy Generator and cut into fixed-size
splits; translated rows follow their root. Finally:

13. ``cross_split_duplicate``: a translated row whose normalised query equals
    a row of another language in a *different* split (translated rows cannot
    be moved, so they are dropped rather than leak text across splits).
    Roots of different languages with the same normalised query are not
    reconciled: raw data normally has roots in one language only.

Problems with the file itself (malformed JSON, a line that is not an object,
no id, a duplicate id, an invalid language, a translated row in its root's
language) are not drop reasons: they raise :class:`DataError` naming the
line, and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from sommelier_mlflow._json import JSONDecodeError, atomic_write_json, atomic_write_jsonl, loads
from sommelier_mlflow.data._input_formats import DEFAULT_INPUT_FORMAT, PrepareResult, input_format
from sommelier_mlflow.data._jsonl import JsonlReader
from sommelier_mlflow.data._schemas import DROP_SUMMARY_SCHEMA, TestExample, validate_language
from sommelier_mlflow.data._tools import gold_call_problem, query_hash, tools_problem
from sommelier_mlflow.errors import ConfigError, DataError, InputError

__all__ = [
    "DROP_REASONS",
    "SPLIT_NAMES",
    "DEFAULT_MIN_QUERY_CHARS",
    "DEFAULT_MAX_QUERY_CHARS",
    "PrepareResult",
    "identifier",
    "check_split_sizes",
    "drop_counts",
    "write_prepared",
    "UNASSIGNED",
    "prepare_xlam",
    "prepare",
]

#: Every drop reason, in the order the checks run.
DROP_REASONS: Final = (
    "missing_query",
    "query_too_short",
    "query_too_long",
    "invalid_tools_json",
    "invalid_tools_shape",
    "invalid_answers_json",
    "invalid_answers_shape",
    "multi_call_answer",
    "duplicate_query",
    "missing_root",
    "tools_mismatch",
    "answers_mismatch",
    "duplicate_pair",
    "cross_split_duplicate",
)
SPLIT_NAMES: Final = ("train", "validation", "test")
DEFAULT_MIN_QUERY_CHARS: Final = 1
DEFAULT_MAX_QUERY_CHARS: Final = 4096
#: The split of a row (or conversation) the seeded draw left out of every split.
UNASSIGNED: Final = "unassigned"


@dataclass(slots=True)
class _Row:
    """One raw row and what validation concluded about it."""

    line: int
    example_id: str
    language: str
    root_id: str | None
    query: str = ""
    tools_text: str = ""
    answers_text: str = ""
    tools: list[Any] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    qhash: str = ""
    reason: str | None = None
    split: str | None = None


def identifier(value: object) -> str | None:
    """Stringify an id the way datasets store them (strings or integers)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def check_split_sizes(seed: object, split_sizes: object) -> dict[str, int]:
    """Check the seed and the three split sizes every input format takes.

    Raises:
        ConfigError: A negative or non-integer seed or size, or all sizes zero.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(split_sizes, Mapping) or set(split_sizes) != set(SPLIT_NAMES):
        raise ConfigError(
            "split_sizes must map exactly 'train', 'validation' and 'test' to row counts, "
            f"got {split_sizes!r}"
        )
    sizes: dict[str, int] = {}
    for name in SPLIT_NAMES:
        size = split_sizes[name]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ConfigError(f"split_sizes[{name!r}] must be a non-negative integer, got {size!r}")
        sizes[name] = size
    if sum(sizes.values()) == 0:
        raise ConfigError("split_sizes are all zero; ask for at least one row")
    return sizes


def _check_config(
    seed: object, split_sizes: object, min_query_chars: object, max_query_chars: object
) -> dict[str, int]:
    sizes = check_split_sizes(seed, split_sizes)
    limits: list[int] = []
    for name, value in (("min_query_chars", min_query_chars), ("max_query_chars", max_query_chars)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        limits.append(value)
    if limits[0] > limits[1]:
        raise ConfigError(
            f"min_query_chars ({limits[0]}) is larger than max_query_chars ({limits[1]})"
        )
    return sizes


def _read_rows(
    reader: JsonlReader, min_chars: int, max_chars: int, keep_multi_call: bool
) -> list[_Row]:
    rows: list[_Row] = []
    seen: dict[str, int] = {}
    for line_no, raw in reader:
        example_id = identifier(raw.get("example_id", raw.get("id")))
        if example_id is None:
            raise DataError(
                "row has no usable 'example_id' or 'id' (a non-empty string or an integer)",
                path=reader.path,
                line=line_no,
            )
        if example_id in seen:
            raise DataError(
                f"duplicate example id {example_id!r} (first at line {seen[example_id]})",
                path=reader.path,
                line=line_no,
            )
        seen[example_id] = line_no
        try:
            language = validate_language(raw.get("language", "en"))
        except InputError as exc:
            raise DataError(str(exc), path=reader.path, line=line_no) from exc
        root_value = raw.get("source_example_id")
        root_id = None if root_value is None else identifier(root_value)
        if root_value is not None and root_id is None:
            raise DataError(
                "source_example_id must be a non-empty string, an integer or null, "
                f"got {root_value!r}",
                path=reader.path,
                line=line_no,
            )
        if root_id == example_id:
            raise DataError(
                "source_example_id points at the row itself", path=reader.path, line=line_no
            )
        row = _Row(line=line_no, example_id=example_id, language=language, root_id=root_id)
        row.reason = _content_reason(row, raw, min_chars, max_chars, keep_multi_call)
        rows.append(row)
    return rows


def _content_reason(
    row: _Row, raw: Mapping[str, Any], min_chars: int, max_chars: int, keep_multi_call: bool
) -> str | None:
    """Run checks 1-7 on one row, filling in its parsed fields; return the first failure."""
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        return "missing_query"
    length = len(query.strip())
    if length < min_chars:
        return "query_too_short"
    if length > max_chars:
        return "query_too_long"
    row.query = query
    tools_json = _json_field(raw, "tools")
    if tools_json is None:
        return "invalid_tools_json"
    tools_text, tools = tools_json
    if tools_problem(tools) is not None or not isinstance(tools, list):
        return "invalid_tools_shape"
    answers_json = _json_field(raw, "answers")
    if answers_json is None:
        return "invalid_answers_json"
    answers_text, answers = answers_json
    if not isinstance(answers, list) or (not answers and not keep_multi_call):
        return "invalid_answers_shape"
    if len(answers) > 1 and not keep_multi_call:
        return "multi_call_answer"
    for call in answers:
        if gold_call_problem(call, tools) is not None or not isinstance(call, dict):
            return "invalid_answers_shape"
    row.tools_text = tools_text
    row.answers_text = answers_text
    row.tools = tools
    row.calls = answers
    row.qhash = query_hash(query)
    return None


def _json_field(raw: Mapping[str, Any], key: str) -> tuple[str, Any] | None:
    """The JSON text under ``key`` and its decoded value; ``None`` if it is not JSON text.

    ``tools`` and ``answers`` are both JSON inside a string and both drop the
    row the same way when they are not, so the text and its value are read
    in one place (the text is kept: the pair checks compare it byte for byte).
    """
    text = raw.get(key)
    if not isinstance(text, str):
        return None
    try:
        return text, loads(text)
    except (JSONDecodeError, RecursionError):
        return None


def _resolve_pairs(rows: list[_Row], path: str) -> None:
    """Run checks 8-12: duplicates among roots, then the links of translated rows."""
    claimed_queries: set[tuple[str, str]] = set()
    for row in rows:
        if row.root_id is None and row.reason is None:
            key = (row.language, row.qhash)
            if key in claimed_queries:
                row.reason = "duplicate_query"
            else:
                claimed_queries.add(key)
    by_id = {row.example_id: row for row in rows}
    claimed_pairs: set[tuple[str, str]] = set()
    for row in rows:
        if row.root_id is None or row.reason is not None:
            continue
        root = by_id.get(row.root_id)
        if root is None or root.root_id is not None or root.reason is not None:
            row.reason = "missing_root"
            continue
        if root.language == row.language:
            raise DataError(
                f"translated row is in the same language {row.language!r} as its root "
                f"{root.example_id!r} (line {root.line}); a translation must be in another "
                "language",
                path=path,
                line=row.line,
            )
        if row.tools_text != root.tools_text:
            row.reason = "tools_mismatch"
        elif row.answers_text != root.answers_text:
            row.reason = "answers_mismatch"
        elif (root.example_id, row.language) in claimed_pairs:
            row.reason = "duplicate_pair"
        elif (row.language, row.qhash) in claimed_queries:
            row.reason = "duplicate_query"
        else:
            claimed_pairs.add((root.example_id, row.language))
            claimed_queries.add((row.language, row.qhash))


def _assign_splits(
    rows: list[_Row], sizes: Mapping[str, int], seed: int, path: str
) -> dict[str, list[_Row]]:
    """Shuffle the valid roots, cut fixed-size splits, attach translations, check 13.

    Raises:
        ConfigError: If there are fewer valid roots than the sizes ask for.
    """
    roots = [row for row in rows if row.root_id is None and row.reason is None]
    needed = sum(sizes.values())
    if len(roots) < needed:
        asked = ", ".join(f"{name} {sizes[name]}" for name in SPLIT_NAMES)
        drops: dict[str, int] = {}
        for row in rows:
            if row.root_id is None and row.reason is not None:
                drops[row.reason] = drops.get(row.reason, 0) + 1
        dropped = ", ".join(
            f"{reason} {drops[reason]}" for reason in DROP_REASONS if reason in drops
        )
        raise ConfigError(
            f"{path}: only {len(roots)} valid root rows, but the split sizes ask for {needed} "
            f"({asked}); lower the sizes or supply more rows. Root rows dropped: "
            f"{dropped or 'none'}. Nothing was written."
        )
    order = np.random.default_rng(seed).permutation(len(roots))
    splits: dict[str, list[_Row]] = {name: [] for name in SPLIT_NAMES}
    start = 0
    for name in SPLIT_NAMES:
        for index in order[start : start + sizes[name]]:
            root = roots[int(index)]
            root.split = name
            splits[name].append(root)
        start += sizes[name]
    for index in order[start:]:
        roots[int(index)].split = UNASSIGNED

    by_id = {row.example_id: row for row in rows}
    translations: dict[str, list[_Row]] = {}
    for row in rows:
        if row.root_id is not None and row.reason is None:
            translations.setdefault(row.root_id, []).append(row)
    query_split: dict[str, str] = {}
    for name in SPLIT_NAMES:
        for root in splits[name]:
            query_split.setdefault(root.qhash, name)
    for name in SPLIT_NAMES:
        paired: list[_Row] = []
        for root in splits[name]:
            paired.extend(sorted(translations.get(root.example_id, []), key=_pair_order))
        for row in paired:
            owner = query_split.setdefault(row.qhash, name)
            if owner != name:
                row.reason = "cross_split_duplicate"
            else:
                row.split = name
                splits[name].append(row)
    for row in rows:
        if row.root_id is not None and row.reason is None and row.split is None:
            row.split = by_id[row.root_id].split  # the root was not drawn: unassigned
    return splits


def drop_counts(
    reasons: Sequence[str], outcomes: Iterable[tuple[str, str | None, str | None]]
) -> dict[str, Any]:
    """The counting part of a drop summary, shared by every input format.

    Args:
        reasons: The format's drop reasons, in the order its checks run.
        outcomes: One ``(language, drop reason or None, split or None)`` per
            counted unit (a row, or an assistant turn); the split is a name of
            :data:`SPLIT_NAMES`, :data:`UNASSIGNED`, or ``None`` (nowhere).

    Returns:
        ``reasons``, ``languages``, ``read``, ``dropped`` (per language and
        reason), ``dropped_total``, ``unassigned``, ``kept`` and ``splits``.
    """
    outcomes = list(outcomes)
    languages = sorted({language for language, _, _ in outcomes})
    read = dict.fromkeys(languages, 0)
    dropped = {language: dict.fromkeys(reasons, 0) for language in languages}
    unassigned = dict.fromkeys(languages, 0)
    per_split = {name: dict.fromkeys(languages, 0) for name in SPLIT_NAMES}
    for language, reason, split in outcomes:
        read[language] += 1
        if reason is not None:
            dropped[language][reason] += 1
        elif split == UNASSIGNED:
            unassigned[language] += 1
        elif split is not None:
            per_split[split][language] += 1
    return {
        "reasons": list(reasons),
        "languages": languages,
        "read": read,
        "dropped": dropped,
        "dropped_total": {
            reason: sum(dropped[language][reason] for language in languages) for reason in reasons
        },
        "unassigned": unassigned,
        "kept": {
            language: sum(per_split[name][language] for name in SPLIT_NAMES)
            for language in languages
        },
        "splits": per_split,
    }


def write_prepared(
    out_dir: str | os.PathLike[str],
    splits: Mapping[str, tuple[Any, ...]],
    lines: Mapping[str, Iterable[Mapping[str, Any]]],
    summary: dict[str, Any],
) -> PrepareResult:
    """Write each split's rows and ``drop_summary.json``, each atomically, and say where.

    Args:
        out_dir: The output folder (created if needed).
        splits: What :class:`PrepareResult` holds per split.
        lines: The JSON rows written per split (the same rows, as the file holds them).
        summary: The drop summary.
    """
    target = Path(out_dir)
    paths = {name: target / f"{name}.jsonl" for name in SPLIT_NAMES}
    for name in SPLIT_NAMES:
        atomic_write_jsonl(paths[name], lines[name])
    summary_path = atomic_write_json(target / "drop_summary.json", summary)
    return PrepareResult(
        split_paths=paths, drop_summary_path=summary_path, splits=splits, summary=summary
    )


def _pair_order(row: _Row) -> tuple[str, int]:
    return (row.language, row.line)


def _summary(
    rows: list[_Row],
    *,
    input_name: str,
    input_sha256: str,
    seed: int,
    sizes: Mapping[str, int],
    min_chars: int,
    max_chars: int,
) -> dict[str, Any]:
    return {
        "schema_version": DROP_SUMMARY_SCHEMA,
        "input": {"file": input_name, "sha256": input_sha256, "rows": len(rows)},
        "seed": seed,
        "requested_split_sizes": dict(sizes),
        "query_chars": {"min": min_chars, "max": max_chars},
        **drop_counts(DROP_REASONS, ((row.language, row.reason, row.split) for row in rows)),
    }


def _example(row: _Row) -> TestExample:
    return TestExample(
        example_id=row.example_id,
        language=row.language,
        query=row.query,
        tools=row.tools,
        gold_calls=row.calls,
        source_example_id=row.root_id,
    )


def prepare(
    raw_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int,
    split_sizes: Mapping[str, int],
    min_query_chars: int = DEFAULT_MIN_QUERY_CHARS,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
    keep_multi_call: bool = False,
    input_format: str = DEFAULT_INPUT_FORMAT,
    strict: bool = False,
) -> PrepareResult:
    """Read ``raw_path`` in the registered ``input_format`` and write seeded splits.

    ``xlam`` (the default) is :func:`prepare_xlam`; the conversation formats
    (``openai``, ``hermes_fc``, ``sharegpt``, ``toolace``, ``glaive``) turn
    every assistant turn into an example and split by conversation
    (``data/_conversation_import.py``; their ``split_sizes`` count conversations).

    Args:
        raw_path: The raw file, as its source ships it.
        out_dir: Where the splits and ``drop_summary.json`` go.
        seed: Seed of the numpy Generator that shuffles roots or conversations.
        split_sizes: Roots (xlam) or conversations per split.
        min_query_chars: xlam only: shortest accepted query.
        max_query_chars: xlam only: longest accepted query.
        keep_multi_call: xlam only: keep parallel and abstention rows.
        input_format: A registered input format (``--input-format``).
        strict: Conversation formats: the first drop is a DataError (exit 2)
            naming file, line and message, instead of a counted drop.

    Raises:
        ConfigError: An unknown format, invalid arguments, or too few rows.
        DataError: A malformed raw file (or, ``strict``, the first drop).
    """
    return _input_format(input_format).prepare(
        raw_path,
        out_dir,
        seed=seed,
        split_sizes=split_sizes,
        min_query_chars=min_query_chars,
        max_query_chars=max_query_chars,
        keep_multi_call=keep_multi_call,
        strict=strict,
    )


_input_format = input_format  # the parameter of prepare() shadows the lookup's name


def prepare_xlam(
    raw_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int,
    split_sizes: Mapping[str, int],
    min_query_chars: int = DEFAULT_MIN_QUERY_CHARS,
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
    keep_multi_call: bool = False,
    strict: bool = False,
) -> PrepareResult:
    """Validate raw rows, split them with a seed and write the splits and a drop summary.

    Everything is validated and computed before the first byte is written, and
    each file is written atomically, so a failure leaves ``out_dir`` untouched.

    Args:
        raw_path: JSONL of raw rows: ``example_id`` (or ``id``), ``query``,
            ``tools`` and ``answers`` as JSON strings, optional ``language``
            (default ``"en"``) and ``source_example_id``. Other fields are ignored.
        out_dir: Where ``train.jsonl``, ``validation.jsonl``, ``test.jsonl`` and
            ``drop_summary.json`` go (created if needed).
        seed: Seed of the numpy Generator that shuffles the roots.
        split_sizes: Exact number of root rows per split (``train``,
            ``validation``, ``test``); translated rows come on top, in their
            root's split. A size of 0 writes an empty file.
        min_query_chars: Shortest accepted query, in characters.
        max_query_chars: Longest accepted query, in characters.
        keep_multi_call: Keep rows answered by several calls or by none (an
            empty answers list: an abstention example) instead of dropping them
            as ``multi_call_answer`` / ``invalid_answers_shape``. The splits then
            need ``--scoring calls``; the drop summary records the choice.
        strict: Refused (ConfigError): xlam rows always drop with counted reasons.

    Returns:
        The paths written, the examples of each split and the summary.

    Raises:
        ConfigError: On invalid arguments, or too few valid roots for the sizes.
        DataError: On a malformed raw file (see the module docstring).
    """
    sizes = _check_config(seed, split_sizes, min_query_chars, max_query_chars)
    if strict:
        raise ConfigError(
            "--strict applies to the conversation input formats; xlam rows always drop with "
            "counted reasons (see drop_summary.json)"
        )
    if not isinstance(keep_multi_call, bool):
        raise ConfigError(f"keep_multi_call must be true or false, got {keep_multi_call!r}")
    reader = JsonlReader(raw_path)
    rows = _read_rows(reader, min_query_chars, max_query_chars, keep_multi_call)
    if not rows:
        raise DataError("raw file is empty", path=reader.path)
    _resolve_pairs(rows, reader.path)
    splits = _assign_splits(rows, sizes, seed, reader.path)
    summary = _summary(
        rows,
        input_name=Path(reader.path).name,
        input_sha256=reader.sha256,
        seed=seed,
        sizes=sizes,
        min_chars=min_query_chars,
        max_chars=max_query_chars,
    )
    if keep_multi_call:
        # Only when set, so the default summary stays byte-identical to the spec's.
        summary["keep_multi_call"] = True
    examples = {name: tuple(_example(row) for row in splits[name]) for name in SPLIT_NAMES}
    lines = {name: (example.to_json() for example in examples[name]) for name in SPLIT_NAMES}
    return write_prepared(out_dir, examples, lines, summary)
