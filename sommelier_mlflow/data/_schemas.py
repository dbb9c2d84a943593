"""Row types shared by every layer: test examples, generation records, the test split.

These are plain frozen dataclasses with explicit validating constructors
rather than coercing models: a gold call with two calls or a language that
cannot name a slice is an error to report, not something to fix up. What
produced a run (model kind, model identity, decoding) is in ``_provenance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sommelier_mlflow._json import field_dict
from sommelier_mlflow.data._multi_turn import multi_turn_problem
from sommelier_mlflow.data._provenance import ModelKind, check_model_kind
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls import PARSE_STATUSES, is_tool_call

__all__ = [
    "schema_version",
    "TEST_EXAMPLE_SCHEMA",
    "GENERATION_SCHEMA",
    "EVALUATION_REPORT_SCHEMA",
    "COMPARISON_REPORT_SCHEMA",
    "DROP_SUMMARY_SCHEMA",
    "OVERALL",
    "DEFAULT_PROMPT_FORMAT",
    "RESERVED_SLICE_NAMES",
    "validate_language",
    "TestExample",
    "is_multi_turn",
    "GENERATION_FIELDS",
    "GENERATION_OPTIONAL_FIELDS",
    "GenerationRecord",
    "DatasetRef",
    "TestSplit",
]


def schema_version(kind: str) -> str:
    """The ``schema_version`` string this package writes for a kind of record."""
    return f"sommelier_mlflow.{kind}.v1"


TEST_EXAMPLE_SCHEMA: Final = schema_version("test_example")
GENERATION_SCHEMA: Final = schema_version("generation")
EVALUATION_REPORT_SCHEMA: Final = schema_version("evaluation_report")
COMPARISON_REPORT_SCHEMA: Final = schema_version("comparison_report")
DROP_SUMMARY_SCHEMA: Final = schema_version("drop_summary")

#: The slice of every example; it heads every per-slice section of reports and keys.
OVERALL: Final = "overall"
#: The product's own prompt format (``--prompt-format sommelier``): rows that do
#: not name a format were rendered in it.
DEFAULT_PROMPT_FORMAT: Final = "sommelier"

#: Top-level MLflow metric-key sections; a language with one of these names
#: would make keys ambiguous, so it is refused.
RESERVED_SLICE_NAMES: Final = frozenset({OVERALL, "gap", "delta", "marginal_gap", "mcnemar"})


def validate_language(language: object) -> str:
    """Check that a language code can name a slice and an MLflow key section.

    Raises:
        InputError: If it is not a non-empty string of letters, digits, ``-`` or
            ``_``, or is one of the reserved section names.
    """
    if (
        not isinstance(language, str)
        or not language
        or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in language)
    ):
        raise InputError(
            f"language {language!r} is not a usable slice name: use a short code such as 'en' "
            "(ASCII letters, digits, '-' or '_')"
        )
    if language in RESERVED_SLICE_NAMES:
        raise InputError(
            f"language {language!r} is reserved for MLflow metric sections "
            f"({', '.join(sorted(RESERVED_SLICE_NAMES))}); rename it"
        )
    return language


@dataclass(frozen=True, slots=True, init=False)
class TestExample:
    """One held-out example: the request, its tools and its gold calls.

    ``gold_calls`` holds zero, one or several calls: one is the spec's
    single-call task, none is an abstention example (no offered tool applies),
    several are parallel calls; the scoring mode decides which are allowed.
    ``source_example_id`` links a translated row to the root it translates;
    ``prompt_text``/``prompt_sha256`` are set once the example is formatted
    (or were supplied already formatted and are replayed byte for byte).
    ``slice_values`` holds the declared slice fields of the row
    (``--slice-by F``), sorted by field name. ``prompt_format`` names the
    prompt format ``prompt_text`` was rendered in (``sommelier`` unless the
    row says otherwise). ``chat_template_kwargs`` holds the extra template
    variables it was rendered with (``--chat-template-kwargs``; empty unless
    the row says otherwise). ``template_date`` is the day the template's
    clock was fixed to (``--template-date YYYY-MM-DD``; ``None`` unless the
    row says otherwise).

    A multi-turn example (BFCL's ``multi_turn_*`` categories, imported by
    ``import-bfcl``) carries ``multi_turn`` (``data/_multi_turn.py``: its user
    turns, the tools added at a turn, the expected calls per turn and the
    environment the calls run in); its ``messages`` are the first user turn
    and it has no gold calls. ``multi_turn`` is ``None`` on every other row.

    A conversation example (``docs/conversations.md``) carries ``messages``
    instead of a query: the OpenAI-shaped history before the assistant turn to
    predict, with ``conversation_id`` and ``turn`` (the 1-based index of that
    assistant turn). Its ``query`` is the last user message's text, kept only
    as a readable label (tables, traces); the row on disk has no ``query``.

    The constructor takes ``gold_call`` (one call, the original signature
    every single-call caller uses) or ``gold_calls``; given both, ``gold_call``
    is the answer, so ``dataclasses.replace(example, gold_call=...)`` works.
    """

    __test__ = False  # not a pytest test class despite the name

    example_id: str
    language: str
    query: str
    tools: list[Any]
    gold_calls: tuple[dict[str, Any], ...]
    source_example_id: str | None
    prompt_text: str | None
    prompt_sha256: str | None
    slice_values: tuple[tuple[str, str], ...]
    prompt_format: str
    chat_template_kwargs: dict[str, Any]
    messages: tuple[dict[str, Any], ...] | None
    conversation_id: str | None
    turn: int | None
    template_date: str | None
    multi_turn: Mapping[str, Any] | None

    def __init__(
        self,
        example_id: str,
        language: str,
        query: str,
        tools: list[Any],
        gold_call: dict[str, Any] | None = None,
        source_example_id: str | None = None,
        prompt_text: str | None = None,
        prompt_sha256: str | None = None,
        *,
        gold_calls: Sequence[dict[str, Any]] | None = None,
        slice_values: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        prompt_format: str = DEFAULT_PROMPT_FORMAT,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        messages: Sequence[dict[str, Any]] | None = None,
        conversation_id: str | None = None,
        turn: int | None = None,
        template_date: str | None = None,
        multi_turn: Mapping[str, Any] | None = None,
    ) -> None:
        if gold_call is None and gold_calls is None:
            raise InputError(
                f"example {example_id!r}: give the gold answer as gold_call (one call) "
                "or gold_calls (a list of calls)"
            )
        if gold_call is not None:
            # gold_call wins over gold_calls: dataclasses.replace(example, gold_call=...)
            # passes the stored gold_calls along with the change.
            calls: tuple[Any, ...] = (gold_call,)
        elif isinstance(gold_calls, (str, bytes, Mapping)) or not isinstance(gold_calls, Sequence):
            raise InputError(
                f"example {example_id!r}: gold_calls must be a list of calls, got {gold_calls!r}"
            )
        else:
            calls = tuple(gold_calls)
        assign = object.__setattr__
        assign(self, "example_id", example_id)
        assign(self, "language", language)
        history = None if messages is None else tuple(messages)
        if history is not None:
            label = _last_user_text(history)
            if query not in ("", label):
                raise InputError(
                    f"example {example_id!r}: give the request as 'query' or as 'messages', "
                    "not both"
                )
            query = label
        assign(self, "query", query)
        assign(self, "tools", tools)
        assign(self, "gold_calls", calls)
        assign(self, "source_example_id", source_example_id)
        assign(self, "prompt_text", prompt_text)
        assign(self, "prompt_sha256", prompt_sha256)
        pairs = slice_values.items() if isinstance(slice_values, Mapping) else slice_values
        assign(self, "slice_values", tuple(sorted((str(k), v) for k, v in pairs)))
        assign(self, "prompt_format", prompt_format)
        assign(self, "chat_template_kwargs", dict(chat_template_kwargs or {}))
        assign(self, "messages", history)
        assign(self, "conversation_id", conversation_id)
        assign(self, "turn", turn)
        assign(self, "template_date", template_date)
        assign(self, "multi_turn", multi_turn)
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.example_id, str) or not self.example_id:
            raise InputError(f"example_id must be a non-empty string, got {self.example_id!r}")
        validate_language(self.language)
        for call in self.gold_calls:
            if not is_tool_call(call):
                raise InputError(
                    f"example {self.example_id!r}: gold call must be exactly "
                    f"{{'name': non-empty str, 'arguments': object}}, got {call!r}"
                )
        if (self.prompt_text is None) != (self.prompt_sha256 is None):
            raise InputError(
                f"example {self.example_id!r}: prompt_text and prompt_sha256 come together"
            )
        if not isinstance(self.prompt_format, str) or not self.prompt_format:
            raise InputError(
                f"example {self.example_id!r}: prompt_format must be a prompt format's name, "
                f"got {self.prompt_format!r}"
            )
        if self.conversation_id is not None and (
            not isinstance(self.conversation_id, str) or not self.conversation_id
        ):
            raise InputError(
                f"example {self.example_id!r}: conversation_id must be a non-empty string, "
                f"got {self.conversation_id!r}"
            )
        if self.turn is not None and (type(self.turn) is not int or self.turn < 1):
            raise InputError(
                f"example {self.example_id!r}: turn must be an integer >= 1 (the 1-based index "
                f"of the assistant turn to predict), got {self.turn!r}"
            )
        for field_name, value in self.slice_values:
            if not isinstance(value, str) or not value:
                raise InputError(
                    f"example {self.example_id!r}: slice field {field_name!r} must be a "
                    f"non-empty string, got {value!r}"
                )
        if self.multi_turn is not None:
            problem = multi_turn_problem(
                self.multi_turn,
                messages=self.messages,
                tools=self.tools,
                gold_calls=len(self.gold_calls),
            )
            if problem is not None:
                raise InputError(f"example {self.example_id!r}: {problem}")

    @property
    def gold_call(self) -> dict[str, Any]:
        """The single gold call of a single-call example.

        Raises:
            InputError: If the example has zero or several gold calls; such
                examples are scored only in ``calls`` mode.
        """
        if len(self.gold_calls) != 1:
            raise InputError(
                f"example {self.example_id!r} has {len(self.gold_calls)} gold calls; the five "
                "single-call metrics need exactly one: score this split with --scoring calls"
            )
        return self.gold_calls[0]

    def to_json(self) -> dict[str, Any]:
        """The native on-disk row (``sommelier_mlflow.test_example.v1``)."""
        row: dict[str, Any] = {
            "schema_version": TEST_EXAMPLE_SCHEMA,
            "example_id": self.example_id,
            "language": self.language,
            "source_example_id": self.source_example_id,
        }
        # Single-turn rows keep their bytes: the conversation fields appear only when set.
        if self.messages is None:
            row["query"] = self.query
        else:
            row["messages"] = list(self.messages)
        if self.conversation_id is not None:
            row["conversation_id"] = self.conversation_id
        if self.turn is not None:
            row["turn"] = self.turn
        row["tools"] = self.tools
        row["gold_calls"] = list(self.gold_calls)
        if self.multi_turn is not None:
            row["multi_turn"] = self.multi_turn
        row.update(self.slice_values)
        if self.prompt_text is not None:
            row["prompt_text"] = self.prompt_text
            row["prompt_sha256"] = self.prompt_sha256
            if self.prompt_format != DEFAULT_PROMPT_FORMAT:  # default rows keep their bytes
                row["prompt_format"] = self.prompt_format
            if self.chat_template_kwargs:
                row["chat_template_kwargs"] = self.chat_template_kwargs
            if self.template_date is not None:
                row["template_date"] = self.template_date
        return row


def is_multi_turn(example: TestExample) -> bool:
    """Whether an example is a multi-turn question (scored by running its turns, not one call)."""
    return example.multi_turn is not None


def _last_user_text(messages: Sequence[Any]) -> str:
    """The text of the last user message of a history (its label), or ``""`` if none."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


#: The exact keys of a generation JSONL record: readers and the resuming
#: writer both refuse a line with any other set.
GENERATION_FIELDS: Final = frozenset(
    {
        "schema_version",
        "example_id",
        "model_kind",
        "language",
        "prompt_sha256",
        "raw_text",
        "parse_status",
        "parsed_call",
        "decoding",
    }
)
#: Keys a generation record has only when set: ``turns``, on a multi-turn
#: question's record (older files, and every single-turn record, keep their bytes).
GENERATION_OPTIONAL_FIELDS: Final = frozenset({"turns"})


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    """One greedy completion for one example, with its parse.

    The parse is stored for convenience and audit; scoring re-derives it from
    ``raw_text`` with the current parser so a stale parse cannot leak in.

    A multi-turn question (BFCL's ``multi_turn_*``) is answered by many
    completions: ``turns`` holds the model's raw output of every step of every
    user turn, in order (what scoring replays through the environment), and
    ``raw_text`` is those texts joined by newlines, a readable transcript.
    ``turns`` is ``None`` on every other record.
    """

    example_id: str
    model_kind: ModelKind
    language: str
    prompt_sha256: str
    raw_text: str
    parse_status: str
    parsed_call: dict[str, Any] | None
    decoding: dict[str, Any] = field(default_factory=dict)
    turns: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        check_model_kind(self.model_kind)
        if self.parse_status not in PARSE_STATUSES:
            raise InputError(f"unknown parse_status {self.parse_status!r}")
        if not isinstance(self.raw_text, str):
            raise InputError(f"raw_text must be a string, got {type(self.raw_text).__name__}")
        if self.turns is not None and not (
            isinstance(self.turns, tuple)
            and all(
                isinstance(turn, tuple) and all(isinstance(text, str) for text in turn)
                for turn in self.turns
            )
        ):
            raise InputError(
                f"turns must be a tuple of turns, each a tuple of step texts, got {self.turns!r}"
            )

    def to_json(self) -> dict[str, Any]:
        """The on-disk JSONL row (``sommelier_mlflow.generation.v1``)."""
        row = {"schema_version": GENERATION_SCHEMA, **field_dict(self, skip={"turns"})}
        if self.turns is not None:  # single-turn records keep their bytes
            row["turns"] = [list(turn) for turn in self.turns]
        return row


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """The MLflow evaluation dataset a split was read from, as reports record it.

    ``digest`` is MLflow's own: it changes with every edit of the dataset, so
    two arms that record the same name, id and digest read the same records.

    Attributes:
        name: The dataset's name.
        dataset_id: MLflow's id of it (``d-...``).
        digest: MLflow's digest of its current state.
    """

    name: str
    dataset_id: str
    digest: str

    def to_dict(self) -> dict[str, str]:
        """``{"name", "id", "digest"}`` as reports store it."""
        return {"name": self.name, "id": self.dataset_id, "digest": self.digest}


@dataclass(frozen=True, slots=True)
class TestSplit:
    """A read, validated test split: examples in file order plus the file's digest.

    ``sha256`` is over the file's bytes so that two arms can prove they
    evaluated the very same split file, not merely one with the same ids. A
    split read from an MLflow evaluation dataset has ``dataset`` set, its
    examples in ``example_id`` order and ``sha256`` over their rows.
    """

    __test__ = False

    path: str
    sha256: str
    examples: tuple[TestExample, ...]
    dataset: DatasetRef | None = None

    @property
    def languages(self) -> tuple[str, ...]:
        """The language slices present, sorted."""
        return tuple(sorted({example.language for example in self.examples}))

    def by_id(self) -> dict[str, TestExample]:
        """Index the examples by ``example_id`` (ids are unique by construction)."""
        return {example.example_id: example for example in self.examples}
