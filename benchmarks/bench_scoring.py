"""Parse + score throughput: sommelier_mlflow vs a straightforward pure-``json`` scorer.

Run: ``python benchmarks/bench_scoring.py [--n 100000]``. Both implementations
score the same synthetic generations in the same process; the script checks
they agree on every numerator and denominator before reporting speed.

A second table (``--formats`` runs only that one) decodes + scores the same
calls written in every output format, in ``calls`` mode, side by side: target
at most 1.5x the ``json`` format's time per format, with identical metrics.
``--decoders`` runs only the decoders' linearity table (pythonic at 16k, 160k
and 1.6M characters).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from sommelier_mlflow.toolcalls import (
    CALLS_METRIC_NAMES,
    METRIC_NAMES,
    compute_calls_metrics,
    compute_metrics,
    parse_tool_call,
    parse_tool_calls,
)
from sommelier_mlflow.toolcalls._decode_deepseek_v31 import decode_deepseek_v31
from sommelier_mlflow.toolcalls._decode_functiongemma import decode_functiongemma
from sommelier_mlflow.toolcalls._decode_gemma4 import decode_gemma4
from sommelier_mlflow.toolcalls._decode_glm45 import decode_glm45
from sommelier_mlflow.toolcalls._decode_harmony import decode_harmony
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_kimi_k2 import decode_kimi_k2
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_llama4 import decode_llama4_pythonic
from sommelier_mlflow.toolcalls._decode_mistral import decode_mistral
from sommelier_mlflow.toolcalls._decode_openai import decode_openai
from sommelier_mlflow.toolcalls._decode_phi4_mini import decode_phi4_mini_json
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._decode_qwen3_xml import decode_qwen3_xml
from sommelier_mlflow.toolcalls._decode_xlam import decode_xlam

TOOLS = ["get_weather", "convert_currency", "book_hotel", "search_flights", "create_event"]


def synthetic(n: int, seed: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """Model outputs with a realistic mix of exact, wrong and broken calls."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        gold = {
            "name": rng.choice(TOOLS),
            "arguments": {
                "city": rng.choice(["Paris", "Oslo", "Rome", "Lyon"]),
                "date": f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                "filters": {"max_price": rng.randint(50, 500), "tags": ["quiet", "view"][: i % 3]},
                "guests": rng.randint(1, 4),
            },
        }
        roll = rng.random()
        predicted = json.loads(json.dumps(gold))
        if roll < 0.55:
            text = json.dumps(predicted)
        elif roll < 0.7:
            predicted["arguments"]["guests"] += 1
            text = "Sure! " + json.dumps(predicted) + " Let me know."
        elif roll < 0.8:
            predicted["name"] = "lookup"
            text = json.dumps([predicted])
        elif roll < 0.9:
            text = json.dumps(predicted)[:-7]
        else:
            text = "I am not able to help with that request."
        rows.append((text, gold))
    return rows


# --- the straightforward baseline -------------------------------------------------


def _naive_parse(text: str) -> tuple[str, dict[str, Any] | None]:
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return "no_json", None
    depth, in_str, esc = 0, False, False
    end = -1
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                end = i + 1
                break
    if end < 0:
        return "invalid_json", None
    try:
        value = json.loads(text[start:end])
    except ValueError:
        return "invalid_json", None
    if isinstance(value, list):
        if len(value) != 1:
            return "invalid_shape", None
        value = value[0]
    if (
        not isinstance(value, dict)
        or set(value) != {"name", "arguments"}
        or not isinstance(value["name"], str)
        or not value["name"]
        or not isinstance(value["arguments"], dict)
    ):
        return "invalid_shape", None
    return "ok", value


def _naive_flatten(value: Any, path: str = "") -> dict[str, str]:
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for key, child in value.items():
            out.update(_naive_flatten(child, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, child in enumerate(value):
            out.update(_naive_flatten(child, f"{path}[{index}]"))
        return out
    return {path or "<root>": json.dumps(value, sort_keys=True, separators=(",", ":"))}


def naive_score(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[int, int]]:
    """Each metric on its own, as a first implementation would write it.

    The text is parsed once with ``json``; every argument-level metric then
    flattens the arguments it needs again (the issue's baseline: pure ``json``,
    re-flattening per metric).
    """
    parsed = [(_naive_parse(text), gold) for text, gold in rows]
    n = len(parsed)
    valid = sum(1 for (status, _), _ in parsed if status == "ok")
    names = sum(1 for (s, c), g in parsed if s == "ok" and c and c["name"] == g["name"])
    exact = sum(
        1
        for (s, c), g in parsed
        if s == "ok" and c and _naive_flatten(c["arguments"]) == _naive_flatten(g["arguments"])
    )
    matched = predicted = gold_pairs = 0
    for (status, call), gold in parsed:
        gold_flat = _naive_flatten(gold["arguments"])
        gold_pairs += len(gold_flat)
        if status == "ok" and call:
            pred_flat = _naive_flatten(call["arguments"])
            predicted += len(pred_flat)
            matched += sum(1 for k, v in pred_flat.items() if gold_flat.get(k) == v)
    full = sum(
        1
        for (s, c), g in parsed
        if s == "ok"
        and c
        and c["name"] == g["name"]
        and _naive_flatten(c["arguments"]) == _naive_flatten(g["arguments"])
    )
    return {
        "valid_json_rate": (valid, n),
        "function_name_accuracy": (names, n),
        "argument_exact_match": (exact, n),
        "argument_f1": (2 * matched, predicted + gold_pairs),
        "full_call_exact_match": (full, n),
    }


def _parsed_records(rows: list[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    for text, gold in rows:
        result = parse_tool_call(text)
        yield {"parse_status": result.status, "parsed_call": result.call, "gold_call": gold}


def ours(rows: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[int, int]]:
    # Streamed: each text is parsed as the scorer reaches it, as the evaluation
    # layer does it (inside the batch, where the cycle collector is paused).
    metrics = compute_metrics(_parsed_records(rows))
    return {name: (metrics[name].numerator, metrics[name].denominator) for name in METRIC_NAMES}


def _best_of(func: Any, rows: Any, repeats: int) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = func(rows)
        best = min(best, time.perf_counter() - start)
    return best, result


def linearity() -> None:
    """Parse time of adversarial inputs at 1x and 10x size: linear means ~10x, not ~100x."""
    cases = {
        "unterminated escaped string": lambda n: '{"' + 'a\\"' * n,
        "deep nesting": lambda n: "[" * n + "]" * n,
        "long prose then call": lambda n: "x" * (10 * n) + '{"name": "f", "arguments": {}}',
    }
    print(f"{'adversarial input':<30}{'n=100k (s)':>12}{'n=1M (s)':>12}{'ratio':>8}")
    for label, make in cases.items():
        times = []
        for n in (100_000, 1_000_000):
            text = make(n)
            start = time.perf_counter()
            parse_tool_call(text)
            times.append(time.perf_counter() - start)
        print(f"{label:<30}{times[0]:>12.4f}{times[1]:>12.4f}{times[1] / times[0]:>8.1f}")


def decoder_linearity(repeats: int) -> None:
    """Decode time of a pythonic output holding a run of identifier characters.

    ``[f(a=xxx...)]``: the shortcut's split into call heads and keywords was
    quadratic in such a run (15 s at 16k characters), and every format paid
    it through the format hint. Linear means ~10x per step. CPU time, best of
    ``repeats``.
    """
    sizes = (16_000, 160_000, 1_600_000)
    print(f"{'pythonic, identifier run':<30}" + "".join(f"{f'n={n:,} (s)':>16}" for n in sizes))
    times = []
    for n in sizes:
        text = "[f(a=" + "x" * n + ")]"
        best = float("inf")
        for _ in range(repeats):
            start = time.process_time()
            decode_pythonic(text)
            best = min(best, time.process_time() - start)
        times.append(best)
    ratios = " ".join(f"{later / earlier:.1f}x" for earlier, later in itertools.pairwise(times))
    print(f"{'CPU s':<30}" + "".join(f"{t:>16.4f}" for t in times) + f"   steps {ratios}")


# --- the same calls in every output format --------------------------------------------


def _python_literal(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(k)}: {_python_literal(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_python_literal(item) for item in value) + "]"
    return repr(value) if isinstance(value, bool) or value is None else json.dumps(value)


def _pythonic(calls: list[dict[str, Any]]) -> str:
    return (
        "["
        + ", ".join(
            f"{c['name']}("
            + ", ".join(f"{k}={_python_literal(v)}" for k, v in c["arguments"].items())
            + ")"
            for c in calls
        )
        + "]"
    )


# Issue 30's formats: Kimi K2 and DeepSeek-V3.1 sections, Phi-4-mini, Llama 4, xLAM.
_DEEPSEEK = {
    word: f"<\uff5c{word.replace(' ', chr(0x2581))}\uff5c>"
    for word in (
        "tool calls begin",
        "tool call begin",
        "tool sep",
        "tool call end",
        "tool calls end",
    )
}


def _render_issue30(fmt: str, calls: list[dict[str, Any]]) -> str | None:
    """``calls`` in one of issue 30's formats, or ``None`` for another format."""
    if fmt == "kimi_k2":
        return (
            "<|tool_calls_section_begin|>"
            + "".join(
                f"<|tool_call_begin|>functions.{c['name']}:{i}<|tool_call_argument_begin|>"
                f"{json.dumps(c['arguments'])}<|tool_call_end|>"
                for i, c in enumerate(calls)
            )
            + "<|tool_calls_section_end|>"
        )
    if fmt == "deepseek_v31":
        d = _DEEPSEEK
        return (
            d["tool calls begin"]
            + "".join(
                f"{d['tool call begin']}{c['name']}{d['tool sep']}{json.dumps(c['arguments'])}"
                f"{d['tool call end']}"
                for c in calls
            )
            + d["tool calls end"]
        )
    if fmt == "phi4_mini_json":
        return "functools" + json.dumps(calls)
    if fmt == "llama4_pythonic":
        return "<|python_start|>" + _pythonic(calls) + "<|python_end|>"
    if fmt == "xlam":
        return json.dumps(calls)
    return None


def _render(fmt: str, calls: list[dict[str, Any]]) -> str:
    """``calls`` as the model family of ``fmt`` writes them."""
    issue30 = _render_issue30(fmt, calls)
    if issue30 is not None:
        return issue30
    if fmt == "json":
        return json.dumps(calls[0]) if len(calls) == 1 else json.dumps(calls)
    if fmt == "hermes":
        return "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)
    if fmt == "llama3_json":
        objects = (json.dumps({"name": c["name"], "parameters": c["arguments"]}) for c in calls)
        return "<|python_tag|>" + "; ".join(objects)
    if fmt == "mistral":
        return "[TOOL_CALLS] " + json.dumps(calls)
    if fmt == "mistral (v11 segments)":
        return "".join(f"[TOOL_CALLS]{c['name']}[ARGS]{json.dumps(c['arguments'])}" for c in calls)
    if fmt == "pythonic":
        return _pythonic(calls)
    if fmt in _RENDERERS:
        return _RENDERERS[fmt](calls)
    items = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for i, c in enumerate(calls)
    ]
    return json.dumps({"tool_calls": items})


def _bare(value: Any) -> str:
    """A value as the XML-style formats write it: strings as they are, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _gemma_value(value: Any, quote: str) -> str:
    """A value in the Gemma family's syntax: delimited strings, bare keys and scalars."""
    if isinstance(value, str):
        return f"{quote}{value}{quote}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma_value(v, quote)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma_value(item, quote) for item in value) + "]"
    return json.dumps(value)


def _qwen3_xml(calls: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"<tool_call>\n<function={c['name']}>\n"
        + "".join(f"<parameter={k}>\n{_bare(v)}\n</parameter>\n" for k, v in c["arguments"].items())
        + "</function>\n</tool_call>"
        for c in calls
    )


def _glm45(calls: list[dict[str, Any]]) -> str:
    return "".join(
        f"<tool_call>{c['name']}\n"
        + "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{_bare(v)}</arg_value>\n"
            for k, v in c["arguments"].items()
        )
        + "</tool_call>"
        for c in calls
    )


def _harmony(calls: list[dict[str, Any]]) -> str:
    thought = "<|channel|>analysis<|message|>The user asks for a booking.<|end|>"
    return thought + "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{c['name']} <|constrain|>json"
        f"<|message|>{json.dumps(c['arguments'])}<|call|>"
        for c in calls
    )


def _gemma(calls: list[dict[str, Any]], open_tag: str, close_tag: str, quote: str) -> str:
    return "".join(
        f"{open_tag}call:{c['name']}{_gemma_value(c['arguments'], quote)}{close_tag}" for c in calls
    )


_RENDERERS: dict[str, Any] = {
    "qwen3_xml": _qwen3_xml,
    "harmony": _harmony,
    "gemma4": partial(_gemma, open_tag="<|tool_call>", close_tag="<tool_call|>", quote='<|"|>'),
    "functiongemma": partial(
        _gemma, open_tag="<start_function_call>", close_tag="<end_function_call>", quote="<escape>"
    ),
    "glm45": _glm45,
}

#: The tools the synthetic calls name (and ``lookup``, the wrong name some outputs use), so
#: that qwen3_xml and glm45 type every bare value as the JSON formats read it.
BENCH_TOOLS = [
    {
        "name": name,
        "parameters": {
            "city": {"type": "str"},
            "date": {"type": "str"},
            "filters": {"type": "dict"},
            "guests": {"type": "int"},
        },
    }
    for name in [*TOOLS, "lookup"]
]

DECODERS: dict[str, Any] = {
    "json": parse_tool_calls,
    "hermes": decode_hermes,
    "llama3_json": decode_llama3_json,
    "mistral": decode_mistral,
    "mistral (v11 segments)": decode_mistral,
    "pythonic": decode_pythonic,
    "openai": decode_openai,
    "qwen3_xml": partial(decode_qwen3_xml, tools=BENCH_TOOLS),
    "harmony": decode_harmony,
    "gemma4": decode_gemma4,
    "functiongemma": decode_functiongemma,
    "glm45": partial(decode_glm45, tools=BENCH_TOOLS),
}
DECODERS.update(
    {
        "kimi_k2": decode_kimi_k2,
        "deepseek_v31": decode_deepseek_v31,
        "phi4_mini_json": decode_phi4_mini_json,
        "llama4_pythonic": decode_llama4_pythonic,
        "xlam": decode_xlam,
    }
)


def format_rows(n: int, seed: int = 7) -> dict[str, list[tuple[str, list[dict[str, Any]]]]]:
    """The outcome mix of :func:`synthetic`, as the same calls written in every format.

    55% exact calls, 15% a wrong argument, 10% a wrong name, 10% truncated
    outputs (the last 7 characters cut), 10% prose refusals, with one or two
    calls per answer so that every format's separator is exercised.
    """
    rng = random.Random(seed)
    base = synthetic(n, seed)
    rows: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {fmt: [] for fmt in DECODERS}
    for index in range(n):
        gold = [base[index][1]] + ([base[(index + 1) % n][1]] if index % 4 == 0 else [])
        predicted = json.loads(json.dumps(gold))
        roll = rng.random()
        if 0.55 <= roll < 0.7:
            predicted[0]["arguments"]["guests"] += 1
        elif 0.7 <= roll < 0.8:
            predicted[0]["name"] = "lookup"
        for fmt in DECODERS:
            if roll >= 0.9:
                text = "I am not able to help with that request."
            else:
                text = _render(fmt, predicted)
                if 0.8 <= roll < 0.9:
                    text = text[:-7]
            rows[fmt].append((text, gold))
    return rows


def decode_and_score(
    decode: Any, rows: list[tuple[str, list[dict[str, Any]]]]
) -> dict[str, tuple[int, int]]:
    """``calls`` mode on one format's texts, each decoded as the scorer reaches it."""
    records = (
        {"parse_status": result.status, "parsed_calls": result.calls, "gold_calls": gold}
        for text, gold in rows
        for result in (decode(text),)
    )
    metrics = compute_calls_metrics(records)
    return {
        name: (metrics[name].numerator, metrics[name].denominator) for name in CALLS_METRIC_NAMES
    }


def formats(n: int, repeats: int) -> None:
    """Decode + score the same calls in every format; each format's time against ``json``."""
    rows = format_rows(n)
    results: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):  # interleaved, so a load change hits every format alike
        for fmt, decode in DECODERS.items():
            start = time.process_time()  # CPU time: the machine may be shared
            metrics = decode_and_score(decode, rows[fmt])
            seconds = time.process_time() - start
            best = min(seconds, results.get(fmt, (float("inf"), None))[0])
            results[fmt] = (best, metrics)
    json_seconds, json_metrics = results["json"]
    print(f"records per format: {n:,} (calls mode, decode + score, best of {repeats})")
    print(f"{'output format':<26}{'CPU s':>10}{'records/s':>14}{'vs json':>10}")
    for fmt, (seconds, metrics) in results.items():
        assert metrics == json_metrics, (fmt, metrics, json_metrics)
        print(f"{fmt:<26}{seconds:>10.3f}{n / seconds:>14,.0f}{seconds / json_seconds:>9.2f}x")
    print("identical numerators/denominators in every format (target: each <= 1.5x json)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--formats", action="store_true", help="only the per-format table")
    parser.add_argument(
        "--decoders", action="store_true", help="only the decoders' linearity table"
    )
    args = parser.parse_args()
    if args.formats:
        formats(args.n, args.repeats)
        return
    if args.decoders:
        decoder_linearity(args.repeats)
        return
    rows = synthetic(args.n)
    t_naive, r_naive = _best_of(naive_score, rows, args.repeats)
    t_ours, r_ours = _best_of(ours, rows, args.repeats)
    assert r_naive == r_ours, (r_naive, r_ours)
    print(f"records: {args.n:,} (best of {args.repeats})")
    print(f"{'implementation':<34}{'seconds':>10}{'records/s':>14}")
    print(f"{'pure json, re-flatten per metric':<34}{t_naive:>10.3f}{args.n / t_naive:>14,.0f}")
    print(f"{'sommelier_mlflow':<34}{t_ours:>10.3f}{args.n / t_ours:>14,.0f}")
    print(f"speed-up: {t_naive / t_ours:.2f}x (identical numerators/denominators)")
    print()
    linearity()
    decoder_linearity(args.repeats)
    print()
    formats(args.n, args.repeats)


if __name__ == "__main__":
    main()
