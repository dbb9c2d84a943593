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

The tokenizer is duck-typed (anything with ``apply_chat_template`` and a
``chat_template`` attribute), so this module does not import transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow._plugins import PROMPT_FORMATS_GROUP, Registry
from sommelier_mlflow.data._schemas import DEFAULT_PROMPT_FORMAT, TestExample
from sommelier_mlflow.errors import (
    ConfigError,
    DependencyError,
    InputError,
    InvariantViolationError,
)
from sommelier_mlflow.toolcalls import is_tool_call

__all__ = [
    "NATIVE_PROMPT_FORMAT",
    "SYSTEM_INSTRUCTION",
    "ChatTemplateTokenizer",
    "PromptFormat",
    "register_prompt_format",
    "prompt_format",
    "prompt_format_names",
    "build_messages",
    "tool_schemas",
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
    messages: Callable[[TestExample, str | None], list[dict[str, str]]]
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
    same bytes whatever key order the data file used.
    """
    system = f"{SYSTEM_INSTRUCTION}\n\n{_TOOLS_HEADING}\n{canonical_json(example.tools)}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": example.query},
    ]


def _sommelier_messages(example: TestExample, system_prompt: str | None) -> list[dict[str, str]]:
    del system_prompt  # refused before rendering: the instruction is fixed
    return build_messages(example)


def _native_messages(example: TestExample, system_prompt: str | None) -> list[dict[str, str]]:
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": example.query}]


def tool_schemas(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The row's tools as the JSON-schema function list chat templates take as ``tools``.

    A tool whose ``parameters`` is already a JSON Schema object keeps it; the
    flat ``{name: spec}`` form (xlam's) becomes ``{"type": "object",
    "properties": {...}}``. Nothing is invented: no ``required`` list is
    added that the row did not give.
    """
    schemas = []
    for tool in tools:
        parameters = tool.get("parameters", {})
        if parameters.get("type") != "object":
            parameters = {"type": "object", "properties": dict(parameters)}
        function: dict[str, Any] = {"name": tool["name"]}
        if "description" in tool:
            function["description"] = tool["description"]
        function["parameters"] = parameters
        schemas.append({"type": "function", "function": function})
    return schemas


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
    *,
    tools: bool = True,
) -> str:
    extra = {"tools": tool_schemas(example.tools)} if prompt.with_tools and tools else {}
    try:
        text = tokenizer.apply_chat_template(
            prompt.messages(example, system_prompt),
            tokenize=False,
            add_generation_prompt=True,
            **extra,
        )
    except Exception as exc:  # any template failure is the tokenizer's, not ours
        raise DependencyError(
            f"the tokenizer's chat template failed on example {example.example_id!r}: {exc}; "
            "the template may not accept a system message"
        ) from exc
    if not isinstance(text, str) or not text:
        raise DependencyError(
            "tokenizer.apply_chat_template(..., tokenize=False) returned "
            f"{type(text).__name__}, not prompt text; the tokenizer does not render templates "
            "as text"
        )
    return text


def _require_tools_rendered(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    text: str,
) -> None:
    if text == _render(tokenizer, example, prompt, system_prompt, tools=False):
        raise ConfigError(
            f"the chat template of tokenizer {_tokenizer_name(tokenizer)!r} ignores `tools` "
            f"(example {example.example_id!r} renders the same text with and without them), "
            f"so --prompt-format {prompt.name} would hide the tools from the model; use a "
            "tokenizer whose template renders tools, or --prompt-format "
            f"{DEFAULT_PROMPT_FORMAT}"
        )


def check_prompt_formats(examples: Iterable[TestExample], wanted: str) -> None:
    """Refuse formatted rows whose prompts were rendered in another prompt format.

    Raises:
        ConfigError: Naming the field ``prompt_format``, the row and both formats.
    """
    for example in examples:
        if example.prompt_text is not None and example.prompt_format != wanted:
            raise ConfigError(
                f"example {example.example_id!r}: its stored prompt was rendered with "
                f"prompt_format {example.prompt_format!r}, not {wanted!r}; render the split "
                f"again from its unformatted rows with --prompt-format {wanted}"
            )


def format_examples(
    examples: Iterable[TestExample],
    tokenizer: ChatTemplateTokenizer,
    *,
    prompt_format: str = DEFAULT_PROMPT_FORMAT,
    system_prompt: str | None = None,
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

    Raises:
        ConfigError: An unknown prompt format, a system prompt the format does
            not take, a stored prompt of another format, or (``native``) a
            template that ignores ``tools`` (exit 2).
        DependencyError: If rendering is needed and the tokenizer has no chat
            template, or the template fails.
        InvariantViolationError: If a stored prompt does not match its digest.
    """
    prompt = _PROMPT_FORMATS.get(prompt_format)
    if system_prompt and not prompt.takes_system_prompt:
        raise ConfigError(
            f"--system-prompt applies to a prompt format that takes one (native), not "
            f"{prompt.name!r}, whose system turn is fixed"
        )
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
            check_prompt_formats([example], prompt.name)
            formatted.append(example)
            continue
        text = _render_checked(tokenizer, example, prompt, system_prompt, checked_template)
        checked_template = True
        formatted.append(
            replace(
                example,
                prompt_text=text,
                prompt_sha256=sha256_text(text),
                prompt_format=prompt.name,
            )
        )
    return formatted


def _render_checked(
    tokenizer: ChatTemplateTokenizer,
    example: TestExample,
    prompt: PromptFormat,
    system_prompt: str | None,
    checked: bool,
) -> str:
    """Render one example; the first rendering also checks the template itself."""
    if not checked:
        _require_chat_template(tokenizer)
    text = _render(tokenizer, example, prompt, system_prompt)
    if not checked and prompt.with_tools:
        _require_tools_rendered(tokenizer, example, prompt, system_prompt, text)
    return text
