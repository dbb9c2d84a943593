"""Specimen chat templates on a copy of the demo tokenizer, as a user sets a model's template.

The specimens in ``tests/fixtures/chat_templates/`` behave like the templates
that tool-calling models and vLLM ship (each names the one it stands for);
they are written for the tests, not copied. A specimen tokenizer is the
committed demo tokenizer with its ``chat_template.jinja`` replaced, loaded
back with ``AutoTokenizer`` the way a user's tokenizer directory is.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[2]
SPECIMENS: Final = REPO / "tests" / "fixtures" / "chat_templates"
#: The specimens by name: gemma4, gpt_oss, hermes, llama31, llama33, mistral, mistral_v11,
#: qwen25, qwen3, qwen3_coder.
SPECIMEN_NAMES: Final = tuple(sorted(path.stem for path in SPECIMENS.glob("*.jinja")))
DEMO_TOKENIZER: Final = REPO / "examples" / "demo" / "model" / "base_model"


def specimen_template(name: str) -> str:
    """The text of the specimen template ``name``."""
    return (SPECIMENS / f"{name}.jinja").read_text(encoding="utf-8")


def tokenizer_with_template(directory: Path, template: str) -> Any:
    """A copy of the demo tokenizer in ``directory`` whose chat template is ``template``."""
    from transformers import AutoTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(DEMO_TOKENIZER / name, directory / name)
    (directory / "chat_template.jinja").write_text(template, encoding="utf-8")
    return AutoTokenizer.from_pretrained(directory)


def specimen_tokenizer(directory: Path, name: str) -> Any:
    """A copy of the demo tokenizer in ``directory`` with the specimen template ``name``."""
    return tokenizer_with_template(directory, specimen_template(name))
