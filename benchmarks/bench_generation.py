"""Generation throughput: batched vs one prompt at a time, same model, same prompts.

Default: builds the seeded tiny Llama used by the tests (no download), formats
64 tool-calling prompts with its chat template (about 260 tokens each), and
times ``run_generation`` end to end (tokenise, generate, parse, append + fsync
per batch, final atomic rewrite) at several batch sizes, interleaving the
configurations over several rounds so machine noise hits them alike.

    python benchmarks/bench_generation.py [--rounds 3] [--threads 1,2]
        [--max-new-tokens 32] [--batch-sizes 1,8,32]

With ``--shape``: a model of a real architecture (``benchmarks/shaped_models.py``,
or ``demo`` for the offline demo's committed model), both arms (base, and its
LoRA adapter), the demo's formatted train-split prompts, every completion
forced to exactly ``--max-new-tokens`` tokens, through each generation mode
(``hf batched``, ``hf one at a time``; ``vllm`` when vLLM is installed: run
it with ``.venv-vllm``'s python), side by side: prompts/s, tokens/s and the
ratio to ``hf batched`` per arm. Model loading is not timed; each backend
gets a short untimed warm-up. For the fair comparison run every mode on one
thread (``--threads 1``; vLLM's CPU engine: ``VLLM_CPU_OMP_THREADS_BIND=0``).

    python benchmarks/bench_generation.py --shape qwen2.5-0.5b --prompts 200
        [--max-new-tokens 128] [--hf-batch-size 16] [--one-at-a-time-prompts N] [--threads 2]
        [--model-dir DIR] [--modes "hf batched,hf one at a time,vllm"] [--json OUT]
        [--max-model-len 4096]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "generation")]

from generation_helpers import corpus, make_examples  # noqa: E402

from sommelier_mlflow._json import atomic_write_json, loads  # noqa: E402
from sommelier_mlflow.data import Decoding, TestExample, format_examples, read_test_split  # noqa: E402
from sommelier_mlflow.generation import (  # noqa: E402
    BackendRequest,
    Completion,
    HFGenerator,
    backend_names,
    create_backend,
    run_generation,
)
from tests.support.tiny_models import build_tiny_llama, build_tokenizer  # noqa: E402
from tests.support.vllm_server import (  # noqa: E402
    ADAPTER_NAME,
    BASE_NAME,
    VllmServer,
    vllm_python,
)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _completions(out: Path) -> dict[str, str]:
    texts = {}
    for path in sorted((out / "generations").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            row = loads(line)
            texts[row["example_id"]] = row["raw_text"]
    return texts


# -- real shapes: both arms, every generation mode -------------------------------------


@dataclass(frozen=True)
class Mode:
    """One way of generating: a registered backend, its options, prompts per call."""

    backend: str
    batch_size: int | None  # None: every prompt in one call (an engine that batches itself)
    options: Mapping[str, str] = field(default_factory=dict)
    #: Only the first N prompts (a slow mode on a subset: rates stay comparable, totals do not).
    prompts: int | None = None


def fixed_length_options(backend: str, new_tokens: int) -> dict[str, str]:
    """The backend's option that makes every completion exactly ``new_tokens`` long.

    Random weights emit end-of-sequence whenever the argmax lands on it, so
    without this the work per prompt would depend on chance. A backend added
    to :func:`default_modes` adds its own spelling here.
    """
    if backend == "hf":
        return {"min_new_tokens": str(new_tokens)}
    if backend in ("vllm", "server"):  # vLLM's min_tokens, in process or in the request
        return {"min_tokens": str(new_tokens)}
    raise SystemExit(f"no fixed-length option known for backend {backend!r}: add it here")


def default_modes(
    hf_batch_size: int,
    one_at_a_time_prompts: int | None = None,
    vllm_max_model_len: int | None = None,
) -> dict[str, Mode]:
    """The modes the benchmark compares; those whose backend is not installed are skipped.

    ``vllm`` is the in-process engine (``--backend vllm``), given every prompt
    in one call as ``main`` does (it batches continuously itself), on an
    engine with LoRA support for both arms, as ``main`` builds it, in float32
    as ``hf`` computes on a CPU: vLLM's ``auto`` casts a float32 checkpoint
    to bfloat16, which would compare two precisions. ``server``
    is vLLM's OpenAI server from ``.venv-vllm`` (:func:`served_modes` starts
    it, with LoRA, for both arms), every prompt in flight at once, one per
    request, so that the server's usage counts each completion's tokens.
    ``vllm_max_model_len`` bounds the engine's context: vLLM reserves KV room
    for one request of the model's full context, which for a 128K-context
    shape exceeds the CPU engine's room.
    """
    vllm_options = {"dtype": "float32"}
    if vllm_max_model_len is not None:
        vllm_options["max_model_len"] = str(vllm_max_model_len)
    return {
        "hf batched": Mode("hf", hf_batch_size),
        "hf one at a time": Mode("hf", 1, prompts=one_at_a_time_prompts),
        "vllm": Mode("vllm", None, options=vllm_options),
        "server": Mode("server", None),
    }


def available_modes(modes: Mapping[str, Mode]) -> dict[str, Mode]:
    """The modes whose backend can run here; each one left out is said on stderr, with why."""
    kept: dict[str, Mode] = {}
    for name, mode in modes.items():
        if mode.backend not in backend_names():
            print(f"skipped mode {name!r}: no backend {mode.backend!r} registered", file=sys.stderr)
        elif mode.backend == "vllm" and importlib.util.find_spec("vllm") is None:
            print(
                f"skipped mode {name!r}: vLLM is not installed in this Python "
                f"({sys.executable}); run with .venv-vllm's python (scripts/setup_vllm.sh)",
                file=sys.stderr,
            )
        elif mode.backend == "server" and vllm_python() is None:
            print(
                f"skipped mode {name!r}: no .venv-vllm to start vLLM's server from "
                "(set SOMMELIER_VLLM_VENV to one, or build it: bash scripts/setup_vllm.sh)",
                file=sys.stderr,
            )
        else:
            kept[name] = mode
    return kept


SERVER_KEY = "bench-generation-key"


def served_modes(
    modes: Mapping[str, Mode],
    model_dir: Path,
    adapter_dir: Path,
    prompts: int,
    stack: contextlib.ExitStack,
    log_dir: Path,
) -> dict[str, Mode]:
    """``modes`` with each ``server`` mode pointed at a vLLM server started here for both arms.

    The server (``.venv-vllm``, LoRA on, as the in-process engine has it)
    inherits ``VLLM_CPU_OMP_THREADS_BIND`` and ``VLLM_CPU_KVCACHE_SPACE`` (2 GiB
    when unset) from this process, so it gets the same cores and KV room as the
    in-process engine; it is stopped when ``stack`` closes.
    Starting it is not timed.
    """
    if not any(mode.backend == "server" for mode in modes.values()):
        return dict(modes)
    python = vllm_python()
    assert python is not None  # available_modes dropped the mode otherwise
    server = VllmServer(
        python,
        model_dir,
        adapter_dir,
        log_dir / "vllm-server.log",
        SERVER_KEY,
        kv_cache_gib=int(os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")),
        env={"VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind")},
    )
    started = time.perf_counter()
    server.start()
    stack.callback(server.stop)
    print(f"vLLM server ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    os.environ["OPENAI_API_KEY"] = SERVER_KEY
    options = {
        "base_url": server.url,
        "served_model": BASE_NAME,
        "served_adapter": ADAPTER_NAME,  # measure_arms drops it for the base arm
        "concurrency": str(prompts),  # one prompt per request: usage per completion
    }
    return {
        name: replace(mode, options={**options, **mode.options})
        if mode.backend == "server"
        else mode
        for name, mode in modes.items()
    }


def _served_counts(usage_log: Path) -> list[int]:
    """Each completion's token count from a served run's usage log (one prompt per request)."""
    counts = []
    for line in usage_log.read_bytes().splitlines():
        row = loads(line)
        if row["request_prompts"] != 1 or not row["request_usage"]:
            raise SystemExit(
                f"{usage_log}: a request of {row['request_prompts']} prompts or without usage; "
                "the per-completion check needs one prompt per request (concurrency >= prompts)"
            )
        counts.append(int(row["request_usage"]["completion_tokens"]))
    return counts


@dataclass
class Row:
    """One arm through one mode: what it cost and whether its texts match the reference."""

    arm: str
    mode: str
    batch_size: int
    prompts: int
    seconds: float
    completion_tokens: int
    same_text: int = 0
    vs_batched: float = 0.0

    @property
    def prompts_per_s(self) -> float:
        return self.prompts / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds


def _count_tokens(counts: list[int], batch: Sequence[Completion], _seconds: float) -> None:
    counts.extend(c.completion_tokens or 0 for c in batch)


def measure_arms(
    model_dir: Path,
    adapter_dir: Path,
    split: Sequence[TestExample],
    modes: Mapping[str, Mode],
    *,
    max_new_tokens: int,
    work_dir: Path,
    device: str | None = None,
    threads: int | None = None,
    arms: Sequence[str] = ("base", "adapter"),
    warm_up: int = 1,
) -> list[Row]:
    """Time ``run_generation`` for each arm through each mode, as the product generates.

    Each mode's backend is built once per arm (not timed), warmed up on
    ``warm_up`` prompts (8 tokens), then runs the whole split end to end (the runner
    sorts prompts by length and batches them as ``evaluate`` does). Every
    completion must have exactly ``max_new_tokens`` tokens, else the rates
    would compare different work. Backends with a ``close()`` are closed.
    """
    rows: list[Row] = []
    for arm in arms:
        loaded: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
        texts: dict[str, dict[str, str]] = {}
        try:
            for name, mode in modes.items():
                options = {**fixed_length_options(mode.backend, max_new_tokens), **mode.options}
                if arm != "adapter":  # the base arm asks the served base, as `main` does
                    options.pop("served_adapter", None)
                key = (mode.backend, tuple(sorted(options.items())))
                if key not in loaded:
                    loaded[key] = create_backend(
                        mode.backend,
                        BackendRequest(
                            model=str(model_dir),
                            adapter=str(adapter_dir) if arm == "adapter" else None,
                            device=device,
                            num_threads=threads,
                            options=options,
                        ),
                    )
                backend = loaded[key]
                examples = format_examples(split[: mode.prompts], backend.tokenizer)
                batch = mode.batch_size or len(examples)
                decoding = Decoding(max_new_tokens=max_new_tokens, batch_size=batch)
                kind: Any = arm
                run_generation(  # a few tokens: the first call's one-off costs, not the work
                    examples[:warm_up],
                    backend,
                    decoding=Decoding(max_new_tokens=min(8, max_new_tokens), batch_size=warm_up),
                    model_kind=kind,
                    out_dir=work_dir / f"warm-up {arm} {name}",
                    progress=False,
                )
                counts: list[int] = []
                out = work_dir / f"{arm} {name}"
                usage_log = work_dir / f"{arm} {name} usage.jsonl"
                if mode.backend == "server":
                    backend.record_usage_to(usage_log)
                started = time.perf_counter()
                run_generation(
                    examples,
                    backend,
                    decoding=decoding,
                    model_kind=kind,
                    out_dir=out,
                    progress=False,
                    on_batch=partial(_count_tokens, counts),
                )
                seconds = time.perf_counter() - started
                if mode.backend == "server":  # its completions carry no counts; its usage does
                    counts = _served_counts(usage_log)
                if counts != [max_new_tokens] * len(examples):
                    raise SystemExit(
                        f"{arm} {name}: completions of {sorted(set(counts))} tokens, not all "
                        f"{max_new_tokens}: the fixed-length option did not hold"
                    )
                texts[name] = _completions(out)
                rows.append(Row(arm, name, batch, len(examples), seconds, sum(counts)))
                print(  # kept in the log should a later mode fail
                    f"{arm} {name}: {len(examples)} prompts in {seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            for backend in loaded.values():
                close = getattr(backend, "close", None)
                if callable(close):
                    close()
        reference = texts[next(iter(modes))]
        arm_rows = [row for row in rows if row.arm == arm]
        batched = next((r for r in arm_rows if r.mode == "hf batched"), arm_rows[0])
        for row in arm_rows:
            row.same_text = sum(texts[row.mode].get(k) == v for k, v in reference.items())
            row.vs_batched = row.prompts_per_s / batched.prompts_per_s
    return rows


def print_rows(rows: Sequence[Row]) -> None:
    """The Markdown table of :func:`measure_arms` (texts compared with the first mode)."""
    print(
        "| arm | mode | batch | prompts | seconds | prompts/s | tokens/s | vs hf batched "
        "| same text |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.arm} | {r.mode} | {r.batch_size} | {r.prompts} | {r.seconds:.1f} "
            f"| {r.prompts_per_s:.3g} | {r.tokens_per_s:.3g} | {r.vs_batched:.2f}x "
            f"| {r.same_text}/{r.prompts} |"
        )


def demo_prompts(count: int) -> list[TestExample]:
    """The first ``count`` rows of the offline demo's train split (real tool schemas)."""
    from tests.support.vllm_server import build_demo_assets

    split = read_test_split(build_demo_assets().splits_dir / "train.jsonl")
    if count > len(split.examples):
        raise SystemExit(f"the demo's train split has {len(split.examples)} rows, not {count}")
    return list(split.examples[:count])


def shaped_main(args: argparse.Namespace) -> None:
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.shape == "demo":
            from tests.support.vllm_server import build_demo_assets

            demo = build_demo_assets()
            model_dir, adapter_dir = demo.base_model_dir, demo.adapter_dir
        else:
            model_dir = args.model_dir or root / "model"
            if not (model_dir / "config.json").is_file():
                from tests.support.scripts import load_script

                started = time.perf_counter()
                shapes = load_script("benchmarks/shaped_models.py")
                shapes.build_shaped_model(shapes.SHAPES[args.shape], model_dir, seed=0)
                print(f"built {args.shape} in {time.perf_counter() - started:.0f} s")
            adapter_dir = model_dir / "adapter"
        modes = default_modes(args.hf_batch_size, args.one_at_a_time_prompts, args.max_model_len)
        if args.modes:
            modes = {name: modes[name] for name in args.modes.split(",")}
        modes = available_modes(modes)
        with contextlib.ExitStack() as stack:
            modes = served_modes(modes, model_dir, adapter_dir, args.prompts, stack, root)
            rows = measure_arms(
                model_dir,
                adapter_dir,
                demo_prompts(args.prompts),
                modes,
                max_new_tokens=args.max_new_tokens,
                work_dir=root / "runs",
                device=args.device,
                threads=args.threads,
            )
    print(
        f"\n{args.shape}: {args.prompts} demo prompts x {args.max_new_tokens} new tokens, "
        f"both arms; torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"transformers {transformers.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n"
    )
    print_rows(rows)
    if args.json:
        atomic_write_json(
            args.json,
            {"shape": args.shape, "rows": [asdict(r) for r in rows]},
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=_ints, default=None, help="default 1,2 (tiny model)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 32 / 128")
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 8, 32])
    parser.add_argument("--shape", default=None, help="a shaped_models.py shape, or demo")
    parser.add_argument("--model-dir", type=Path, default=None, help="reuse a built shape")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument(
        "--one-at-a-time-prompts", type=int, default=None, help="hf one at a time on the first N"
    )
    parser.add_argument("--modes", default=None, help="comma-separated mode names")
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="the vllm mode's context (a 128K-context shape's full KV cache exceeds its room)",
    )
    parser.add_argument("--device", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    if args.shape is not None:
        # 128: the fixed output length the shapes are measured at; one thread count per run.
        args.max_new_tokens = args.max_new_tokens or 128
        args.threads = args.threads[0] if args.threads else None
        shaped_main(args)
        return
    args.max_new_tokens = args.max_new_tokens or 32
    args.threads = args.threads or [1, 2]

    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tokenizer = build_tokenizer(root / "tokenizer", corpus())
        model_dir = build_tiny_llama(root / "model", tokenizer, seed=0)
        examples = make_examples(tokenizer, 32)
        lengths = [
            len(tokenizer(e.prompt_text, add_special_tokens=False)["input_ids"]) for e in examples
        ]
        print(
            f"{len(examples)} prompts, {min(lengths)}-{max(lengths)} tokens "
            f"(mean {statistics.mean(lengths):.0f}); max_new_tokens={args.max_new_tokens}; "
            f"torch {torch.__version__}, transformers {transformers.__version__}"
        )
        for threads in args.threads:
            generator = HFGenerator(model_dir, num_threads=threads)
            generator.generate([examples[0].prompt_text or ""], max_new_tokens=4)  # warm-up
            rates: dict[int, list[float]] = {size: [] for size in args.batch_sizes}
            cpu_rates: dict[int, list[float]] = {size: [] for size in args.batch_sizes}
            outputs: dict[int, dict[str, str]] = {}
            for round_index in range(args.rounds):
                for size in args.batch_sizes:
                    out = root / f"out-{threads}-{size}-{round_index}"
                    decoding = Decoding(max_new_tokens=args.max_new_tokens, batch_size=size)
                    start, cpu_start = time.perf_counter(), time.process_time()
                    run_generation(
                        examples,
                        generator,
                        decoding=decoding,
                        model_kind="base",
                        out_dir=out,
                        progress=False,
                    )
                    rates[size].append(len(examples) / (time.perf_counter() - start))
                    cpu_rates[size].append(len(examples) / (time.process_time() - cpu_start))
                    outputs[size] = _completions(out)
            baseline = statistics.median(rates[args.batch_sizes[0]])
            print(f"\ntorch threads = {threads}, {args.rounds} rounds")
            print(
                "| batch size | examples/s (median) | min-max | speed-up "
                "| examples per CPU-s (median) | same text as bs=1 |"
            )
            print("|---:|---:|---:|---:|---:|---:|")
            reference = outputs[args.batch_sizes[0]]
            for size in args.batch_sizes:
                median = statistics.median(rates[size])
                same = sum(outputs[size][key] == text for key, text in reference.items())
                print(
                    f"| {size} | {median:.1f} | {min(rates[size]):.1f}-{max(rates[size]):.1f} "
                    f"| {median / baseline:.2f}x | {statistics.median(cpu_rates[size]):.1f} "
                    f"| {same}/{len(reference)} |"
                )


if __name__ == "__main__":
    main()
