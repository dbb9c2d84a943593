"""Import the Berkeley Function Calling Leaderboard's questions as an ordinary test split.

BFCL v4 ships one JSON-lines file per category, ``BFCL_v4_<category>.json``
(an ``id``, the ``question`` as a list of turns of chat messages, the
``function`` docs offered), and for every call category a file of the same
name under ``possible_answer/`` holding, per id, the ``ground_truth``: one
``{function: {parameter: [acceptable values]}}`` per expected call. Where
BFCL expects no call at all (the ``irrelevance`` categories) there is no
answer file.

Each kept question becomes one ``sommelier_mlflow.test_example.v1`` row:

- ``example_id`` is BFCL's id, ``language`` is ``en``, ``category`` its category;
- ``query`` is the user turn; a question that is anything but one user turn
  (optionally after one system turn, whose text is not carried: the product's
  prompt brings its own system message) is skipped and counted as
  ``not_one_user_turn``; one offering no function at all (a few
  ``live_irrelevance`` questions) as ``no_function_offered``, since every
  split row offers at least one tool;
- ``tools`` are BFCL's function docs rewritten as JSON Schema, because chat
  templates and OpenAI-style tools expect it: ``dict`` becomes ``object``,
  ``float`` ``number``, ``tuple`` ``array``, and ``any`` loses its type;
  every other key (descriptions, enums, defaults) is kept;
- ``gold_calls`` are BFCL's possible answers, one per expected call (none on
  an ``irrelevance`` question: no call is the right answer), as *answer
  keys* that only ``--scoring bfcl`` reads: ``{"name": function,
  "arguments": {parameter: {"acceptable": [...], "bfcl_type": [...],
  "required": bool}}}``. ``acceptable`` is BFCL's list verbatim (``""``
  marks an optional parameter); ``bfcl_type`` keeps BFCL's own type names,
  which the AST rules need (an integer passes where BFCL says ``float``,
  a ``tuple`` is checked as a list): ``[type]``, or ``[type, item type]``
  for a typed ``array``/``tuple``, or ``null`` for an answer parameter the
  schema does not declare (BFCL then refuses any value for it); ``required``
  says whether the schema requires it. A required parameter the answer does
  not list appears with no acceptable value, as BFCL can never pass it.

The four ``multi_turn_*`` categories become one multi-turn row per question
(``data/_bfcl_multi_turn.py`` says how and which questions it skips).

Every skipped question is counted per category and reason, and named (id,
line, reason, detail) under ``dropped_questions`` in the drop summary;
with ``strict`` the first one stops the import instead (exit 2, naming file,
line and question).

Anything the AST rules could not read is refused rather than skipped: a
missing folder or file, an empty file (a failed download, which would
otherwise drop its category unnoticed), a question without its possible
answer, ids that do not line up or repeat, a malformed line, an unknown BFCL
type, an answer naming a function the question does not offer. Each error
names the file, line and category (exit 2), and the split and its drop
summary are written together, after everything was read, or not at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sommelier_mlflow._json import atomic_write_json, atomic_write_jsonl, staged_folder
from sommelier_mlflow.data._bfcl_multi_turn import (
    BFCL_EXECUTION_DROP_REASONS,
    BFCL_MULTI_TURN_CATEGORIES,
    BFCL_MULTI_TURN_DROP_REASONS,
    BFCL_MULTI_TURN_FUNC_DOCS,
    MultiTurnCheck,
    MultiTurnProblem,
    multi_turn_row,
)
from sommelier_mlflow.data._jsonl import JsonlReader
from sommelier_mlflow.data._schemas import TEST_EXAMPLE_SCHEMA, schema_version
from sommelier_mlflow.data._tools import tools_problem
from sommelier_mlflow.errors import ConfigError, DataError
from sommelier_mlflow.toolcalls import JSON_SCHEMA_TYPES

__all__ = [
    "BFCL_DEFAULT_CATEGORIES",
    "BFCL_ACCEPTED_CATEGORIES",
    "BFCL_DROP_REASONS",
    "BFCL_DROP_SUMMARY_SCHEMA",
    "BfclImportResult",
    "bfcl_json_schema",
    "import_bfcl",
]

#: The categories imported when none are named: BFCL's single-turn, non-live AST set.
BFCL_DEFAULT_CATEGORIES: Final = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
#: Every category this importer reads: the defaults, their ``live_`` counterparts and the
#: multi-turn categories.
BFCL_ACCEPTED_CATEGORIES: Final = (
    *BFCL_DEFAULT_CATEGORIES,
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    *BFCL_MULTI_TURN_CATEGORIES,
)
# Categories BFCL scores by a backend this product does not run, by another
# language's type system, or by a relevance rule: the AST rules of one answer
# do not apply, so importing them would produce a split nothing can score.
_REFUSED: Final = {
    "memory": "needs BFCL's memory backend across turns",
    "web_search": "needs live web search across turns",
    "format_sensitivity": "scores prompt-format variants, not one answer",
    "simple_java": "uses Java's types",
    "simple_javascript": "uses JavaScript's types",
    "live_relevance": "is scored by BFCL's relevance rule, not by matching an answer",
}
#: Why a single-turn question was skipped (counted per category in the drop summary;
#: a multi-turn category counts ``BFCL_MULTI_TURN_DROP_REASONS`` instead).
BFCL_DROP_REASONS: Final = ("not_one_user_turn", "no_function_offered")
BFCL_DROP_SUMMARY_SCHEMA: Final = schema_version("bfcl_drop_summary")
_NOT_ONE_USER_TURN: Final = "is not one user turn (optionally after one system turn)"

# BFCL's type names, each with its JSON Schema type from the one table (None: any value).
_JSON_SCHEMA_TYPE: Final[dict[str, str | None]] = {
    name: JSON_SCHEMA_TYPES[name]
    for name in ("string", "integer", "float", "boolean", "array", "tuple", "dict", "any")
}
_LIST_TYPES: Final = frozenset({"array", "tuple"})


@dataclass(frozen=True, slots=True)
class BfclImportResult:
    """What :func:`import_bfcl` wrote.

    Attributes:
        split_path: The test split (JSON lines).
        drop_summary_path: The drop summary beside it.
        rows: The rows written, in category then file order.
        summary: The drop summary's content.
    """

    split_path: Path
    drop_summary_path: Path
    rows: tuple[dict[str, Any], ...]
    summary: dict[str, Any]


def _checked_categories(categories: Iterable[str] | None) -> tuple[str, ...]:
    chosen = tuple(categories) if categories is not None else BFCL_DEFAULT_CATEGORIES
    if not chosen:
        return BFCL_DEFAULT_CATEGORIES
    refused = []
    for name in chosen:
        if name in BFCL_ACCEPTED_CATEGORIES:
            continue
        if name in _REFUSED:
            refused.append(f"{name} ({_REFUSED[name]})")
        else:
            refused.append(f"{name} (not a BFCL v4 category)")
    if refused:
        raise ConfigError(
            f"cannot import BFCL categories: {'; '.join(refused)}. "
            f"Accepted: {', '.join(BFCL_ACCEPTED_CATEGORIES)}"
        )
    duplicates = sorted({name for name in chosen if chosen.count(name) > 1})
    if duplicates:
        raise ConfigError(f"BFCL categories named more than once: {', '.join(duplicates)}")
    return chosen


def _convert_node(
    node: object, where: str, fail: Callable[[str], Exception]
) -> tuple[dict[str, Any], str]:
    """One BFCL schema node as JSON Schema, and its BFCL type name."""
    if not isinstance(node, dict):
        raise fail(f"{where} must be an object describing a parameter")
    bfcl_type = node.get("type")
    if not isinstance(bfcl_type, str) or bfcl_type not in _JSON_SCHEMA_TYPE:
        raise fail(
            f"{where} has BFCL type {bfcl_type!r}, which the AST rules do not know "
            f"(known: {', '.join(_JSON_SCHEMA_TYPE)})"
        )
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            json_type = _JSON_SCHEMA_TYPE[bfcl_type]
            if json_type is not None:
                converted["type"] = json_type
        elif key == "properties" and isinstance(value, dict):
            converted[key] = {
                name: _convert_node(child, f"{where}.{name}", fail)[0]
                for name, child in value.items()
            }
        elif key == "items":
            converted[key] = _convert_node(value, f"{where}[]", fail)[0]
        else:
            converted[key] = value
    return converted, bfcl_type


def bfcl_json_schema(
    function: Mapping[str, Any], fail: Any = ValueError
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """One BFCL function doc as a JSON-Schema tool, plus its parameters' BFCL types.

    Args:
        function: ``{"name", "description", "parameters"}`` as BFCL writes it.
        fail: Builds the exception raised for a doc the AST rules cannot read
            (called with the message).

    Returns:
        The tool and ``{parameter: [type]}`` (``[type, item type]`` for an
        ``array`` or ``tuple`` whose items are typed).
    """
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise fail("a function doc needs a non-empty string 'name'")
    parameters = function.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties"), dict):
        raise fail(f"function {name!r}: 'parameters' must be an object with 'properties'")
    schema, _ = _convert_node(parameters, f"function {name!r} parameters", fail)
    types: dict[str, list[str]] = {}
    for param, node in parameters["properties"].items():
        # _convert_node has checked every node, so each has a known type here.
        names = [node["type"]]
        items = node.get("items")
        if names[0] in _LIST_TYPES and isinstance(items, dict):
            names.append(items["type"])
        types[param] = names
    tool = {key: value for key, value in function.items() if key != "parameters"}
    tool["parameters"] = schema
    return tool, types


def _user_turn(question: object) -> str | None:
    """The user message of a one-turn question (after at most one system message)."""
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        return None
    messages = question[0]
    roles = [message.get("role") if isinstance(message, dict) else None for message in messages]
    if roles not in (["user"], ["system", "user"]):
        return None
    content = messages[-1].get("content")
    return content if isinstance(content, str) and content.strip() else None


def _checked_answers(
    answers: object,
    offered: Mapping[str, Mapping[str, list[str]]],
    fail: Callable[[str], Exception],
) -> list[Any]:
    """The ground truth, verbatim, after checking the AST rules can read it."""
    if not isinstance(answers, list) or not answers:
        raise fail("'ground_truth' must be a non-empty list of expected calls")
    for index, call in enumerate(answers):
        if not isinstance(call, dict) or len(call) != 1:
            raise fail(f"ground_truth[{index}] must be one {{function: {{parameter: [values]}}}}")
        ((name, params),) = call.items()
        if name not in offered:
            raise fail(f"ground_truth[{index}] names {name!r}, which the question does not offer")
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise fail(f"ground_truth[{index}]: each parameter must map to a list of values")
    return answers


def _answer_key(
    answer: dict[str, Any], types: Mapping[str, Mapping[str, list[str]]], tools: list[Any]
) -> dict[str, Any]:
    """One expected call as the gold call ``--scoring bfcl`` reads (see the module docstring)."""
    ((name, params),) = answer.items()
    param_types = types[name]
    (tool,) = (tool for tool in tools if tool["name"] == name)
    required = tool["parameters"].get("required", [])
    arguments: dict[str, Any] = {
        param: {
            "acceptable": values,
            "bfcl_type": param_types.get(param),
            "required": param in required,
        }
        for param, values in params.items()
    }
    for param in required:
        if param not in arguments:
            arguments[param] = {
                "acceptable": [],
                "bfcl_type": param_types.get(param),
                "required": True,
            }
    return {"name": name, "arguments": arguments}


def _data_file(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise DataError(
            "BFCL data file not found; DATA_DIR must be BFCL v4's data folder "
            "(bfcl_eval/data of `pip install --no-deps bfcl-eval`)",
            path=str(path),
        )
    if path.stat().st_size == 0:
        # Every BFCL file holds at least one line: an empty one is a failed or cut-off
        # download, and importing it would leave its category out of the split unnoticed.
        raise DataError(
            "BFCL data file is empty (a failed or cut-off download?); install BFCL's data "
            "again (`pip install --force-reinstall --no-deps bfcl-eval`) or leave the "
            "category out",
            path=str(path),
        )
    return path


@dataclass(frozen=True, slots=True)
class _At:
    """A place in a data file; calling it builds the error that names it."""

    path: str
    line: int

    def __call__(self, message: str) -> DataError:
        return DataError(message, path=self.path, line=self.line)


def _question_row(question: dict[str, Any], at: _At) -> tuple[list[Any], dict[str, Any]]:
    """A question's JSON-Schema tools and BFCL types, refusing what the rules cannot read."""
    functions = question.get("function")
    if not isinstance(functions, list):
        raise at("'function' must be the list of function docs offered")
    tools: list[dict[str, Any]] = []
    types: dict[str, dict[str, list[str]]] = {}
    for function in functions:
        if not isinstance(function, dict):
            raise at("every entry of 'function' must be an object")
        tool, param_types = bfcl_json_schema(function, at)
        tools.append(tool)
        types[tool["name"]] = param_types
    problem = tools_problem(tools) if tools else None
    if problem is not None:
        raise at(problem)
    return tools, types


class _Drops:
    """Skipped questions: counted per category and reason, and named; or, strict, the first stops.

    One recorder for single-turn and multi-turn categories, so ``--strict``
    and the drop summary treat both alike.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.counts: dict[str, dict[str, int]] = {}
        self.named: list[dict[str, Any]] = []

    def start(self, category: str) -> None:
        reasons = (
            BFCL_MULTI_TURN_DROP_REASONS
            if category in BFCL_MULTI_TURN_CATEGORIES
            else BFCL_DROP_REASONS
        )
        self.counts[category] = dict.fromkeys(reasons, 0)

    def __call__(self, at: _At, category: str, qid: str, reason: str, detail: str) -> None:
        if self.strict:
            raise at(
                f"question {qid!r} is skipped: {reason}: {detail} (--strict stops at the first "
                "skipped question; without it the question is counted and named in the drop "
                "summary)"
            )
        self.counts[category][reason] += 1
        self.named.append(
            {"category": category, "id": qid, "line": at.line, "reason": reason, "detail": detail}
        )


def _read_category(
    folder: Path, category: str, drops: _Drops, docs: _FuncDocs, check: MultiTurnCheck | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Read one category's questions (and answers) into split rows; count the skipped ones.

    Every refusal also names the category, since a file name alone does not
    say which ``--categories`` to leave out or download again.
    """
    drops.start(category)
    try:
        if category in BFCL_MULTI_TURN_CATEGORIES:
            return _multi_turn_rows(folder, category, drops, docs, check)
        return _category_rows(folder, category, drops)
    except DataError as exc:
        raise DataError(
            f"{exc.reason} (BFCL category {category})", path=exc.path, line=exc.line
        ) from exc


def _paired_lines(
    folder: Path, category: str, files: dict[str, Any], *, answers: bool = True
) -> Iterator[tuple[_At, str, dict[str, Any], _At | None, dict[str, Any] | None]]:
    """Each question with its possible answer: ``(at, id, question, answer_at, answer)``.

    Both files must list the same unique ids in the same order; anything else
    is refused (a damaged or mismatched download), naming file and line.
    Without ``answers`` (the ``irrelevance`` categories have no answer file)
    the answer is ``None``. Once every line is read, ``files`` holds each
    file's name and the SHA-256 of the bytes read.
    """
    file_name = f"BFCL_v4_{category}.json"
    questions = JsonlReader(_data_file(folder, file_name))
    answer_reader = (
        JsonlReader(_data_file(folder / "possible_answer", file_name)) if answers else None
    )
    answer_lines = iter(answer_reader) if answer_reader is not None else iter(())
    first_line: dict[str, int] = {}
    for line, question in questions:
        at = _At(questions.path, line)
        qid = question.get("id")
        if not isinstance(qid, str) or not qid:
            raise at("a question needs a non-empty string 'id'")
        first = first_line.setdefault(qid, line)
        if first != line:
            # Answers repeated alike still line up, so only the ids show it; a split
            # with a repeated example_id is refused by every later command.
            raise at(
                f"question id {qid!r} already appears at line {first}; ids must be unique, "
                "so the file is damaged: install BFCL's data again"
            )
        if answer_reader is None:
            yield at, qid, question, None, None
            continue
        found = next(answer_lines, None)
        if found is None:
            raise at(f"question {qid!r} has no possible answer in {answer_reader.path}")
        answer_at = _At(answer_reader.path, found[0])
        if found[1].get("id") != qid:
            raise answer_at(
                f"possible answer {found[1].get('id')!r} does not line up with question "
                f"{qid!r} at line {line} of {questions.path}; both files must list the "
                "same ids in the same order"
            )
        yield at, qid, question, answer_at, found[1]
    files["questions"] = {"file": file_name, "sha256": questions.sha256}
    if answer_reader is not None:
        extra = next(answer_lines, None)
        if extra is not None:
            raise _At(answer_reader.path, extra[0])(
                f"possible answer {extra[1].get('id')!r} has no question in {questions.path}"
            )
        files["possible_answers"] = {"file": file_name, "sha256": answer_reader.sha256}


def _category_rows(
    folder: Path, category: str, drops: _Drops
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    files: dict[str, Any] = {}
    rows = []
    pairs = _paired_lines(folder, category, files, answers="irrelevance" not in category)
    for at, qid, question, answer_at, answer in pairs:
        tools, types = _question_row(question, at)
        gold: list[dict[str, Any]] = []
        if answer_at is not None and answer is not None:
            answers = _checked_answers(answer.get("ground_truth"), types, answer_at)
            gold = [_answer_key(item, types, tools) for item in answers]
        query = _user_turn(question.get("question"))
        if query is None:
            drops(at, category, qid, "not_one_user_turn", _NOT_ONE_USER_TURN)
            continue
        if not tools:  # only irrelevance questions may offer nothing; a split row needs tools
            drops(at, category, qid, "no_function_offered", "offers no function")
            continue
        rows.append(
            {
                "schema_version": TEST_EXAMPLE_SCHEMA,
                "example_id": qid,
                "language": "en",
                "category": category,
                "query": query,
                "tools": tools,
                "gold_calls": gold,
            }
        )
    return rows, files


class _FuncDocs:
    """The multi-turn classes' function docs as JSON-Schema tools, each file read once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "multi_turn_func_doc"
        self.tools: dict[str, list[dict[str, Any]]] = {}
        self.files: dict[str, str] = {}

    def __call__(self, name: str) -> list[dict[str, Any]] | None:
        file_name = BFCL_MULTI_TURN_FUNC_DOCS.get(name)
        if file_name is None:
            return None
        if name not in self.tools:
            reader = JsonlReader(_data_file(self.folder, file_name))
            tools = []
            for line, function in reader:
                tool, _ = bfcl_json_schema(function, _At(reader.path, line))
                tools.append(tool)
            problem = tools_problem(tools)
            if problem is not None:
                raise DataError(problem, path=reader.path)
            self.tools[name] = tools
            self.files[file_name] = reader.sha256
        return self.tools[name]


def _multi_turn_rows(
    folder: Path, category: str, drops: _Drops, docs: _FuncDocs, check: MultiTurnCheck | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    files: dict[str, Any] = {}
    rows = []
    for at, qid, question, _, answer in _paired_lines(folder, category, files):
        assert answer is not None  # every multi-turn category has its answer file
        built = multi_turn_row(question, answer.get("ground_truth"), category, docs)
        if isinstance(built, dict) and check is not None:
            problem = check(built)
            if problem is not None and problem.reason not in BFCL_EXECUTION_DROP_REASONS:
                raise ConfigError(
                    f"the multi-turn execution check gave reason {problem.reason!r} for "
                    f"{qid!r}; it may give {', '.join(BFCL_EXECUTION_DROP_REASONS)}"
                )
            built = built if problem is None else problem
        if isinstance(built, MultiTurnProblem):
            drops(at, category, qid, built.reason, built.detail)
            continue
        rows.append(built)
    return rows, files


def import_bfcl(
    data_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    categories: Sequence[str] | None = None,
    strict: bool = False,
    check_multi_turn: MultiTurnCheck | None = None,
) -> BfclImportResult:
    """Read BFCL v4 categories and write them as one test split with a drop summary.

    Args:
        data_dir: BFCL v4's data folder (``bfcl_eval/data``).
        out: The split to write (JSON lines); the drop summary is written
            beside it as ``<stem>.drop_summary.json``.
        categories: Categories to import (default :data:`BFCL_DEFAULT_CATEGORIES`).
        strict: Stop at the first question that would be skipped (a
            :class:`DataError` naming file, line, question and reason) instead
            of counting it.
        check_multi_turn: The execution check of each multi-turn row the
            static checks kept (builds BFCL's classes from the environment,
            runs the ground truth); returns ``None`` or a
            :class:`MultiTurnProblem` whose reason is one of
            :data:`BFCL_EXECUTION_DROP_REASONS`. ``None`` skips it.

    Returns:
        The paths written, the rows and the summary.

    Raises:
        ConfigError: A category that cannot be imported (named in the message).
        DataError: A missing folder or file, or a line the AST rules cannot
            read, with the file and line; with ``strict``, the first skipped question.
    """
    chosen = _checked_categories(categories)
    if not isinstance(strict, bool):
        raise ConfigError(f"strict must be true or false, got {strict!r}")
    folder = Path(data_dir)
    if not folder.is_dir():
        raise DataError("BFCL data folder not found", path=os.fspath(data_dir))
    rows: list[dict[str, Any]] = []
    read: dict[str, int] = {}
    drops = _Drops(strict)
    docs = _FuncDocs(folder)
    files: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for category in chosen:
        kept, files[category] = _read_category(folder, category, drops, docs, check_multi_turn)
        for row in kept:
            other = seen.setdefault(row["example_id"], category)
            if other != category:
                raise DataError(
                    f"id {row['example_id']!r} appears in both {other} and {category}",
                    path=os.fspath(folder),
                )
        rows.extend(kept)
        read[category] = len(kept) + sum(drops.counts[category].values())
    if not rows:
        raise DataError("no question was kept; nothing to write", path=os.fspath(folder))
    multi_turn = any(category in BFCL_MULTI_TURN_CATEGORIES for category in chosen)
    summary: dict[str, Any] = {
        "schema_version": BFCL_DROP_SUMMARY_SCHEMA,
        "categories": list(chosen),
        "files": files,
        "reasons": [*BFCL_DROP_REASONS, *(BFCL_MULTI_TURN_DROP_REASONS if multi_turn else ())],
        "read": read,
        "dropped": drops.counts,
        "kept": {
            category: read[category] - sum(drops.counts[category].values()) for category in chosen
        },
        "kept_total": len(rows),
    }
    if docs.files:
        summary["func_docs"] = dict(sorted(docs.files.items()))
    if drops.named:
        summary["dropped_questions"] = drops.named
    target = Path(out)
    summary_name = f"{target.stem}.drop_summary.json"
    with staged_folder(target.parent) as stage:
        atomic_write_jsonl(stage / target.name, rows)
        atomic_write_json(stage / summary_name, summary)
    return BfclImportResult(
        split_path=target,
        drop_summary_path=target.parent / summary_name,
        rows=tuple(rows),
        summary=summary,
    )
