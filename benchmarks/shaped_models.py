"""Benchmark models of real architectures: real shapes, seeded random weights, no download.

Generation cost depends on a model's shape (layers, widths, heads, vocabulary),
not on the values of its weights, so a model built here from a published
architecture's configuration does the same arithmetic per token as the real
one. Each build writes, offline and from a seed:

- ``DIR/``: the model (safetensors, in ``--dtype``) and a byte-level BPE
  tokenizer whose vocabulary has exactly the architecture's ``vocab_size``
  (trained on a small tool-calling corpus, then padded with tokens no text
  encodes to), with a chat template;
- ``DIR/adapter/``: a random LoRA adapter (rank 16, alpha 32, on the four
  attention projections), loadable by peft and by the product's ``--adapter``.

The model never stops by itself in a meaningful way (random weights), and may
emit the end-of-sequence token at any step; run the ``hf`` backend with
``--backend-options min_new_tokens=N`` and ``--max-new-tokens N`` to make every
completion exactly ``N`` tokens long.

    python benchmarks/shaped_models.py --list
    python benchmarks/shaped_models.py --shape qwen2.5-0.5b --out DIR [--layers 2]
        [--dtype float32|bfloat16] [--device cpu|cuda] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from sommelier_mlflow._json import atomic_write_bytes  # noqa: E402
from tests.support.tiny_models import END_TOKEN, build_tokenizer  # noqa: E402

#: LoRA settings of the benchmark adapter: a common fine-tuning choice.
LORA_RANK = 16
LORA_ALPHA = 32
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
#: Merges learnt from the corpus before the vocabulary is padded to the shape's size.
TRAINED_VOCAB = 8192
#: The demo's raw rows: the tool-calling text the merges are learnt from.
DEMO_RAW = REPO / "examples" / "demo" / "data" / "raw.jsonl"

_LLAMA3_ROPE_SCALING = {
    "rope_type": "llama3",
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


@dataclass(frozen=True)
class Shape:
    """A published architecture's configuration (its config.json facts), without weights."""

    name: str
    model_type: str  # "qwen2" or "llama"
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    rope_theta: float
    tie_word_embeddings: bool
    max_position_embeddings: int
    rms_norm_eps: float
    rope_scaling: dict[str, Any] | None = field(default=None)
    note: str = ""

    def config_kwargs(self, layers: int | None) -> dict[str, Any]:
        """The transformers config fields of this shape (``layers`` overrides the depth)."""
        kwargs: dict[str, Any] = {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": layers or self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "vocab_size": self.vocab_size,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "initializer_range": 0.02,
        }
        if self.rope_scaling is not None:
            kwargs["rope_scaling"] = dict(self.rope_scaling)
        return kwargs


SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape(
            "qwen2.5-0.5b",
            "qwen2",
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            vocab_size=151936,
            rope_theta=1_000_000.0,
            tie_word_embeddings=True,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            note="CPU-sized; 0.49B parameters, tied embeddings, QKV bias",
        ),
        Shape(
            "llama-3.2-1b",
            "llama",
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
            rope_theta=500_000.0,
            tie_word_embeddings=True,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_scaling={**_LLAMA3_ROPE_SCALING, "factor": 32.0},
            note="CPU-sized; 1.24B parameters, tied embeddings",
        ),
        Shape(
            "qwen2.5-7b",
            "qwen2",
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            vocab_size=152064,
            rope_theta=1_000_000.0,
            tie_word_embeddings=False,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            note="GPU; 7.6B parameters (15 GB in bf16)",
        ),
        Shape(
            "llama-3.1-8b",
            "llama",
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
            rope_theta=500_000.0,
            tie_word_embeddings=False,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_scaling={**_LLAMA3_ROPE_SCALING, "factor": 8.0},
            note="GPU; 8.0B parameters (16 GB in bf16)",
        ),
    )
}


def tool_corpus() -> list[str]:
    """The text the tokenizer learns its merges from: tool-calling requests, schemas and calls.

    The tests' prompts plus the offline demo's raw rows (queries, tool schemas
    and answers as JSON): with :data:`TRAINED_VOCAB` merges the demo's
    formatted prompts come out at a few characters per token, as a real
    tokenizer's do on English and JSON, rather than the 1.8 of a tokenizer
    that learnt only the tests' handful of prompts.
    """
    from tests.generation.generation_helpers import corpus

    texts = list(corpus())
    for line in DEMO_RAW.read_bytes().splitlines():
        row = orjson.loads(line)
        texts.extend(str(row[key]) for key in ("query", "tools", "answers") if row.get(key))
    return texts


def build_shaped_tokenizer(directory: Path, vocab_size: int) -> Any:
    """A byte-level BPE tokenizer with exactly ``vocab_size`` ids, saved in ``directory``.

    The first :data:`TRAINED_VOCAB` ids are learnt merges (the tests' special
    tokens and chat template included); the rest are plain vocabulary entries
    ``<|shape_N|>`` with no merge leading to them, so no text encodes to them,
    but the model can emit them and they decode to their own text. The
    embedding and LM head therefore have the real architecture's size.
    """
    from transformers import AutoTokenizer

    build_tokenizer(directory, tool_corpus(), vocab_size=TRAINED_VOCAB)
    path = directory / "tokenizer.json"
    spec = orjson.loads(path.read_bytes())
    vocab: dict[str, int] = spec["model"]["vocab"]
    taken = len(vocab)
    if taken > vocab_size:
        raise SystemExit(f"the trained vocabulary ({taken}) exceeds the shape's {vocab_size}")
    for token_id in range(taken, vocab_size):
        vocab[f"<|shape_{token_id}|>"] = token_id
    atomic_write_bytes(path, orjson.dumps(spec))
    tokenizer = AutoTokenizer.from_pretrained(directory)
    if len(tokenizer) != vocab_size:
        raise SystemExit(f"padded tokenizer has {len(tokenizer)} ids, expected {vocab_size}")
    return tokenizer


def build_shaped_model(
    shape: Shape,
    out: Path,
    *,
    layers: int | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> Path:
    """Write ``out/`` (model + tokenizer) and ``out/adapter`` (LoRA rank 16) for ``shape``.

    The weights are drawn with ``torch.manual_seed(seed)`` directly in
    ``dtype`` on ``device`` (a 7B model initialises in seconds on a GPU, where
    float32 on a CPU would take minutes and 30 GB); the adapter uses
    ``seed + 1`` and peft's random initialisation of both LoRA matrices, so it
    changes outputs as a trained adapter does.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_shaped_tokenizer(out, shape.vocab_size)
    end_id = tokenizer.convert_tokens_to_ids(END_TOKEN)
    config = AutoConfig.for_model(
        shape.model_type,
        **shape.config_kwargs(layers),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, end_id],
        pad_token_id=tokenizer.pad_token_id,
    )
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(default)
    config_class: Any = GenerationConfig  # untyped constructor
    model.generation_config = config_class(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, end_id],
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(out, safe_serialization=True)
    lora = LoraConfig(
        r=LORA_RANK,
        lora_alpha=LORA_ALPHA,
        target_modules=list(LORA_TARGETS),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )
    torch.manual_seed(seed + 1)
    with warnings.catch_warnings():
        # peft 0.21 still calls transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        peft_model = get_peft_model(model, lora)
    peft_model.save_pretrained(str(out / "adapter"), safe_serialization=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name the shapes and exit")
    parser.add_argument("--shape", choices=sorted(SHAPES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--layers", type=int, default=None, help="override the depth (tests)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.list:
        for shape in SHAPES.values():
            print(
                f"{shape.name:14} {shape.model_type:6} layers={shape.num_hidden_layers} "
                f"hidden={shape.hidden_size} vocab={shape.vocab_size}  {shape.note}"
            )
        return
    if args.shape is None or args.out is None:
        parser.error("--shape and --out are required (or --list)")
    if args.layers is not None and args.layers <= 0:
        parser.error("--layers must be positive")
    started = time.perf_counter()
    build_shaped_model(
        SHAPES[args.shape],
        args.out,
        layers=args.layers,
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
    )
    print(
        f"built {args.shape} in {args.out} (adapter in {args.out / 'adapter'}) "
        f"in {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
