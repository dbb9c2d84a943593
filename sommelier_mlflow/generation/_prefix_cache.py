"""Reusing the attention keys and values of earlier prompts (the ``hf`` backend's prefix cache).

Two kinds of prompts share long beginnings. Every prompt of an evaluation
starts with the same system prompt and tool schemas, and every step of a
multi-turn conversation (:mod:`~sommelier_mlflow.generation._multi_turn`) is
the previous step's prompt with the model's answer and the tool results
appended. Without a cache, each step computes the keys and values of the
whole conversation again: for BFCL's multi-turn questions that is a prefill
of 4,000 to 20,000 tokens per step, which on a CPU costs far more than the
step's few new tokens, and batching cannot share it (prefill is arithmetic,
and padding a batch to its longest prompt adds to it).

With a cache, each prompt's keys and values are computed once, one prompt at
a time and without padding, starting from the longest token prefix any kept
prompt shares with it; then the batch decodes together from the kept states,
left-padded to one length under an attention mask. This is what vLLM calls
automatic prefix caching, done by hand for transformers' dense caches.

What it changes: the keys and values of a prompt's prefix are computed in
another grouping of the same arithmetic, so floating-point rounding differs
from a prefill of the whole prompt, and a greedy choice between two almost
equal logits can flip. The option is therefore part of the backend's
fingerprint and of the job identity (arms are compared only when both use
it), and it is off unless ``prefix_cache_tokens`` is set. Within a run the
numbers are still a pure function of the prompts in order: the pool changes
only with the prompts it is handed, so a resumed run that hands it the
batches it skips (``SupportsPrefill``) computes what an uninterrupted run
would, and ends byte-identical to it.

Only models whose cache is transformers' plain full-attention layer for every
layer are supported (Llama, Qwen2, Mistral without a sliding window, GPT-2,
...); a model with sliding-window or other cache layers is refused when it is
loaded, since cutting those caches at an arbitrary prefix is not valid.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sommelier_mlflow.errors import ConfigError, DependencyError

__all__ = ["PrefixCache", "check_prefix_cacheable", "pooled_states", "prefilled_batch"]


@dataclass(eq=False)  # by identity: the pool removes entries, and arrays do not compare
class _Entry:
    """One kept prompt: its token ids and every layer's keys and values over them."""

    ids: np.ndarray
    layers: list[tuple[Any, Any]]
    used: int = 0


@dataclass
class PrefixCache:
    """Keys and values of earlier prompts, at most ``capacity_tokens`` positions in all.

    A prompt that extends a kept one replaces it (the kept one is then its
    prefix, so nothing is lost); beyond the capacity, the least recently used
    prompts go first. Shared beginnings are stored once per kept prompt: the
    capacity bounds memory, at ``layers x 2 x kv_heads x head_dim x bytes``
    per position.

    Attributes:
        capacity_tokens: The most positions kept, over all prompts.
        keyword: The model's name for a cache argument
            (:func:`check_prefix_cacheable`).
        hits: Prompt positions taken from the cache so far (for reports).
        computed: Prompt positions computed so far.
    """

    capacity_tokens: int
    keyword: str = "past_key_values"
    hits: int = 0
    computed: int = 0
    _entries: list[_Entry] = field(default_factory=list)
    _clock: int = 0

    def __post_init__(self) -> None:
        if type(self.capacity_tokens) is not int or self.capacity_tokens <= 0:
            raise ConfigError(
                f"prefix_cache_tokens must be a positive integer, got {self.capacity_tokens!r}"
            )

    @property
    def kept_tokens(self) -> int:
        """Positions kept now, over all prompts."""
        return sum(len(entry.ids) for entry in self._entries)

    def longest(self, ids: np.ndarray) -> tuple[_Entry | None, int]:
        """The kept prompt sharing the longest prefix with ``ids``, and that prefix's length."""
        best: _Entry | None = None
        best_length = 0
        for entry in self._entries:
            length = _common_prefix(entry.ids, ids)
            if length > best_length:
                best, best_length = entry, length
        if best is not None:
            self._clock += 1
            best.used = self._clock
        return best, best_length

    def keep(self, ids: np.ndarray, layers: list[tuple[Any, Any]]) -> None:
        """Keep ``layers``, the states over ``ids``; drop what they cover, then the stalest."""
        if len(ids) > self.capacity_tokens:
            return
        self._entries = [e for e in self._entries if _common_prefix(e.ids, ids) < len(e.ids)]
        self._clock += 1
        self._entries.append(_Entry(ids, layers, self._clock))
        total = self.kept_tokens
        while total > self.capacity_tokens:
            stalest = min(self._entries, key=lambda entry: entry.used)
            self._entries.remove(stalest)
            total -= len(stalest.ids)

    def clear(self) -> None:
        """Drop every kept prompt (the backend closes, or its model changes)."""
        self._entries.clear()


def _common_prefix(kept: np.ndarray, ids: np.ndarray) -> int:
    """Length of the longest common prefix of two token id arrays."""
    length = min(len(kept), len(ids))
    if length == 0:
        return 0
    differ = np.flatnonzero(kept[:length] != ids[:length])
    return int(differ[0]) if len(differ) else length


def check_prefix_cacheable(model: Any) -> str:
    """The keyword that hands ``model`` a cache; refuse a model whose cache cannot be cut.

    transformers 5.25 renamed ``past_key_values`` to ``cache`` (the old name
    warns until 5.40), so the name is read off the model's own signature.

    Raises:
        ConfigError: A sliding-window, linear-attention or other non-plain
            cache layer; the message says to drop ``prefix_cache_tokens``.
        DependencyError: transformers older than its layered caches (4.56).
    """
    import transformers
    from transformers import DynamicCache

    plain = getattr(transformers.cache_utils, "DynamicLayer", None)
    if plain is None:
        raise DependencyError(
            f"prefix_cache_tokens needs transformers' layered caches (4.56 or newer), found "
            f"{transformers.__version__}; upgrade transformers or run without it"
        )
    try:
        cache = DynamicCache(config=model.config)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"cannot tell how {type(model).__name__} caches attention ({exc}); "
            "run without prefix_cache_tokens"
        ) from exc
    others = sorted({type(layer).__name__ for layer in cache.layers if type(layer) is not plain})
    if others:
        raise ConfigError(
            f"{type(model).__name__} keeps {', '.join(others)} cache layers, which a prefix "
            "cache cannot cut at an arbitrary position; run without prefix_cache_tokens"
        )
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


@functools.cache
def _preallocated_layer() -> type:
    """Transformers' plain cache layer, writing into room made in advance.

    The plain layer concatenates at every step, copying the whole cache: at
    9,000 positions and a batch of 8 that copy was 80% of a decoding step on
    a CPU. This one is handed the batch's states with room for the new
    tokens and writes each step in place (growing by doubling should a call
    ever outrun the room). Built on first use, so that importing this module
    does not import transformers.
    """
    import torch
    from transformers.cache_utils import DynamicLayer

    plain: Any = DynamicLayer  # untyped

    class PreallocatedLayer(plain):  # type: ignore[misc]  # a base of type Any
        def __init__(self, keys: Any, values: Any, length: int) -> None:
            super().__init__()
            self._keys_room, self._values_room, self._length = keys, values, length
            self.device = keys.device
            self.is_initialized = True
            self._expose()

        def _expose(self) -> None:
            self.keys = self._keys_room[:, :, : self._length]
            self.values = self._values_room[:, :, : self._length]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            end = self._length + key_states.shape[-2]
            if end > self._keys_room.shape[-2]:
                self._keys_room = torch.cat(
                    [self._keys_room, torch.zeros_like(self._keys_room)], -2
                )
                self._values_room = torch.cat(
                    [self._values_room, torch.zeros_like(self._values_room)], -2
                )
                return self.update(key_states, value_states)
            self._keys_room[:, :, self._length : end] = key_states
            self._values_room[:, :, self._length : end] = value_states
            self._length = end
            self._expose()
            return self.keys, self.values

    return PreallocatedLayer


def _states(cache: Any) -> list[tuple[Any, Any]]:
    return [(layer.keys, layer.values) for layer in cache.layers]


def _prefill(
    model: Any, ids: np.ndarray, start: int, entry: _Entry | None, keyword: str
) -> list[tuple[Any, Any]]:
    """The states over ``ids``: positions ``start:`` computed on ``entry``'s first ``start``."""
    import torch
    from transformers import DynamicCache

    kept = []
    if entry is not None and start > 0:
        kept = [(keys[:, :, :start], values[:, :, :start]) for keys, values in entry.layers]
    cache = DynamicCache(ddp_cache_data=kept) if kept else DynamicCache()
    tail = torch.as_tensor(ids[start:], dtype=torch.long, device=model.device).unsqueeze(0)
    model(input_ids=tail, use_cache=True, logits_to_keep=1, **{keyword: cache})
    return _states(cache)


def pooled_states(
    model: Any, pool: PrefixCache, token_ids: Sequence[Sequence[int]]
) -> list[list[tuple[Any, Any]]]:
    """Each prompt's states over all its tokens but the last, taken from and kept in ``pool``.

    A prompt's missing positions are computed alone (no padding, so the
    attention runs on its causal fast path), on top of the longest prefix
    kept, and the prompt is kept for the next one that extends it. The pool
    changes only here, and only as a function of the prompts in order: a
    resumed run that hands the batches it skips to :func:`pooled_states`
    (the backend's ``prefill``) holds the very pool an uninterrupted run
    would, so its later batches compute the same numbers.
    """
    rows: list[list[tuple[Any, Any]]] = []
    for ids_list in token_ids:
        ids = np.asarray(ids_list, dtype=np.int64)
        body = ids[:-1]
        entry, shared = pool.longest(body)
        if entry is not None and shared == len(body):
            layers = [(k[:, :, :shared], v[:, :, :shared]) for k, v in entry.layers]
        else:
            layers = _prefill(model, body, shared, entry, pool.keyword)
            pool.keep(body, layers)
        pool.hits += shared
        pool.computed += len(body) - shared
        rows.append(layers)
    return rows


def prefilled_batch(
    model: Any,
    pool: PrefixCache,
    token_ids: Sequence[Sequence[int]],
    pad_token_id: int,
    max_new_tokens: int,
) -> tuple[Any, Any, Any]:
    """``input_ids``, ``attention_mask`` and a filled cache for ``generate`` to decode from.

    The prompts' states (:func:`pooled_states`) are laid side by side,
    left-padded to the longest under the attention mask, and ``generate``
    feeds each prompt's last token from there: the positions it computes are
    each prompt's own (transformers numbers them by the mask). The batch's
    cache has room for ``max_new_tokens`` more positions, written in place.
    Every prompt must have at least two tokens.
    """
    import torch
    from transformers import DynamicCache

    rows = pooled_states(model, pool, token_ids)
    width = max(len(ids) for ids in token_ids) - 1
    batch = len(token_ids)
    room = width + max_new_tokens
    layer_class = _preallocated_layer()
    merged = []
    for layer in range(len(rows[0])):
        keys, values = rows[0][layer]
        # Room past ``width`` is written before it is read; padding is read
        # (under a zero weight) and must hold finite numbers, so it is zeroed.
        all_keys = keys.new_empty((batch, keys.shape[1], room, keys.shape[3]))
        all_values = values.new_empty((batch, values.shape[1], room, values.shape[3]))
        for row, states in enumerate(rows):
            row_keys, row_values = states[layer]
            start = width - row_keys.shape[2]
            all_keys[row, :, :start] = 0
            all_values[row, :, :start] = 0
            all_keys[row, :, start:width] = row_keys[0]
            all_values[row, :, start:width] = row_values[0]
        merged.append(layer_class(all_keys, all_values, width))
    cache = DynamicCache()
    cache.layers = merged
    input_ids = torch.full((batch, width + 1), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, width + 1), dtype=torch.long)
    for row, ids_list in enumerate(token_ids):
        input_ids[row, width + 1 - len(ids_list) :] = torch.as_tensor(list(ids_list))
        attention_mask[row, width + 1 - len(ids_list) :] = 1
    return input_ids.to(model.device), attention_mask.to(model.device), cache
