"""Chat formatting: the messages a model sees and the prompt text that is digested.

The prompt is rendered once, through the model's own chat template, and
from then on only replayed: generation feeds the stored ``prompt_text`` to
the model and scoring checks ``prompt_sha256``, so base and adapter are
provably asked the very same bytes. There is deliberately no fallback
template: a prompt rendered in a format the model was not trained on
would make a comparison quietly meaningless.

Prompt formats are registered renderers (``--prompt-format``): ``sommelier``
(the product's own instruction with the tools as JSON; the default, whose
digests never change) and ``native`` (the tokenizer's own tool rendering:
``apply_chat_template(messages, tools=...)``, the format tool-calling models
were trained on). A formatted row records the format its prompt was rendered
in, so a split rendered one way is never replayed as the other.

Templates are checked on the first prompt they render, so a template that
would quietly change the experiment is refused (exit 2) before anything
runs: one that ignores ``tools`` or drops ``--system-prompt``, and one whose
output depends on the day (Llama 3.1/3.2 templates write today's date unless
``date_string`` is passed) or on other call-time state, since then the same
split would get other prompts and digests tomorrow. Extra template variables
(``--chat-template-kwargs``: Qwen3's ``enable_thinking``, Llama's
``date_string``) are recorded in every formatted row. A template whose clock
no variable reaches (gpt-oss's, Mistral's without a system prompt) is rendered
on a fixed day instead (``--template-date YYYY-MM-DD``), recorded as well.

The tokenizer is duck-typed (anything with ``apply_chat_template`` and a
``chat_template`` attribute), so this module does not import transformers.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import date, datetime, tzinfo
from typing import Any, Final, Protocol

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads, sha256_text
from sommelier_mlflow._plugins import PROMPT_FORMATS_GROUP, Registry
from sommelier_mlflow.data._schemas import DEFAULT_PROMPT_FORMAT, TestExample
from sommelier_mlflow.errors import (
    ConfigError,
    DependencyError,
    InputError,
    InvariantViolationError,
)
from sommelier_mlflow.toolcalls import is_tool_call, json_schema_parameters

__all__ = [
    "NATIVE_PROMPT_FORMAT",
    "SYSTEM_INSTRUCTION",
    "ChatTemplateTokenizer",
    "PromptFormat",
    "register_prompt_format",
    "prompt_format",
    "prompt_format_names",
    "build_messages",
    "conversation_text",
    "tool_schemas",
    "MAX_PROMPT_CHARS",
    "read_chat_template_kwargs",
    "read_template_date",
    "render_target",
    "check_prompt_formats",
    "format_examples",
]

NATIVE_PROMPT_FORMAT: Final = "native"

#: The fixed instruction opening every system message. Changing it changes
#: every prompt digest, so it is part of what a comparison pins down.
SYSTEM_INSTRUCTION: Final = (
    "You are a function-calling assistant. Reply to the user's request with exactly one "
    'tool call written as a single JSON object of the form {"name": "<tool name>", '
    '"arguments": {<argument name>: <value>, ...}} and nothing else: no explanation, '
    "no code fences, no second call. Use only the tools listed below, with their "
    "argument names."
)
_TOOLS_HEADING: Final = "Available tools:"

#: The longest prompt a template may render, in characters. Past it a template
#: is looping over something it should not, and no model's context holds it.
MAX_PROMPT_CHARS: Final = 1_000_000

# What apply_chat_template and the product set themselves, and the template
# globals: --chat-template-kwargs may not set them.
_RESERVED_TEMPLATE_KWARGS: Final = frozenset(
    {
        "messages",
        "conversation",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
        "strftime_now",
        "raise_exception",
    }
)
# Where Hugging Face's templates read the clock (strftime_now calls datetime.now()).
_CLOCK_MODULES: Final = ("transformers.utils.chat_template_utils",)
# Two days in different months and years, so any date or time format tells them apart.
_FAKE_DAYS: Final = (datetime(2001, 2, 3, 4, 5, 6), datetime(2012, 11, 24, 19, 58, 47))
_ISO_DAY: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# A fixed day's clock reads noon, so a template asking for the time in any zone
# within twelve hours of this machine's still gets that day.
_NOON: Final = 12


class ChatTemplateTokenizer(Protocol):
    """The part of a Hugging Face tokenizer that formatting relies on."""

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        *,
        tokenize: bool,
        add_generation_prompt: bool,
        **kwargs: Any,
    ) -> Any:
        """Render a conversation with the tokenizer's chat template."""
        ...


@dataclass(frozen=True, slots=True)
class PromptFormat:
    """A registered way of turning an example into the conversation a template renders.

    Attributes:
        name: The ``--prompt-format`` name, recorded in formatted rows and reports.
        description: What the prompt holds, in one sentence.
        messages: ``(example, system_prompt) -> messages`` for the chat template.
        with_tools: Pass the row's tools to the template as JSON schemas
            (``apply_chat_template(..., tools=...)``); a template that renders
            the same text without them is refused.
        takes_system_prompt: Whether ``--system-prompt`` may be given.
    """

    name: str
    description: str
    messages: Callable[[TestExample, str | None], list[dict[str, Any]]]
    with_tools: bool = False
    takes_system_prompt: bool = False


_PROMPT_FORMATS: Final[Registry[PromptFormat]] = Registry(
    "prompt format", PROMPT_FORMATS_GROUP, PromptFormat
)


def register_prompt_format(prompt: PromptFormat) -> PromptFormat:
    """Register a prompt format under its name (``--prompt-format NAME`` then works).

    Raises:
        ConfigError: A malformed name, or a different format under the same name.
    """
    return _PROMPT_FORMATS.register(getattr(prompt, "name", ""), prompt)


def prompt_format(name: str) -> PromptFormat:
    """The registered prompt format ``name`` (ConfigError, exit 2, listing the names)."""
    return _PROMPT_FORMATS.get(name)


def prompt_format_names() -> tuple[str, ...]:
    """Every registered prompt format, plugins included, sorted."""
    return _PROMPT_FORMATS.names()


def build_messages(example: TestExample) -> list[dict[str, str]]:
    """Build the system and user messages for one example.

    The system message is the fixed instruction, then the tools as
    canonical JSON (sorted keys, ASCII), so the same tools always produce the
    same bytes whatever key order the data file used. A conversation example
    keeps these two messages: the user message holds the history as text
    (:func:`conversation_text`), so the format works with any chat template.
    """
    system = f"{SYSTEM_INSTRUCTION}\n\n{_TOOLS_HEADING}\n{canonical_json(example.tools)}"
    user = example.query if example.messages is None else conversation_text(example.messages)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]


def conversation_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """The ``sommelier`` prompt format's text of a conversation history.

    A history that is one user message is that message, exactly as a
    single-turn query renders. Otherwise it is a transcript headed
    ``Conversation so far:``: one block per message, ``System: ...``,
    ``User: ...``, ``Assistant: ...`` (its text), ``Assistant calls: [...]``
    (its calls as canonical JSON ``{"name", "arguments"}`` objects),
    ``Tool result (<name or call id>): ...``, separated by blank lines, then
    ``Reply with the next assistant turn.`` (``docs/conversations.md``).
    """
    history = list(messages)
    if len(history) == 1 and history[0]["role"] == "user":
        return str(history[0]["content"])
    names = {
        call["id"]: call["function"]["name"]
        for message in history
        for call in message.get("tool_calls", [])
        if "id" in call
    }
    blocks = ["Conversation so far:"]
    for message in history:
        role, content = message["role"], message.get("content")
        if role == "tool":
            label = message.get("name") or names.get(message.get("tool_call_id"), "")
            head = f"Tool result ({label})" if label else "Tool result"
            blocks.append(f"{head}: {content}")
            continue
        if content:
            blocks.append(f"{role.capitalize()}: {content}")
        calls = [
            {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
            for call in message.get("tool_calls", [])
        ]
        if calls:
            blocks.append(f"Assistant calls: {canonical_json(calls)}")
    blocks.append("Reply with the next assistant turn.")
    return "\n\n".join(blocks)


def _sommelier_messages(example: TestExample, system_prompt: str | None) -> list[dict[str, str]]:
    del system_prompt  # refused before rendering: the instruction is fixed
    return build_messages(example)


def _native_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One history message as transformers' chat templates take it.

    Assistant calls become ``{"type": "function", "function": {"name",
    "arguments": <object>}}`` (with ``id`` where the row has one); tool
    results stay ``role: tool`` with their ``tool_call_id`` and/or ``name``.
    """
    out = dict(message)
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                **({"id": call["id"]} if "id" in call else {}),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in message["tool_calls"]
        ]
    return out


def _native_messages(example: TestExample, system_prompt: str | None) -> list[dict[str, Any]]:
    """The conversation for ``native``: the query, or the history as the model was trained on it.

    ``--system-prompt`` opens the conversation as a system message; when the
    history has a system message of its own, one system message holds both,
    the given prompt first and a blank line between.
    """
    if example.messages is None:
        history: list[dict[str, Any]] = [{"role": "user", "content": example.query}]
    else:
        history = [_native_message(message) for message in example.messages]
    if not system_prompt:
        return history
    if history[0]["role"] == "system":
        merged = f"{system_prompt}\n\n{history[0]['content']}"
        return [{**history[0], "content": merged}, *history[1:]]
    return [{"role": "system", "content": system_prompt}, *history]


def tool_schemas(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The row's tools in the OpenAI shape chat templates take as ``tools``.

    Each becomes ``{"type": "function", "function": {"name", "description",
    "parameters": {"type": "object", "properties", "required"}}}`` with JSON
    Schema types: xlam's ``"str"``, ``"List[int]"``, ``"str, optional"`` (and
    BFCL's names) are converted by
    :func:`~sommelier_mlflow.toolcalls.json_schema_parameters`, since
    the models were trained on JSON Schema and some templates break on
    anything else. This is only what the model is shown: the row keeps its
    own tools for scoring, and the ``sommelier`` prompt format keeps writing
    them as they are.
    """
    schemas = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool["name"]}
        if "description" in tool:
            function["description"] = tool["description"]
        function["parameters"] = json_schema_parameters(tool.get("parameters", {}))
        schemas.append({"type": "function", "function": function})
    return schemas


def read_chat_template_kwargs(value: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Extra chat-template variables, from ``--chat-template-kwargs JSON`` or a mapping.

    They reach the template as variables (``{"enable_thinking": false}`` for
    Qwen3, ``{"date_string": "26 Jul 2024"}`` for Llama 3.1/3.2), so they
    must be a JSON object whose keys are not what the product passes itself.
    ``""`` and ``None`` mean none.

    Raises:
        ConfigError: Not a JSON object, or a key the product sets itself (exit 2).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            parsed = loads(value, reject_duplicate_keys=True)
        except JSONDecodeError as exc:
            raise ConfigError(
                f"--chat-template-kwargs is not JSON ({exc}); give an object, e.g. "
                "'{\"enable_thinking\": false}'"
            ) from exc
    else:
        parsed = value
    if not isinstance(parsed, Mapping) or not all(isinstance(key, str) for key in parsed):
        raise ConfigError(
            f"--chat-template-kwargs must be a JSON object of template variables, got {value!r}"
        )
    reserved = sorted(set(parsed) & _RESERVED_TEMPLATE_KWARGS)
    if reserved:
        raise ConfigError(
            f"--chat-template-kwargs may not set {', '.join(reserved)}: the product passes "
            "those to the template itself (messages, tools, add_generation_prompt) or the "
            "template environment provides them"
        )
    try:
        checked: dict[str, Any] = loads(canonical_json(dict(parsed)))  # plain JSON values only
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"chat_template_kwargs must hold JSON values only: {exc}") from exc
    return checked


def read_template_date(value: str | date | None) -> str | None:
    """The day a template's clock is fixed to, from ``--template-date YYYY-MM-DD``; ``None``: none.

    Some templates write today's date and take no variable to pin it
    (gpt-oss's, Mistral's without a system prompt); rendering them on a fixed
    day keeps their prompts, and so their digests, the same every day.
    ``""`` and ``None`` mean none.

    Raises:
        ConfigError: Not a calendar date written ``YYYY-MM-DD`` (exit 2).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, date):
        return value.strftime("%Y-%m-%d")
    try:
        if _ISO_DAY.fullmatch(value) is None:
            raise ValueError("not YYYY-MM-DD")
        return date.fromisoformat(value).isoformat()
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"--template-date must be a calendar date written YYYY-MM-DD (e.g. 2024-07-26), "
            f"got {value!r}"
        ) from exc


register_prompt_format(
    PromptFormat(
        DEFAULT_PROMPT_FORMAT,
        "The product's instruction to answer with exactly one JSON call, the tools as "
        "canonical JSON in the system turn, the query as the user turn.",
        _sommelier_messages,
    )
)
register_prompt_format(
    PromptFormat(
        NATIVE_PROMPT_FORMAT,
        "The model family's own tool prompt: the query (after an optional --system-prompt) "
        "rendered with apply_chat_template(messages, tools=<the row's tools as JSON "
        "schemas>), no instruction about how many calls to make.",
        _native_messages,
        with_tools=True,
        takes_system_prompt=True,
    )
)


def render_target(call: Mapping[str, Any]) -> str:
    """Return the training target for a gold call: its canonical JSON, nothing else.

    Raises:
        InputError: If ``call`` is not exactly ``{"name": str, "arguments": object}``.
    """
    value = dict(call) if isinstance(call, Mapping) else call
    if not is_tool_call(value):
        raise InputError(
            f"a target must be one {{'name': str, 'arguments': object}} call, got {call!r}"
        )
    return canonical_json(value)


def _require_chat_template(tokenizer: object) -> None:
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        raise DependencyError(
            f"tokenizer {name!r} has no chat template, so prompts cannot be rendered the way "
            "the model expects; use the tokenizer of a chat/instruct model, or set "
            "tokenizer.chat_template explicitly (there is no built-in fallback)"
        )


def _tokenizer_name(tokenizer: object) -> str:
    return str(getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__)


def _render(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    template_kwargs: Mapping[str, Any],
    *,
    tools: bool = True,
) -> str:
    extra = {"tools": tool_schemas(example.tools)} if prompt.with_tools and tools else {}
    where = f"the chat template of tokenizer {_tokenizer_name(tokenizer)!r}"
    try:
        text = tokenizer.apply_chat_template(
            prompt.messages(example, system_prompt),
            tokenize=False,
            add_generation_prompt=True,
            **template_kwargs,
            **extra,
        )
    except RecursionError as exc:
        raise ConfigError(
            f"{where} recursed without end on example {example.example_id!r} "
            f"(RecursionError: {exc}): one of its macros met a value it does not handle, such as "
            "a parameter type that is not JSON Schema; fix the template or the row's tools"
        ) from exc
    except Exception as exc:  # any template failure is the template's, reported as it said it
        raise ConfigError(
            f"{where} failed on example {example.example_id!r}: {type(exc).__name__}: {exc}; "
            "fix the template (tokenizer.chat_template) or the row, or use another tokenizer"
        ) from exc
    if not isinstance(text, str) or not text:
        raise DependencyError(
            "tokenizer.apply_chat_template(..., tokenize=False) returned "
            f"{type(text).__name__}, not prompt text; the tokenizer does not render templates "
            "as text"
        )
    if len(text) > MAX_PROMPT_CHARS:
        raise ConfigError(
            f"{where} rendered {len(text):,} characters for example {example.example_id!r}, "
            f"more than the {MAX_PROMPT_CHARS:,} a prompt may have; the template loops over "
            "something it should not, or the row is broken"
        )
    return text


def _require_tools_rendered(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    template_kwargs: Mapping[str, Any],
    text: str,
) -> None:
    bare = _render(tokenizer, example, prompt, system_prompt, template_kwargs, tools=False)
    if text == bare:
        raise ConfigError(
            f"the chat template of tokenizer {_tokenizer_name(tokenizer)!r} ignores `tools` "
            f"(example {example.example_id!r} renders the same text with and without them), "
            f"so --prompt-format {prompt.name} would hide the tools from the model; use a "
            "tokenizer whose template renders tools, or --prompt-format "
            f"{DEFAULT_PROMPT_FORMAT}"
        )


def _require_system_prompt_rendered(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    template_kwargs: Mapping[str, Any],
    text: str,
) -> None:
    if text == _render(tokenizer, example, prompt, None, template_kwargs):
        raise ConfigError(
            f"the chat template of tokenizer {_tokenizer_name(tokenizer)!r} drops the system "
            f"prompt (example {example.example_id!r} renders the same text with and without "
            "--system-prompt), so it would change nothing the model sees; use a tokenizer "
            "whose template renders a system message"
            + (" beside tools" if prompt.with_tools else "")
            + ", or leave --system-prompt out"
        )


@contextmanager
def _clock_at(moment: datetime, *, required: bool = False) -> Iterator[None]:
    """Make the clock Hugging Face templates read (``strftime_now``) say ``moment``.

    transformers' ``strftime_now`` calls ``datetime.now()`` of its template
    module at render time; only that module's name is swapped, and only while
    the block runs (the module is imported first when transformers is, so the
    very first rendering reads the stopped clock too). A tokenizer from
    elsewhere keeps its own clock.

    Args:
        moment: What the clock says.
        required: Refuse, rather than go on with the real clock, when no
            template clock can be stopped (``--template-date`` promises a day).

    Raises:
        DependencyError: ``required`` and no template clock was found (exit 3).
    """

    class _Stopped(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> _Stopped:
            return cls.fromtimestamp(moment.timestamp(), tz)

    patched = []
    for name in _CLOCK_MODULES:
        module = sys.modules.get(name)
        if module is None and "transformers" in sys.modules:
            try:
                module = importlib.import_module(name)
            except ImportError:
                module = None
        namespace = vars(module) if module is not None else {}
        if "datetime" in namespace:
            patched.append((namespace, namespace["datetime"]))
            namespace["datetime"] = _Stopped
    if required and not patched:
        raise DependencyError(
            "--template-date fixes the clock of Hugging Face chat templates (strftime_now in "
            f"{', '.join(_CLOCK_MODULES)}), which this tokenizer or transformers version does "
            "not use; render with a transformers tokenizer, or pin the date with a variable "
            "the template reads (--chat-template-kwargs)"
        )
    try:
        yield
    finally:
        for namespace, original in patched:
            namespace["datetime"] = original


def _template_clock(template_date: str | None) -> AbstractContextManager[None]:
    """The clock templates render under: ``template_date`` at noon, or the real one."""
    if template_date is None:
        return nullcontext()
    day = date.fromisoformat(template_date)
    return _clock_at(datetime(day.year, day.month, day.day, _NOON), required=True)


def _require_same_every_day(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    template_kwargs: Mapping[str, Any],
    text: str,
    template_date: str | None,
) -> None:
    """Refuse a template whose prompt depends on the day or on anything else of the call.

    With ``template_date`` the clock stays on that day, so only the call's
    other state can still change the text.
    """
    rendered = []
    for day in (_FAKE_DAYS[0], *_FAKE_DAYS):  # the same day twice, then another day
        clock = _clock_at(day) if template_date is None else _template_clock(template_date)
        with clock:
            rendered.append(_render(tokenizer, example, prompt, system_prompt, template_kwargs))
    name = _tokenizer_name(tokenizer)
    if rendered[0] == rendered[1] != rendered[2]:
        raise ConfigError(
            f"the chat template of tokenizer {name!r} writes the date into the prompt (example "
            f"{example.example_id!r} renders differently on two days), so the same split would "
            "get other prompts and digests tomorrow and arms formatted on different days could "
            "not be compared; pin the date: --chat-template-kwargs "
            '\'{"date_string": "26 Jul 2024"}\' if the template takes that variable (Llama '
            "3.1/3.2's; another template may read another), else --template-date YYYY-MM-DD, "
            "which renders every prompt on that day"
        )
    if len({text, *rendered}) > 1:
        raise ConfigError(
            f"the chat template of tokenizer {name!r} renders example {example.example_id!r} "
            "differently each time it is called (it reads the clock, a random value or other "
            "state of the call), so prompts and digests would not be reproducible; pin the "
            "variables it reads with --chat-template-kwargs, or fix the template"
        )


def check_prompt_formats(
    examples: Iterable[TestExample],
    wanted: str,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    template_date: str | None = None,
) -> None:
    """Refuse formatted rows whose prompts were rendered another way.

    Args:
        examples: The rows; those without a stored prompt are not checked.
        wanted: The prompt format the command renders in.
        chat_template_kwargs: The template variables the command renders
            with; ``None`` leaves them and ``template_date`` unchecked.
        template_date: The day the command fixes the template's clock to
            (``None``: none).

    Raises:
        ConfigError: Naming the field (``prompt_format``,
            ``chat_template_kwargs`` or ``template_date``), the row and both values.
    """
    for example in examples:
        if example.prompt_text is None:
            continue
        if example.prompt_format != wanted:
            raise ConfigError(
                f"example {example.example_id!r}: its stored prompt was rendered with "
                f"prompt_format {example.prompt_format!r}, not {wanted!r}; render the split "
                f"again from its unformatted rows with --prompt-format {wanted}"
            )
        if chat_template_kwargs is not None and canonical_json(
            example.chat_template_kwargs
        ) != canonical_json(dict(chat_template_kwargs)):
            raise ConfigError(
                f"example {example.example_id!r}: its stored prompt was rendered with "
                f"chat_template_kwargs {canonical_json(example.chat_template_kwargs)}, not "
                f"{canonical_json(dict(chat_template_kwargs))}; pass the same "
                "--chat-template-kwargs, or render the split again from its unformatted rows"
            )
        if chat_template_kwargs is not None and example.template_date != template_date:
            raise ConfigError(
                f"example {example.example_id!r}: its stored prompt was rendered with "
                f"template_date {example.template_date or 'none'}, not {template_date or 'none'}; "
                "pass the same --template-date, or render the split again from its unformatted "
                "rows"
            )


def format_examples(
    examples: Iterable[TestExample],
    tokenizer: ChatTemplateTokenizer,
    *,
    prompt_format: str = DEFAULT_PROMPT_FORMAT,
    system_prompt: str | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    template_date: str | None = None,
) -> list[TestExample]:
    """Give every example its prompt text and digest, in the chosen prompt format.

    Examples that already carry ``prompt_text`` are replayed byte for byte
    (after checking the digest and that they were rendered in the same
    prompt format); the others are rendered with the tokenizer's chat
    template and ``add_generation_prompt=True``. The template is only
    required when something needs rendering, so a fully formatted split can be
    replayed with any tokenizer.

    Args:
        examples: The examples, formatted or not.
        tokenizer: The chat-template tokenizer.
        prompt_format: A registered prompt format (``sommelier`` or ``native``).
        system_prompt: A system turn for formats that take one (``native``).
        chat_template_kwargs: Extra template variables (``enable_thinking``,
            ``date_string``), recorded in every row rendered with them.
        template_date: The day (``YYYY-MM-DD``) the template's clock says
            while rendering, for templates no variable pins; recorded in every
            row rendered on it.

    Raises:
        ConfigError: An unknown prompt format, a system prompt the format does
            not take, a stored prompt rendered another way, bad template
            variables, or a template that fails, recurses without end,
            renders more than :data:`MAX_PROMPT_CHARS`, drops the system
            prompt, depends on the day or the call, or (``native``) ignores
            ``tools`` (exit 2; each names the tokenizer and the example).
        DependencyError: If rendering is needed and the tokenizer has no chat
            template, or ``template_date`` is given and its clock cannot be fixed.
        InvariantViolationError: If a stored prompt does not match its digest.
    """
    prompt = _PROMPT_FORMATS.get(prompt_format)
    if system_prompt and not prompt.takes_system_prompt:
        raise ConfigError(
            f"--system-prompt applies to a prompt format that takes one (native), not "
            f"{prompt.name!r}, whose system turn is fixed"
        )
    template_kwargs = read_chat_template_kwargs(chat_template_kwargs)
    day = read_template_date(template_date)
    with _template_clock(day):
        return _format_all(examples, tokenizer, prompt, system_prompt, template_kwargs, day)


def _format_all(
    examples: Iterable[TestExample],
    tokenizer: ChatTemplateTokenizer,
    prompt: PromptFormat,
    system_prompt: str | None,
    template_kwargs: dict[str, Any],
    template_date: str | None,
) -> list[TestExample]:
    """:func:`format_examples` once its options are checked, under the clock it chose."""
    formatted: list[TestExample] = []
    checked_template = False
    for example in examples:
        if example.prompt_text is not None:
            actual = sha256_text(example.prompt_text)
            if actual != example.prompt_sha256:
                raise InvariantViolationError(
                    f"example {example.example_id!r}: stored prompt_sha256 "
                    f"{example.prompt_sha256} does not match its prompt_text ({actual}); "
                    "refusing to replay an altered prompt"
                )
            check_prompt_formats([example], prompt.name, template_kwargs, template_date)
            formatted.append(example)
            continue
        text = _render_checked(
            tokenizer,
            example,
            prompt,
            system_prompt,
            template_kwargs,
            checked_template,
            template_date,
        )
        checked_template = True
        formatted.append(
            replace(
                example,
                prompt_text=text,
                prompt_sha256=sha256_text(text),
                prompt_format=prompt.name,
                chat_template_kwargs=template_kwargs,
                template_date=template_date,
            )
        )
    return formatted


def _render_checked(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    template_kwargs: Mapping[str, Any],
    checked: bool,
    template_date: str | None,
) -> str:
    """Render one example; the first rendering also checks the template itself.

    The checks cost a few renderings of the first example only: one without
    tools, one without the system prompt, three on faked days (one day twice,
    then another).
    """
    if not checked:
        _require_chat_template(tokenizer)
    text = _render(tokenizer, example, prompt, system_prompt, template_kwargs)
    if checked:
        return text
    if prompt.with_tools:
        _require_tools_rendered(tokenizer, example, prompt, system_prompt, template_kwargs, text)
    if system_prompt:
        _require_system_prompt_rendered(tokenizer, example, prompt, template_kwargs, text)
    _require_same_every_day(
        tokenizer, example, prompt, system_prompt, template_kwargs, text, template_date
    )
    return text
