"""Show that no CPU's rounding can change the demo's greedy generations.

Training is not reproducible across CPUs, which is why the demo's weights are
committed. Greedy generation from fixed weights is reproducible only if no
CPU's kernels move the logits far enough to swap the top two candidates of a
generated token. This script measures both sides of that inequality on the
demo's whole test split, for both arms, with the demo's own decoding (batch
size 16, 96 new tokens, left padding, the package's generation runner, in the
demo's precision, float64; ``--dtype float32`` shows why it is not float32):

- **kernel drift**: the largest absolute difference between the logits computed
  with the most portable kernels (``ATEN_CPU_CAPABILITY=default`` for torch's
  own kernels, and MKL's matrix code and oneDNN held to SSE4, see
  :data:`PORTABLE`) and with the machine's best kernels (AVX2 or AVX-512),
  each with one and two threads;
- **greedy margin**: the smallest gap between the top-1 and top-2 logits over
  every generated token (up to and including the end-of-sequence token).

The committed weights must keep the margin at least :data:`REQUIRED_RATIO`
times the drift, and every configuration must generate byte-identical text.
``ATEN_CPU_CAPABILITY`` is read when torch is imported, so each kernel level
runs in a subprocess of its own (thread counts change in-process).

    python examples/demo/kernel_margins.py                  # the figures as JSON; exit 1 if unmet
    python examples/demo/kernel_margins.py --dtype float32  # the same in float32 (it fails)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

_HERE: Final = Path(__file__).resolve().parent
_REPO: Final = _HERE.parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from sommelier_mlflow._json import canonical_json, loads  # noqa: E402

__all__ = ["REQUIRED_RATIO", "THREADS", "Margins", "measure"]

#: The margin must exceed the drift by this factor.
REQUIRED_RATIO: Final = 10.0
THREADS: Final = (1, 2)
#: The environment of the portable-kernel run. torch reads ``ATEN_CPU_CAPABILITY``
#: for its vectorised kernels; matrix products go to MKL and oneDNN, which pick
#: their code path from the CPU unless held back by these variables (where the
#: library honours them on the CPU at hand).
PORTABLE: Final = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
}
#: The demo's decoding (the MLproject's defaults).
MAX_NEW_TOKENS: Final = 96
BATCH_SIZE: Final = 16
ARMS: Final = ("base", "adapter")


@dataclass(frozen=True)
class Margins:
    """What :func:`measure` found.

    Attributes:
        dtype: The precision the generations ran in.
        capabilities: The kernel level each subprocess reported (``DEFAULT``, ``AVX2``...).
        generations: SHA-256 of each configuration's generation files, by
            ``"<capability>/<threads> threads/<arm>"``.
        max_kernel_diff: Largest absolute logit difference from the reference
            configuration (portable kernels, one thread) over every generated token.
        min_top_gap: Smallest top-1 minus top-2 logit over every generated token.
        tokens: Generated tokens per arm (end-of-sequence included).
    """

    dtype: str
    capabilities: tuple[str, ...]
    generations: dict[str, str]
    max_kernel_diff: float
    min_top_gap: float
    tokens: dict[str, int]

    @property
    def identical(self) -> bool:
        """Whether every configuration generated the same bytes for each arm."""
        return all(
            len({digest for key, digest in self.generations.items() if key.endswith(f"/{arm}")})
            == 1
            for arm in ARMS
        )

    @property
    def ratio(self) -> float:
        """Margin over drift (infinite when no drift was seen)."""
        if self.max_kernel_diff == 0:
            return float("inf")
        return self.min_top_gap / self.max_kernel_diff

    def as_json(self) -> dict[str, Any]:
        return {
            "capabilities": list(self.capabilities),
            "dtype": self.dtype,
            "generations": dict(self.generations),
            "identical": self.identical,
            "max_kernel_diff": self.max_kernel_diff,
            "min_top_gap": self.min_top_gap,
            "ratio": None if self.max_kernel_diff == 0 else round(self.ratio, 1),
            "required_ratio": REQUIRED_RATIO,
            "tokens": dict(self.tokens),
        }


# --- the worker: one kernel level, one thread count, both arms ---------------------------


def _generate_with_logits(
    assets: Any, arm: str, threads: int, dtype: str, out_dir: Path
) -> tuple[str, Any]:
    """Run the demo's generation for one arm; return the files' digest and the logits.

    The logits are those of every generated token, in batch-plan order, as
    one float64 array (tokens x vocabulary). They are captured by a forward
    hook on the output layer; greedy decoding picks each step's argmax, so a
    row stops contributing after the step whose argmax is end-of-sequence.
    """
    import numpy as np

    from sommelier_mlflow.data import Decoding, format_examples, read_test_split
    from sommelier_mlflow.generation import HFGenerator, run_generation

    adapter = assets.adapter_dir if arm == "adapter" else None
    generator = HFGenerator(
        assets.base_model_dir, adapter=adapter, num_threads=threads, dtype=dtype
    )
    examples = format_examples(read_test_split(assets.test_split).examples, generator.tokenizer)
    eos = int(generator.tokenizer.eos_token_id)
    steps: list[Any] = []

    def keep(_module: Any, _inputs: Any, output: Any) -> None:
        steps.append(output[:, -1, :].detach().double().numpy().copy())

    # The runner drives the model; the hook only watches its output layer (the
    # base model's, which the adapter arm's peft wrapper shares).
    model: Any = generator._lease.engine.model
    hook = model.get_output_embeddings().register_forward_hook(keep)
    rows: list[Any] = []
    try:

        def collect(_completions: Any, _seconds: float) -> None:
            finished = np.zeros(steps[0].shape[0], dtype=bool)
            for logits in steps:
                rows.append(logits[~finished])
                finished |= logits.argmax(axis=1) == eos
            steps.clear()

        paths = run_generation(
            examples,
            generator,
            decoding=Decoding(max_new_tokens=MAX_NEW_TOKENS, batch_size=BATCH_SIZE, backend="hf"),
            model_kind="adapter" if arm == "adapter" else "base",
            out_dir=out_dir,
            progress=False,
            on_batch=collect,
        )
    finally:
        hook.remove()
        generator.close()
    digest = hashlib.sha256()
    for language in sorted(paths):
        digest.update(paths[language].read_bytes())
    return digest.hexdigest(), np.concatenate(rows)


def _worker(
    scratch: Path, threads: int, reference: bool, model_dir: Path, dtype: str | None
) -> dict[str, Any]:
    """Generate both arms with ``threads`` threads at this process's kernel level.

    The reference run (portable kernels, one thread) saves its logits for the
    others to compare against; every run reports its own figures.
    """
    import numpy as np
    import torch
    from build_model import demo_assets

    assets = demo_assets(model_dir=model_dir)
    dtype = dtype or assets.dtype
    capability = str(torch.backends.cpu.get_cpu_capability())
    runs: dict[str, Any] = {}
    for arm in ARMS:
        digest, logits = _generate_with_logits(
            assets, arm, threads, dtype, scratch / f"{capability}-{threads}-{arm}"
        )
        top2 = np.partition(logits, -2, axis=1)[:, -2:]
        reference_path = scratch / f"reference-{arm}.npy"
        if reference:
            np.save(reference_path, logits)
        expected = np.load(reference_path)
        drift = (
            float(np.abs(logits - expected).max())
            if logits.shape == expected.shape
            else float("inf")  # the generations differ: no margin can be claimed
        )
        runs[f"{capability}/{threads} threads/{arm}"] = {
            "generations_sha256": digest,
            "max_diff": drift,
            "min_gap": float((top2[:, 1] - top2[:, 0]).min()),
            "tokens": int(logits.shape[0]),
        }
    return {"capability": capability, "dtype": dtype, "runs": runs}


# --- the driver ---------------------------------------------------------------------------


def _start(
    scratch: str, portable: bool, threads: int, model_dir: Path | None, dtype: str | None
) -> Any:
    env = {key: value for key, value in os.environ.items() if key not in PORTABLE}
    env["PYTHONPATH"] = str(_REPO)
    if portable:
        env.update(PORTABLE)
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", scratch]
    command += ["--threads", str(threads)]
    if portable and threads == THREADS[0]:
        command.append("--reference")
    if model_dir is not None:
        command += ["--model-dir", str(model_dir)]
    if dtype is not None:
        command += ["--dtype", dtype]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _report(process: Any) -> dict[str, Any]:
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"a kernel-margin worker failed:\n{stderr[-3000:]}")
    report: dict[str, Any] = loads(stdout.strip().splitlines()[-1])
    return report


def measure(
    scratch: Path | None = None, model_dir: Path | None = None, dtype: str | None = None
) -> Margins:
    """Run every (kernel level, thread count) configuration and combine their figures.

    The reference (portable kernels, one thread) runs first, then the three
    others, each compared against it.

    Args:
        scratch: Where the temporary generations and logits go (default: the system's).
        model_dir: The model files to check (default: the committed ones), e.g.
            a ``build_model.py --rebuild --out DIR`` before it is committed.
        dtype: The precision to generate in (default: the demo's, float64);
            ``"float32"`` shows why the demo does not use it.

    Raises:
        RuntimeError: A worker failed (its stderr is quoted).
    """
    with tempfile.TemporaryDirectory(prefix="kernel-margins-", dir=scratch) as tmp:
        # One at a time: side by side, their threads outnumber a small machine's
        # cores, and MKL's and OpenMP's spinning threads then slow all of them
        # many times over (seen: minutes instead of seconds under CI's load).
        reports = [
            _report(_start(tmp, portable, threads, model_dir, dtype))
            for portable in (True, False)
            for threads in THREADS
        ]
    runs = {key: run for report in reports for key, run in report["runs"].items()}
    return Margins(
        dtype=reports[0]["dtype"],
        capabilities=tuple(dict.fromkeys(report["capability"] for report in reports)),
        generations={key: run["generations_sha256"] for key, run in runs.items()},
        max_kernel_diff=max(run["max_diff"] for run in runs.values()),
        min_top_gap=min(run["min_gap"] for run in runs.values()),
        tokens={arm: runs[f"DEFAULT/{THREADS[0]} threads/{arm}"]["tokens"] for arm in ARMS},
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures; exit 1 when generations differ or the margin is too thin."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=THREADS[0], help=argparse.SUPPRESS)
    parser.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--model-dir", type=Path, default=None, help="model files to check (default: committed)"
    )
    parser.add_argument(
        "--dtype", default=None, help="precision to generate in (default: the demo's, float64)"
    )
    args = parser.parse_args(argv)
    if args.worker is not None:
        sys.path.insert(0, str(_HERE))
        from build_model import MODEL_DIR

        report = _worker(
            args.worker, args.threads, args.reference, args.model_dir or MODEL_DIR, args.dtype
        )
        print(canonical_json(report))
        return 0
    margins = measure(model_dir=args.model_dir, dtype=args.dtype)
    print(canonical_json(margins.as_json()))
    return 0 if margins.identical and margins.ratio >= REQUIRED_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
