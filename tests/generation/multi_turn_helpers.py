"""Small BFCL multi-turn questions and a scripted model for the execution loop's tests.

The questions run against BFCL's real ``GorillaFileSystem`` (through the
real sandbox); only the model is scripted. A :class:`ScriptedModel` answers
each prompt from a per-question script indexed by how many assistant turns
the prompt already shows, so its outputs are a pure function of the prompt,
as a greedy model's are, and it counts the batches it was asked for.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sommelier_mlflow.data import Decoding, TestExample, format_examples
from sommelier_mlflow.generation import MultiTurnLoop, loop_decoding, run_generation
from tests.support.chat_templates import DEMO_TOKENIZER

DECODING: Final = Decoding(max_new_tokens=16, batch_size=8)
LS: Final = '[{"name": "ls", "arguments": {}}]'
ANSWER: Final = "All done."


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                key: {"type": "string", "description": d} for key, d in properties.items()
            },
            "required": sorted(properties),
        },
    }


TOOLS: Final = [
    _tool("ls", "List the current directory."),
    _tool("cd", "Change directory.", folder="The folder to enter."),
    _tool("cat", "Show a file.", file_name="The file to show."),
]
TOUCH: Final = _tool("touch", "Create a file.", file_name="The file to create.")

#: A tiny file system: ``/workspace/docs/notes.txt``.
ENVIRONMENT: Final = {
    "initial_config": {
        "GorillaFileSystem": {
            "root": {
                "workspace": {
                    "type": "directory",
                    "contents": {
                        "docs": {
                            "type": "directory",
                            "contents": {"notes.txt": {"type": "file", "content": "hello"}},
                        }
                    },
                }
            }
        }
    },
    "involved_classes": ["GorillaFileSystem"],
    "long_context": False,
}


def question(
    example_id: str,
    turns: int = 2,
    *,
    added_tools: Mapping[str, list[dict[str, Any]]] | None = None,
    language: str = "en",
) -> TestExample:
    """An unformatted multi-turn question of ``turns`` user turns naming ``example_id``.

    A turn listed in ``added_tools`` has no user message (BFCL's ``miss_func``).
    """
    added = dict(added_tools or {})
    user_turns: list[list[dict[str, str]]] = [
        [] if str(i) in added else [{"role": "user", "content": f"[{example_id}] request {i}"}]
        for i in range(turns)
    ]
    return TestExample(
        example_id=example_id,
        language=language,
        query="",
        tools=list(TOOLS),
        gold_calls=[],
        messages=user_turns[0],
        slice_values={"category": "multi_turn_base"},
        multi_turn={
            "user_turns": user_turns,
            "added_tools": added,
            "gold_turns": [["ls()"] for _ in range(turns)],
            "environment": ENVIRONMENT,
        },
    )


def demo_tokenizer() -> Any:
    """The committed demo tokenizer, whose chat template renders tool-call histories."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(DEMO_TOKENIZER, local_files_only=True)


def formatted(examples: Sequence[TestExample], tokenizer: Any) -> list[TestExample]:
    return format_examples(examples, tokenizer)


_MARK: Final = re.compile(r"\[([A-Za-z0-9_-]+)\] request")


class ScriptedModel:
    """A deterministic stand-in for the model: per-question outputs by step number.

    ``script[example_id][n]`` is the output when the prompt shows ``n``
    assistant messages already (``default`` past the script's end). Every
    ``generate`` call is recorded with its prompts.
    """

    def __init__(
        self, script: Mapping[str, Sequence[str]], default: str = ANSWER, pause: float = 0.0
    ) -> None:
        self.script = {key: list(value) for key, value in script.items()}
        self.default = default
        self.pause = pause
        self.batches: list[list[str]] = []

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        del max_new_tokens
        self.batches.append(list(prompts))
        time.sleep(self.pause)
        return [self.answer(prompt) for prompt in prompts]

    def answer(self, prompt: str) -> str:
        found = _MARK.search(prompt)
        outputs = self.script.get(found.group(1), []) if found else []
        done = prompt.count("Assistant calls:") + prompt.count("Assistant:")
        return outputs[done] if done < len(outputs) else self.default


def play(
    examples: Sequence[TestExample],
    model: Any,
    out: Path,
    *,
    tokenizer: Any,
    output_format: str = "json",
) -> dict[str, Path]:
    """Format ``examples`` and run them through ``run_generation`` with the loop."""
    ready = formatted(examples, tokenizer)
    return run_generation(
        ready,
        model,
        decoding=loop_decoding(DECODING, ready, output_format),
        model_kind="base",
        out_dir=out,
        progress=False,
        multi_turn=MultiTurnLoop(lambda step: format_examples(step, tokenizer), output_format),
    )
