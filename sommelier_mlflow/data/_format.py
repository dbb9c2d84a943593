"""Chat formatting: the messages a model sees and the prompt text that is digested.

The prompt is rendered once, through the model's own chat template, and
from then on only replayed: generation feeds the stored ``prompt_text`` to
the model and scoring checks ``prompt_sha256``, so base and adapter are
provably asked the very same bytes. There is deliberately no fallback
template: a prompt rendered in a format the model was not trained on
would make a comparison quietly meaningless.

The tokenizer is duck-typed (anything with ``apply_chat_template`` and a
``chat_template`` attribute), so this module does not import transformers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Final, Protocol

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data._schemas import TestExample
from sommelier_mlflow.errors import DependencyError, InputError, InvariantViolationError
from sommelier_mlflow.toolcalls import is_tool_call

__all__ = [
    "SYSTEM_INSTRUCTION",
    "ChatTemplateTokenizer",
    "build_messages",
    "format_examples",
    "render_target",
]

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
    ) -> Any:
        """Render a conversation with the tokenizer's chat template."""
        ...


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


def _render(tokenizer: ChatTemplateTokenizer, example: TestExample) -> str:
    try:
        text = tokenizer.apply_chat_template(
            build_messages(example), tokenize=False, add_generation_prompt=True
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


def format_examples(
    examples: Iterable[TestExample], tokenizer: ChatTemplateTokenizer
) -> list[TestExample]:
    """Give every example its prompt text and digest.

    Examples that already carry ``prompt_text`` are replayed byte for byte
    (after checking the digest); the others are rendered with the tokenizer's
    chat template and ``add_generation_prompt=True``. The template is only
    required when something needs rendering, so a fully formatted split can be
    replayed with any tokenizer.

    Raises:
        DependencyError: If rendering is needed and the tokenizer has no chat
            template, or the template fails.
        InvariantViolationError: If a stored prompt does not match its digest.
    """
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
            formatted.append(example)
            continue
        if not checked_template:
            _require_chat_template(tokenizer)
            checked_template = True
        text = _render(tokenizer, example)
        formatted.append(replace(example, prompt_text=text, prompt_sha256=sha256_text(text)))
    return formatted
