"""Deterministic builders for a tiny Llama model, its tokenizer and a LoRA adapter.

They exist so tests (and the offline demo) exercise the real transformers and
peft code paths in well under a second per generation batch, without any
download. Everything is seeded: building twice from the same inputs gives the
same files, so byte-identity tests can rebuild them in a subprocess.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "ASSISTANT_TOKEN",
    "BOS_TOKEN",
    "CHAT_TEMPLATE",
    "END_TOKEN",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "build_lora_adapter",
    "build_tiny_llama",
    "build_tokenizer",
]

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
END_TOKEN = "<|end|>"
ASSISTANT_TOKEN = "<|assistant|>"
SPECIAL_TOKENS: tuple[str, ...] = (
    PAD_TOKEN,
    BOS_TOKEN,
    EOS_TOKEN,
    UNK_TOKEN,
    "<|system|>",
    "<|user|>",
    ASSISTANT_TOKEN,
    END_TOKEN,
)

#: Renders system/user/assistant turns; with ``add_generation_prompt`` it opens
#: an assistant turn, which is what generation continues from.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def build_tokenizer(directory: str | Path, corpus: Iterable[str], *, vocab_size: int = 384) -> Any:
    """Train a byte-level BPE tokenizer on ``corpus`` and save it to ``directory``.

    Byte-level BPE can encode any text (JSON punctuation, accents, CJK) and
    decodes it back exactly, so raw model outputs survive a round trip.

    Returns:
        The saved ``PreTrainedTokenizerFast`` (reloadable with ``AutoTokenizer``).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Sorting makes the trainer's input independent of the caller's iteration order.
    backend.train_from_iterator(sorted(corpus), trainer=trainer)
    fast_class: Any = PreTrainedTokenizerFast  # untyped constructor
    tokenizer = fast_class(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        additional_special_tokens=[tok for tok in SPECIAL_TOKENS[4:]],
        model_max_length=2048,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(target)
    return tokenizer


def build_tiny_llama(
    directory: str | Path, tokenizer: Any, *, seed: int = 0, max_position_embeddings: int = 2048
) -> Path:
    """Save a randomly initialised ~0.1M-parameter Llama model with safetensors.

    ``max_position_embeddings`` is the context the model declares; a small one
    lets a test put a prompt past it.

    Its generation config carries sampling defaults (``do_sample=True``,
    ``temperature=0.6``, ``top_p=0.9``) the way published instruct models do,
    so greedy generation is tested against a config it has to override.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    config_class: Any = GenerationConfig  # untyped constructor
    model.generation_config = config_class(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(END_TOKEN)],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=0.6,
        top_p=0.9,
    )
    target = Path(directory)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    return target


def build_lora_adapter(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    seed: int = 0,
    target_modules: Sequence[str] = ("q_proj", "v_proj"),
) -> Path:
    """Save a rank-4 LoRA adapter whose weights are random, so it changes outputs.

    peft initialises ``B`` to zero by default (the adapter starts as a no-op);
    ``init_lora_weights=False`` keeps both matrices randomly initialised, which
    stands in for a trained adapter.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=list(target_modules),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        # peft 0.21 still calls transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        model = get_peft_model(base, config)
    target = Path(out_dir)
    model.save_pretrained(str(target), safe_serialization=True)
    return target
