"""Verify the offline demo's committed model, tokenizer and adapter, or rebuild them.

The demo evaluates a tiny base model and a LoRA adapter that live in the
repository, under ``examples/demo/model/`` (about 6 MB of safetensors and
tokenizer JSON), with ``manifest.json`` recording the SHA-256 of every file.
They are committed rather than trained on the user's machine because
training is not reproducible across CPUs: 1,300 AdamW steps amplify the
last-bit differences between CPU kernels (AVX2 and AVX-512 matrix code round
differently), so a model trained on one machine differs from one trained on
another and the demo's numbers would depend on the CPU. Greedy *generation*
from fixed weights does not (``kernel_margins.py`` measures why), so
committed weights give every machine the same numbers, and a cold demo never
spends minutes training.

The demo (``run.py``) calls :func:`demo_assets`, which verifies every
committed file against the manifest and never trains: a missing or altered
file is named, with its expected digest, as a :class:`DependencyError`
(exit 3). It also prepares the demo's splits from the bundled raw data (a
third of a second) into ``<cache>/splits-<key>/``, where the key digests only
what shapes the splits: the raw data, the seed and sizes, and the package
code that prepares them.

``--rebuild`` reproduces the committed files from scratch (about 3.5 minutes on
two CPU cores; byte-identical on the same kind of CPU, see above):

1. ``prepare`` splits ``data/raw.jsonl`` (fixed seed and sizes), so the demo's
   test split is exactly the one the models never trained on.
2. A byte-level BPE tokenizer is trained on the training split. Pre-tokens
   are runs of letters, runs of digits and runs of everything else, so a
   value (``Zurich``, ``2026``, ``31``) is spelt with the same tokens in the
   request and in the call and a tiny model can learn to copy it. The fixed
   system prefix and each tool schema seen in training become single tokens,
   which keeps a prompt around 45 tokens and training fast.
3. A Llama-style model of about 1.25M parameters is trained from scratch on the
   *English* training rows only, so it is weaker in French.
4. A LoRA adapter (rank 16 on every attention and MLP projection) is trained
   on the English *and* French training rows.

Both are trained to emit ``render_target(gold_call)`` and then the EOS token
after the prompt that ``format_examples`` renders, which is exactly what
evaluation asks of them (greedy, left padding, stop at EOS).

Usage::

    python examples/demo/build_model.py                  # verify, prepare the splits
    python examples/demo/build_model.py --check 50       # ... and a quick quality check
    python examples/demo/build_model.py --rebuild        # retrain into examples/demo/model
    python examples/demo/build_model.py --rebuild --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shutil
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

_REPO: Final = Path(__file__).resolve().parents[2]
if __name__ == "__main__" and str(_REPO) not in sys.path:
    # Run as a script from a checkout: make the package importable without installing it.
    sys.path.insert(0, str(_REPO))

import numpy as np  # noqa: E402

from sommelier_mlflow._json import (  # noqa: E402
    JSONDecodeError,
    atomic_write_json,
    canonical_json,
    loads,
)
from sommelier_mlflow.data import (  # noqa: E402
    SPLIT_NAMES,
    TestExample,
    build_messages,
    format_examples,
    prepare,
    render_target,
)
from sommelier_mlflow.errors import (  # noqa: E402
    ConfigError,
    DataError,
    DependencyError,
    InputError,
    InvariantViolationError,
    SommelierError,
)

__all__ = [
    "DEFAULT_ADAPTER_STEPS",
    "DEFAULT_BASE_STEPS",
    "DEFAULT_CACHE",
    "DEFAULT_RAW_PATH",
    "DEFAULT_SPLIT_SIZES",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MODEL_DIR",
    "DemoArtifacts",
    "Rebuilt",
    "demo_assets",
    "main",
    "prepare_splits",
    "quick_check",
    "rebuild",
    "splits_key",
    "verify_model",
]

MANIFEST_NAME: Final = "manifest.json"
MANIFEST_SCHEMA: Final = "sommelier_mlflow.demo_model.v2"
SPLITS_SCHEMA: Final = "sommelier_mlflow.demo_splits.v1"
_HERE: Final = Path(__file__).resolve().parent
DEFAULT_RAW_PATH: Final = _HERE / "data" / "raw.jsonl"
#: The committed model, tokenizer and adapter, with their manifest.
MODEL_DIR: Final = _HERE / "model"
#: The precision the demo generates in. In float32 the committed weights' smallest
#: top-1/top-2 logit gap (5.6e-05) is only 2.7x the largest logit difference between
#: CPU kernel levels (2.1e-05), so another CPU could flip a greedy choice; in float64
#: the measured difference is 0.0 (``kernel_margins.py`` measures both).
GENERATION_DTYPE: Final = "float64"
#: Where the prepared splits are cached (they are derived, so not committed).
DEFAULT_CACHE: Final = _REPO / ".cache" / "demo"

# --- what is built: every value below is recorded in the manifest -----------------------

SEED: Final = 20260314
#: Root rows per split; translated rows follow their root. 1,967 roots survive
#: ``prepare`` on the bundled data: 200 test roots (plus ~160 French pairs) keep
#: the demo's generation short, 50 validation roots are held back, the rest train.
DEFAULT_SPLIT_SIZES: Final[Mapping[str, int]] = {"train": 1717, "validation": 50, "test": 200}
DEFAULT_BASE_STEPS: Final = 800
DEFAULT_ADAPTER_STEPS: Final = 500
#: The base model learns from these languages only, so it is weaker in the others.
BASE_LANGUAGES: Final = ("en",)
VOCAB_SIZE: Final = 3072
HIDDEN_SIZE: Final = 128
INTERMEDIATE_SIZE: Final = 384
NUM_LAYERS: Final = 4
NUM_HEADS: Final = 4
MAX_POSITIONS: Final = 1024
#: Longest training sequence (prompt + target + EOS), in tokens. Longer examples
#: are skipped and counted rather than truncated: a truncated prompt is one the
#: model would never be asked at evaluation time. On the bundled data none is.
MAX_TRAIN_TOKENS: Final = 384
BATCH_SIZE: Final = 16
BASE_LR: Final = 5e-3
ADAPTER_LR: Final = 1e-2
WEIGHT_DECAY: Final = 0.01
WARMUP_FRACTION: Final = 0.05
LORA_RANK: Final = 16
LORA_ALPHA: Final = 32
LORA_TARGETS: Final = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: Fixed so that the numerics (and therefore the weights' bytes) do not depend
#: on how many cores the machine has. One thread, because for kernels this small
#: two OpenMP threads are no faster on an idle two-core machine and several
#: times slower on a busy one.
NUM_THREADS: Final = 1

# --- tokenizer --------------------------------------------------------------------------

BOS_TOKEN: Final = "<s>"
EOS_TOKEN: Final = "</s>"
PAD_TOKEN: Final = "<pad>"
UNK_TOKEN: Final = "<unk>"
ROLE_TOKENS: Final = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
SPECIAL_TOKENS: Final = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN, *ROLE_TOKENS)
#: One turn: system and user turns end with ``<|end|>``; an assistant turn (a
#: training target) ends with EOS, which is where greedy generation stops. In a
#: conversation history an assistant turn writes its text (``content`` may be
#: null) and then each call as ``<tool_call>`` JSON, as the tools instruction
#: asks, and a tool result is a user turn inside ``<tool_response>`` tags (the
#: Hermes/Qwen layout; ``<|tool|>`` is no token of the vocabulary). A turn
#: without calls renders exactly as before, so no single-turn prompt changed.
_TURN: Final = (
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|assistant|>\\n' + (message['content'] or '') }}"
    "{% for call in message['tool_calls'] or [] %}"
    "{{ '<tool_call>\\n' + {'name': call['function']['name'], "
    "'arguments': call['function']['arguments']} | tojson + '\\n</tool_call>' }}"
    "{% endfor %}"
    "{{ eos_token }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|user|>\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|end|>\\n' }}"
    "{% else %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endif %}"
)
#: Without ``tools`` the template renders exactly what the model was trained on
#: (the package's own prompt, tools already inside the system message). With
#: ``tools`` (``--prompt-format native``) it renders them the way Hermes- and
#: Qwen-style chat models expect: one JSON schema per line inside ``<tools>``,
#: in a system turn that also holds the caller's system message, and an
#: instruction to answer inside ``<tool_call>`` tags. The tags are plain text:
#: adding them to the vocabulary would change the model.
CHAT_TEMPLATE: Final = (
    "{{ bos_token }}"
    "{% if tools %}"
    "{% set first = messages[0] if messages else none %}"
    "{{ '<|system|>\\n' }}"
    "{% if first and first['role'] == 'system' %}{{ first['content'] + '\\n\\n' }}{% endif %}"
    "{{ 'You may call one or more of the functions described below. Their JSON schemas, "
    "one per line, are inside <tools></tools>:\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ tool | tojson + '\\n' }}{% endfor %}"
    "{{ '</tools>\\n\\nTo call a function, answer with a JSON object holding its name and "
    "arguments inside <tool_call></tool_call> tags:\\n<tool_call>\\n"
    '{"name": <function name>, "arguments": <arguments as a JSON object>}'
    "\\n</tool_call><|end|>\\n' }}"
    "{% for message in messages %}"
    "{% if not (loop.first and message['role'] == 'system') %}" + _TURN + "{% endif %}"
    "{% endfor %}"
    "{% else %}"
    "{% for message in messages %}" + _TURN + "{% endfor %}"
    "{% endif %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

#: Code whose behaviour shapes the splits, digested into the splits' cache key.
_SPLIT_SOURCES: Final = ("sommelier_mlflow/_json.py", "sommelier_mlflow/data")
_LIBRARIES: Final = ("torch", "transformers", "peft", "tokenizers", "safetensors", "numpy")
_TMP_PREFIX: Final = ".building-"
_RESTORE_HINT: Final = (
    "restore the committed files with `git checkout -- examples/demo/model` "
    "(or rebuild them with `python examples/demo/build_model.py --rebuild`)"
)


@dataclass(frozen=True)
class DemoArtifacts:
    """The demo's verified model files and its prepared splits.

    Attributes:
        model_dir: The directory holding ``base_model/``, ``adapter/`` and the manifest.
        base_model_dir: The base model and its tokenizer (``save_pretrained``).
        adapter_dir: The peft LoRA adapter (safetensors).
        manifest_path: ``model_dir / "manifest.json"``.
        manifest: Its content: how the files were built, a summary and their digests.
        splits_dir: ``train``/``validation``/``test.jsonl`` and ``drop_summary.json``.
        test_split: ``splits_dir / "test.jsonl"``.
        dtype: The precision the demo generates in (:data:`GENERATION_DTYPE`).
    """

    model_dir: Path
    base_model_dir: Path
    adapter_dir: Path
    manifest_path: Path
    manifest: Mapping[str, Any]
    splits_dir: Path
    test_split: Path
    dtype: str


@dataclass(frozen=True)
class Rebuilt:
    """What :func:`rebuild` wrote.

    Attributes:
        out_dir: The directory now holding the new files and their manifest.
        manifest: The new manifest.
        timings: Seconds per build stage.
    """

    out_dir: Path
    manifest: Mapping[str, Any]
    timings: Mapping[str, float]


@dataclass(frozen=True)
class _Params:
    """The build parameters that vary between a full and a reduced build."""

    split_sizes: Mapping[str, int]
    base_steps: int
    adapter_steps: int
    max_train_roots: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "seed": SEED,
            "split_sizes": {name: self.split_sizes[name] for name in SPLIT_NAMES},
            "base_steps": self.base_steps,
            "adapter_steps": self.adapter_steps,
            "max_train_roots": self.max_train_roots,
            "base_languages": list(BASE_LANGUAGES),
            "vocab_size": VOCAB_SIZE,
            "model": {
                "hidden_size": HIDDEN_SIZE,
                "intermediate_size": INTERMEDIATE_SIZE,
                "num_layers": NUM_LAYERS,
                "num_heads": NUM_HEADS,
                "max_positions": MAX_POSITIONS,
            },
            "training": {
                "batch_size": BATCH_SIZE,
                "base_lr": BASE_LR,
                "adapter_lr": ADAPTER_LR,
                "weight_decay": WEIGHT_DECAY,
                "warmup_fraction": WARMUP_FRACTION,
                "max_train_tokens": MAX_TRAIN_TOKENS,
                "num_threads": NUM_THREADS,
            },
            "lora": {"r": LORA_RANK, "alpha": LORA_ALPHA, "targets": list(LORA_TARGETS)},
        }


# --- small helpers ----------------------------------------------------------------------


def _log(progress: bool, message: str) -> None:
    if progress:
        print(f"[demo-build] {message}", file=sys.stderr, flush=True)


def _warn(message: str) -> None:
    """Cache problems are always shown: a silent rebuild would hide a broken disk."""
    print(f"[demo-build] {message}", file=sys.stderr, flush=True)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _files_under(root: Path) -> dict[str, Path]:
    """Every regular file under ``root`` except the manifest, by ``/``-separated path."""
    return {
        path.relative_to(root).as_posix(): path
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.relative_to(root).as_posix() != MANIFEST_NAME
    }


def _digests(root: Path) -> dict[str, str]:
    return {relative: _sha256_file(path) for relative, path in _files_under(root).items()}


def _sources_digest() -> str:
    """Digest the package code that turns raw rows into splits."""
    digest = hashlib.sha256()
    for entry in _SPLIT_SOURCES:
        base = _REPO / entry
        paths = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for path in paths:
            digest.update(path.relative_to(_REPO).as_posix().encode("utf-8") + b"\0")
            digest.update(_sha256_file(path).encode("ascii"))
    return digest.hexdigest()


def _library_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in _LIBRARIES}


def _digest_inputs(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(inputs).encode("ascii")).hexdigest()


def _make_params(
    split_sizes: Mapping[str, int] | None,
    base_steps: int,
    adapter_steps: int,
    max_train_roots: int | None,
) -> _Params:
    sizes = dict(DEFAULT_SPLIT_SIZES if split_sizes is None else split_sizes)
    for name, value in (("base_steps", base_steps), ("adapter_steps", adapter_steps)):
        if type(value) is not int or value <= 0:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if max_train_roots is not None and (type(max_train_roots) is not int or max_train_roots <= 0):
        raise ConfigError(
            f"max_train_roots must be a positive integer or None, got {max_train_roots!r}"
        )
    return _Params(sizes, base_steps, adapter_steps, max_train_roots)


def _read_manifest(path: Path, schema: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(manifest, None)``, or ``(None, reason)`` when it is absent, unreadable or foreign."""
    if not path.is_file():
        return None, f"{path} is missing"
    try:
        manifest = loads(path.read_bytes())
    except (JSONDecodeError, OSError) as exc:
        return None, f"{path} is unreadable ({exc})"
    if not isinstance(manifest, dict) or manifest.get("schema_version") != schema:
        return None, f"{path} is not a {schema} manifest"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return None, f"{path} lists no files"
    return manifest, None


def _check_files(root: Path, expected: Mapping[str, str]) -> str | None:
    """``None`` when exactly the ``expected`` files are under ``root`` with their digests.

    Otherwise the first problem, naming the file and the digest it should have.
    """
    present = _files_under(root)
    for relative in sorted(expected):
        if relative not in present:
            return f"{root / relative} is missing (expected sha256 {expected[relative]})"
        actual = _sha256_file(present[relative])
        if actual != expected[relative]:
            return (
                f"{root / relative} was altered: its sha256 is {actual}, "
                f"expected sha256 {expected[relative]}"
            )
    extra = sorted(set(present) - set(expected))
    if extra:
        return f"{root} holds file(s) its manifest does not list: {', '.join(extra)}"
    return None


# --- the committed model files ----------------------------------------------------------


def verify_model(model_dir: Path = MODEL_DIR) -> dict[str, Any]:
    """Check every committed model file against the committed manifest.

    Returns:
        The manifest.

    Raises:
        DependencyError: The manifest is missing or unreadable, a file is
            missing or altered (named, with the digest it should have), or a
            file the manifest does not list is present. Nothing is trained.
    """
    model_dir = Path(model_dir)
    manifest, problem = _read_manifest(model_dir / MANIFEST_NAME, MANIFEST_SCHEMA)
    if manifest is None:
        raise DependencyError(f"the demo model cannot be used: {problem}; {_RESTORE_HINT}")
    problem = _check_files(model_dir, manifest["files"])
    if problem is not None:
        raise DependencyError(f"the demo model cannot be used: {problem}; {_RESTORE_HINT}")
    return manifest


def demo_assets(
    cache_root: Path = DEFAULT_CACHE,
    *,
    model_dir: Path = MODEL_DIR,
    raw_path: Path = DEFAULT_RAW_PATH,
    progress: bool = False,
) -> DemoArtifacts:
    """Return the demo's verified model files and its prepared splits; never trains.

    Raises:
        DependencyError: A committed model file is missing or altered.
        InputError: The raw data is missing.
    """
    model_dir = Path(model_dir).resolve()
    manifest = verify_model(model_dir)
    splits_dir = prepare_splits(cache_root, raw_path=raw_path, progress=progress)
    return DemoArtifacts(
        model_dir=model_dir,
        base_model_dir=model_dir / "base_model",
        adapter_dir=model_dir / "adapter",
        manifest_path=model_dir / MANIFEST_NAME,
        manifest=manifest,
        splits_dir=splits_dir,
        test_split=splits_dir / "test.jsonl",
        dtype=GENERATION_DTYPE,
    )


# --- the prepared splits (derived from the raw data, cached) ----------------------------


def _raw_file(raw_path: Path) -> Path:
    raw = Path(raw_path).resolve()
    if not raw.is_file():
        raise InputError(
            f"raw data {raw} does not exist; regenerate the bundled file with "
            "`python examples/demo/make_dataset.py --out examples/demo/data/raw.jsonl`"
        )
    return raw


def _split_inputs(raw: Path, split_sizes: Mapping[str, int]) -> dict[str, Any]:
    return {
        "raw_sha256": _sha256_file(raw),
        "package_sources_sha256": _sources_digest(),
        "seed": SEED,
        "split_sizes": {name: split_sizes[name] for name in SPLIT_NAMES},
    }


def splits_key(
    raw_path: Path = DEFAULT_RAW_PATH, split_sizes: Mapping[str, int] | None = None
) -> str:
    """The splits' cache key: the raw data, the seed and sizes, and the package's data code.

    Nothing else (no library version, no model file) changes the splits, so
    nothing else is in the key.
    """
    sizes = DEFAULT_SPLIT_SIZES if split_sizes is None else split_sizes
    return _digest_inputs(_split_inputs(_raw_file(raw_path), sizes))


def prepare_splits(
    cache_root: Path = DEFAULT_CACHE,
    *,
    raw_path: Path = DEFAULT_RAW_PATH,
    progress: bool = False,
) -> Path:
    """Return ``<cache_root>/splits-<key>/``, preparing it first if absent or invalid.

    A cached directory is used only when its manifest lists exactly its files
    with their digests; anything else is reported, deleted and prepared again
    (it is derived data and takes a third of a second). Preparation happens in
    a scratch directory renamed into place when complete.
    """
    raw = _raw_file(raw_path)
    inputs = _split_inputs(raw, DEFAULT_SPLIT_SIZES)
    key = _digest_inputs(inputs)
    cache_root = Path(cache_root).resolve()
    final = cache_root / f"splits-{key}"
    if final.exists():
        manifest, problem = _read_manifest(final / MANIFEST_NAME, SPLITS_SCHEMA)
        if manifest is not None and manifest.get("key") == key:
            problem = _check_files(final, manifest["files"])
            if problem is None:
                return final
        _warn(f"cached splits {final} are invalid: {problem}; preparing them again")
        shutil.rmtree(final)
    cache_root.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(cache_root)
    scratch = cache_root / f"{_TMP_PREFIX}{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        prepare(raw, scratch, seed=SEED, split_sizes=DEFAULT_SPLIT_SIZES)
        manifest = {
            "schema_version": SPLITS_SCHEMA,
            "key": key,
            "inputs": inputs,
            "files": _digests(scratch),
        }
        atomic_write_json(scratch / MANIFEST_NAME, manifest)
        try:
            os.rename(scratch, final)
        except OSError:
            if not final.is_dir():
                raise
            # Another process prepared the same splits first: theirs are identical.
        _log(progress, f"prepared the splits in {final}")
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    return final


def _remove_stale_builds(parent: Path) -> None:
    """Delete scratch directories left by processes that no longer run."""
    for path in parent.glob(f"{_TMP_PREFIX}*"):
        try:
            pid = int(path.name[len(_TMP_PREFIX) :].split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue  # alive, owned by someone else


# --- the rebuild ------------------------------------------------------------------------


def _check_rebuild_target(out_dir: Path) -> None:
    """Refuse a target that holds anything but a previous build (its manifest's files).

    Raises:
        InputError: Naming the foreign files; nothing has been deleted.
    """
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise InputError(f"cannot rebuild into {out_dir}: it is not a directory")
    present = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()}
    manifest, _ = _read_manifest(out_dir / MANIFEST_NAME, MANIFEST_SCHEMA)
    allowed = set() if manifest is None else {*manifest["files"], MANIFEST_NAME}
    foreign = sorted(present - allowed)
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        shown = ", ".join(foreign[:5]) + more
        raise InputError(
            f"refusing to rebuild into {out_dir}: it holds files that are not a previous "
            f"demo build ({shown}); nothing was deleted; pass --out with a new or empty directory"
        )


def rebuild(
    out_dir: Path = MODEL_DIR,
    *,
    raw_path: Path = DEFAULT_RAW_PATH,
    progress: bool = True,
    split_sizes: Mapping[str, int] | None = None,
    base_steps: int = DEFAULT_BASE_STEPS,
    adapter_steps: int = DEFAULT_ADAPTER_STEPS,
    max_train_roots: int | None = None,
) -> Rebuilt:
    """Train the tokenizer, base model and adapter from scratch into ``out_dir``.

    Seeded throughout, one CPU thread, deterministic algorithms: two rebuilds
    on one machine give byte-identical files. ``out_dir`` must be new, empty
    or hold only a previous build (the files its manifest lists), which is
    replaced as a whole once the new build is complete.

    Args:
        out_dir: Where the files go (default: the committed ``examples/demo/model``).
        raw_path: Raw xlam-shaped rows (default: the bundled ``data/raw.jsonl``).
        progress: Print stages, losses and timings to stderr.
        split_sizes: Root rows per split for ``prepare`` (default
            :data:`DEFAULT_SPLIT_SIZES`).
        base_steps: Optimiser steps for the base model.
        adapter_steps: Optimiser steps for the LoRA adapter.
        max_train_roots: Train on at most this many training roots (and their
            translations); ``None`` uses them all. Meant for quick tests.

    Raises:
        InputError: ``out_dir`` holds other files (nothing is deleted), or the
            raw data is missing.
        ConfigError: A bad parameter.
    """
    params = _make_params(split_sizes, base_steps, adapter_steps, max_train_roots)
    raw = _raw_file(raw_path)
    out_dir = Path(out_dir).resolve()
    _check_rebuild_target(out_dir)
    parent = out_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(parent)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    scratch = parent / f"{_TMP_PREFIX}model-{tag}"
    retired = parent / f"{_TMP_PREFIX}old-{tag}"
    scratch.mkdir()
    try:
        inputs = {"raw_sha256": _sha256_file(raw), "params": params.as_json()}
        timings = _build_into(scratch, raw, inputs, params, progress)
        if out_dir.exists():
            os.rename(out_dir, retired)
        os.rename(scratch, out_dir)
    finally:
        for leftover in (scratch, retired):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    return Rebuilt(out_dir, verify_model(out_dir), timings)


def _build_into(
    root: Path, raw: Path, inputs: Mapping[str, Any], params: _Params, progress: bool
) -> dict[str, float]:
    """Run the build under fixed torch settings, restoring the caller's afterwards."""
    import torch
    from transformers.utils import logging as transformers_logging

    hf_logging: Any = transformers_logging  # untyped module
    threads_before = torch.get_num_threads()
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    bars_before = hf_logging.is_progress_bar_enabled()
    torch.set_num_threads(NUM_THREADS)
    torch.use_deterministic_algorithms(True)
    hf_logging.disable_progress_bar()  # our own progress lines say more than "1/1 shards"
    try:
        with tempfile.TemporaryDirectory(prefix="demo-splits-") as splits:
            return _build_steps(root, raw, Path(splits), inputs, params, progress)
    finally:
        torch.set_num_threads(threads_before)
        torch.use_deterministic_algorithms(deterministic_before)
        if bars_before:
            hf_logging.enable_progress_bar()


def _build_steps(
    root: Path,
    raw: Path,
    splits_dir: Path,
    inputs: Mapping[str, Any],
    params: _Params,
    progress: bool,
) -> dict[str, float]:
    timings: dict[str, float] = {}
    start = time.perf_counter()

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        timings[name] = round(now - since, 2)
        _log(progress, f"{name}: {timings[name]:.1f}s")
        return now

    result = prepare(raw, splits_dir, seed=SEED, split_sizes=params.split_sizes)
    train = _limit_roots(list(result.splits["train"]), params.max_train_roots)
    mark = lap("prepare", start)

    tokenizer = _train_tokenizer(train)
    formatted = format_examples(train, tokenizer)
    encoded, skipped = _encode(formatted, tokenizer)
    _check_round_trip(tokenizer, result.splits)
    mark = lap("tokenizer", mark)
    _log(
        progress,
        f"{len(encoded)} training sequences ({skipped} over {MAX_TRAIN_TOKENS} tokens skipped), "
        f"mean length {sum(len(ids) for ids, _, _ in encoded) / max(len(encoded), 1):.1f} tokens",
    )

    base_rows = [item for item in encoded if item[2] in BASE_LANGUAGES]
    model = _new_model(tokenizer)
    base_losses = _train(
        model,
        trainable=list(model.parameters()),
        data=base_rows,
        steps=params.base_steps,
        lr=BASE_LR,
        seed=SEED + 1,
        pad_id=tokenizer.pad_token_id,
        label="base",
        progress=progress,
    )
    base_dir = root / "base_model"
    model.save_pretrained(base_dir, safe_serialization=True)
    tokenizer.save_pretrained(base_dir)
    base_parameters = sum(p.numel() for p in model.parameters())
    mark = lap("base model", mark)

    peft_model = _wrap_lora(model)
    adapter_losses = _train(
        peft_model,
        trainable=[p for p in peft_model.parameters() if p.requires_grad],
        data=encoded,
        steps=params.adapter_steps,
        lr=ADAPTER_LR,
        seed=SEED + 2,
        pad_id=tokenizer.pad_token_id,
        label="adapter",
        progress=progress,
    )
    adapter_parameters = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    _save_adapter(peft_model, root / "adapter")
    lap("adapter", mark)

    counts: dict[str, int] = {}
    for _, _, language in encoded:
        counts[language] = counts.get(language, 0) + 1
    manifest = {
        "schema_version": MANIFEST_SCHEMA,
        # Informational: the files are the contract, not how they came about.
        "built_with": {**inputs, "versions": _library_versions()},
        "summary": {
            "parameters": {"base": base_parameters, "adapter_trainable": adapter_parameters},
            "vocab_size": len(tokenizer),
            "train_sequences": {
                "base": len(base_rows),
                "adapter": len(encoded),
                "by_language": counts,
                "skipped_too_long": skipped,
            },
            "max_target_tokens": max(len(ids) - prompt for ids, prompt, _ in encoded),
            "final_loss": {
                "base": round(_tail_mean(base_losses), 4),
                "adapter": round(_tail_mean(adapter_losses), 4),
            },
            "split_rows": {name: len(result.splits[name]) for name in SPLIT_NAMES},
        },
        "files": _digests(root),
    }
    atomic_write_json(root / MANIFEST_NAME, manifest)
    timings["total"] = round(time.perf_counter() - start, 2)
    _log(progress, f"total: {timings['total']:.1f}s")
    return timings


def _limit_roots(examples: list[TestExample], max_roots: int | None) -> list[TestExample]:
    """Keep the first ``max_roots`` roots of the split (in its seeded order) and their pairs."""
    if max_roots is None:
        return examples
    kept_roots = [e.example_id for e in examples if e.source_example_id is None][:max_roots]
    keep = set(kept_roots)
    return [
        e
        for e in examples
        if (e.source_example_id is None and e.example_id in keep)
        or (e.source_example_id is not None and e.source_example_id in keep)
    ]


def _tail_mean(losses: Sequence[float]) -> float:
    tail = losses[-max(1, len(losses) // 10) :]
    return sum(tail) / len(tail)


# --- tokenizer --------------------------------------------------------------------------


def _schema_tokens(train: Sequence[TestExample]) -> list[str]:
    """The texts that become single tokens: the system prefix and each tool schema.

    The system message is a fixed prefix (instruction and heading) followed by
    the canonical JSON of the offered tools. Both repeat verbatim across the
    data, so giving each its own token shortens a prompt from hundreds of
    tokens to about ten, which is what makes CPU training fast; a schema never
    seen in training still encodes, just as ordinary BPE tokens.
    """
    texts: set[str] = set()
    for example in train:
        system = build_messages(example)[0]["content"]
        tools = canonical_json(example.tools)
        if not system.endswith(tools):
            raise InvariantViolationError(
                "the system message no longer ends with the canonical tools JSON; "
                "update the demo tokenizer's schema tokens to the new prompt layout"
            )
        texts.add(system[: -len(tools)])
        texts.update(canonical_json(tool) for tool in example.tools)
    return sorted(texts)


def _train_tokenizer(train: Sequence[TestExample]) -> Any:
    """Train the byte-level BPE and wrap it as a ``PreTrainedTokenizerFast``.

    Pre-tokens are runs of letters (and ``_``), runs of digits and runs of
    everything else, so a value such as ``Zurich``, ``Maison Rouge`` or
    ``2026`` is spelt with the same tokens in the request and in the JSON call
    (a space or a quote never sticks to a word): a tiny model can then learn to
    copy values instead of memorising them. Byte-level BPE round-trips any text
    exactly (the tool-call JSON must, or no output could ever score as
    correct), and ``clean_up_tokenization_spaces`` is off so decoding never
    "tidies" spaces around punctuation.
    """
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    corpus: list[str] = []
    for example in train:
        corpus.extend(message["content"] for message in build_messages(example))
        corpus.append(render_target(example.gold_call))
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[\p{L}_]+|\p{N}+|[^\p{L}\p{N}_]+"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Sorted: the trainer's input must not depend on anything but the texts themselves.
    backend.train_from_iterator(sorted(corpus), trainer=trainer)
    # Added after training, so they get fresh ids after the BPE vocabulary.
    backend.add_tokens([AddedToken(text, normalized=False) for text in _schema_tokens(train)])
    fast_class: Any = PreTrainedTokenizerFast  # untyped constructor
    tokenizer = fast_class(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        additional_special_tokens=list(ROLE_TOKENS),
        model_max_length=MAX_POSITIONS,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _encode(
    formatted: Sequence[TestExample], tokenizer: Any
) -> tuple[list[tuple[list[int], int, str]], int]:
    """Token ids of prompt + target + EOS, with the prompt length and the language.

    The prompt is encoded exactly as generation encodes it (the rendered text,
    no added special tokens), so training and evaluation see the same ids.
    """
    sequences: list[tuple[list[int], int, str]] = []
    skipped = 0
    eos = int(tokenizer.eos_token_id)
    for example in formatted:
        prompt = tokenizer(example.prompt_text, add_special_tokens=False)["input_ids"]
        target = tokenizer(render_target(example.gold_call), add_special_tokens=False)["input_ids"]
        ids = [*prompt, *target, eos]
        if len(ids) > MAX_TRAIN_TOKENS:
            skipped += 1
            continue
        sequences.append((ids, len(prompt), example.language))
    return sequences, skipped


def _check_round_trip(tokenizer: Any, splits: Mapping[str, Sequence[TestExample]]) -> None:
    """Refuse a tokenizer that cannot spell a gold call back exactly."""
    for name in SPLIT_NAMES:
        for example in splits[name]:
            target = render_target(example.gold_call)
            ids = tokenizer(target, add_special_tokens=False)["input_ids"]
            back = tokenizer.decode(ids, skip_special_tokens=True)
            if back != target:
                raise DataError(
                    f"the demo tokenizer does not round-trip the gold call of "
                    f"{example.example_id!r} ({name}): {target!r} decodes as {back!r}"
                )


# --- model and training -----------------------------------------------------------------


def _new_model(tokenizer: Any) -> Any:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    generation_class: Any = GenerationConfig  # untyped constructor
    model.generation_config = generation_class(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    )
    return model


def _batches(lengths: Sequence[int], steps: int, seed: int) -> Iterator[list[int]]:
    """Yield ``steps`` batches of indices, grouped by length to limit padding.

    Each epoch shuffles the examples, sorts windows of 16 batches by length,
    cuts them into batches and shuffles the batch order, all from one seeded
    numpy Generator.
    """
    rng = np.random.default_rng(seed)
    window = BATCH_SIZE * 16
    produced = 0
    while True:
        order = [int(i) for i in rng.permutation(len(lengths))]
        batches: list[list[int]] = []
        for start in range(0, len(order), window):
            chunk = sorted(order[start : start + window], key=lambda i: (lengths[i], i))
            batches.extend(chunk[i : i + BATCH_SIZE] for i in range(0, len(chunk), BATCH_SIZE))
        for index in rng.permutation(len(batches)):
            yield batches[int(index)]
            produced += 1
            if produced == steps:
                return


def _lr_factor(step: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    warmup = max(1, int(steps * WARMUP_FRACTION))
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def _causal_lm(model: Any) -> Any:
    """The ``LlamaForCausalLM`` inside a peft wrapper (LoRA layers are injected in place)."""
    from peft import PeftModel

    return model.get_base_model() if isinstance(model, PeftModel) else model


def _train(
    model: Any,
    *,
    trainable: list[Any],
    data: Sequence[tuple[list[int], int, str]],
    steps: int,
    lr: float,
    seed: int,
    pad_id: int,
    label: str,
    progress: bool,
) -> list[float]:
    """Plain AdamW on the target tokens only; return the loss of every step.

    The LM head runs only on the positions that predict a target token (or the
    final EOS), which is most of the saving over a full-sequence loss.
    """
    import torch
    import torch.nn.functional as functional

    if not data:
        raise DataError(f"no training sequences for the {label} model")
    causal = _causal_lm(model)
    backbone, head = causal.model, causal.lm_head
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(trainable, lr=lr, betas=(0.9, 0.98), weight_decay=WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _lr_factor(step, steps))
    model.train()
    losses: list[float] = []
    started = time.perf_counter()
    report_every = max(1, steps // 10)
    for step, batch in enumerate(_batches([len(ids) for ids, _, _ in data], steps, seed)):
        width = max(len(data[i][0]) for i in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width - 1), dtype=torch.bool)
        for row, index in enumerate(batch):
            sequence, prompt_len, _ = data[index]
            ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
            # Position t predicts token t+1: the targets are tokens prompt_len..end.
            mask[row, prompt_len - 1 : len(sequence) - 1] = True
        # Right padding under a causal mask: real tokens never see the pads after them.
        hidden = backbone(input_ids=ids).last_hidden_state
        logits = head(hidden[:, :-1][mask])
        loss: Any = functional.cross_entropy(logits, ids[:, 1:][mask])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.item()))
        if (step + 1) % report_every == 0 or step + 1 == steps:
            elapsed = time.perf_counter() - started
            _log(
                progress,
                f"{label} step {step + 1}/{steps} loss {_tail_mean(losses[-report_every:]):.3f} "
                f"({elapsed:.0f}s)",
            )
    model.eval()
    return losses


def _wrap_lora(model: Any) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=LORA_RANK,
        lora_alpha=LORA_ALPHA,
        target_modules=list(LORA_TARGETS),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(SEED + 3)
    with warnings.catch_warnings():
        # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        return get_peft_model(model, config)


def _save_adapter(peft_model: Any, directory: Path) -> None:
    """Save the adapter so that its files depend only on the weights.

    The config names its base as ``base_model``, the sibling directory, rather
    than the temporary build path (which would make the bytes, and so the
    digests, depend on where the cache lives). peft writes ``target_modules``
    from a set, in an order that changes with Python's hash seed, so the
    config is rewritten with that list sorted. peft's generated model card is
    dropped: it is boilerplate that embeds the base path.
    """
    for config in peft_model.peft_config.values():
        config.base_model_name_or_path = "base_model"
    # No embedding layer is adapted; saying so also stops peft probing the Hub for the base.
    peft_model.save_pretrained(directory, safe_serialization=True, save_embedding_layers=False)
    (directory / "README.md").unlink(missing_ok=True)
    config_path = directory / "adapter_config.json"
    saved = loads(config_path.read_bytes())
    if isinstance(saved.get("target_modules"), list):
        saved["target_modules"] = sorted(saved["target_modules"])
    atomic_write_json(config_path, saved)


# --- quick quality check ----------------------------------------------------------------


def quick_check(
    artifacts: DemoArtifacts,
    *,
    per_language: int = 50,
    batch_size: int = 16,
    max_new_tokens: int = 96,
    progress: bool = True,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Greedy-generate on the first test examples of each language and score both arms.

    This is a smoke check of the demo's premise (base partly competent, adapter
    clearly better, especially in French), not the evaluation itself.

    Returns:
        ``{model_kind: {language or "overall": {metric: value}}}``.
    """
    from sommelier_mlflow.data import read_test_split
    from sommelier_mlflow.generation import HFGenerator
    from sommelier_mlflow.toolcalls import compute_metrics, parse_tool_call

    split = read_test_split(artifacts.test_split)
    chosen: list[TestExample] = []
    taken: dict[str, int] = {}
    for example in split.examples:
        if taken.get(example.language, 0) < per_language:
            chosen.append(example)
            taken[example.language] = taken.get(example.language, 0) + 1
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, adapter in (("base", None), ("adapter", artifacts.adapter_dir)):
        generator = HFGenerator(artifacts.base_model_dir, adapter=adapter, num_threads=NUM_THREADS)
        formatted = format_examples(chosen, generator.tokenizer)
        ordered = sorted(formatted, key=lambda e: len(e.prompt_text or ""))
        outputs: dict[str, str] = {}
        started = time.perf_counter()
        for start in range(0, len(ordered), batch_size):
            batch = ordered[start : start + batch_size]
            texts = generator.generate(
                [e.prompt_text or "" for e in batch], max_new_tokens=max_new_tokens
            )
            outputs.update(zip((e.example_id for e in batch), texts, strict=True))
        _log(progress, f"{kind}: generated {len(ordered)} in {time.perf_counter() - started:.1f}s")
        records: dict[str, list[dict[str, Any]]] = {"overall": []}
        for example in formatted:
            parsed = parse_tool_call(outputs[example.example_id])
            record = {
                "parse_status": parsed.status,
                "parsed_call": parsed.call,
                "gold_call": example.gold_call,
            }
            records["overall"].append(record)
            records.setdefault(example.language, []).append(record)
        results[kind] = {
            name: {metric: round(value.value, 3) for metric, value in compute_metrics(rows).items()}
            for name, rows in records.items()
        }
    return results


# --- command line -----------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Verify the committed demo files (or rebuild them) and print where they are."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="train the tokenizer, model and adapter from scratch into --out (minutes)",
    )
    parser.add_argument("--out", type=Path, default=MODEL_DIR, help="the model directory")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="splits cache root")
    parser.add_argument("--raw", type=Path, default=DEFAULT_RAW_PATH, help="raw rows (JSONL)")
    parser.add_argument("--base-steps", type=int, default=DEFAULT_BASE_STEPS)
    parser.add_argument("--adapter-steps", type=int, default=DEFAULT_ADAPTER_STEPS)
    parser.add_argument("--max-train-roots", type=int, default=None)
    parser.add_argument(
        "--check",
        type=int,
        default=0,
        metavar="N",
        help="then greedy-generate on N test prompts per language and print both arms' metrics",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    try:
        if args.rebuild:
            rebuilt = rebuild(
                args.out,
                raw_path=args.raw,
                progress=not args.quiet,
                base_steps=args.base_steps,
                adapter_steps=args.adapter_steps,
                max_train_roots=args.max_train_roots,
            )
            report["timings"] = dict(rebuilt.timings)
        artifacts = demo_assets(
            args.cache, model_dir=args.out, raw_path=args.raw, progress=not args.quiet
        )
    except SommelierError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    report.update(
        {
            "model_dir": str(artifacts.model_dir),
            "base_model_dir": str(artifacts.base_model_dir),
            "adapter_dir": str(artifacts.adapter_dir),
            "manifest": str(artifacts.manifest_path),
            "splits_dir": str(artifacts.splits_dir),
            "test_split": str(artifacts.test_split),
            "summary": artifacts.manifest.get("summary"),
        }
    )
    if args.check > 0:
        report["check"] = quick_check(artifacts, per_language=args.check, progress=not args.quiet)
    sys.stdout.write(canonical_json(report) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
