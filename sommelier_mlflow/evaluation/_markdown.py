"""Markdown rendering of a comparison report.

The Markdown is a view, never a second source of numbers: it is a pure
function of the comparison JSON and prints only values the JSON holds (rounded
for reading, with the exact numerator/denominator beside every rate), so the
two files cannot tell different stories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_delta", "format_metric", "format_p_value", "render_comparison_markdown"]


def format_metric(metric: Mapping[str, Any]) -> str:
    """``0.7500 (3/4)``: the rate and the exact counts it came from."""
    return f"{metric['value']:.4f} ({metric['numerator']}/{metric['denominator']})"


def format_delta(value: float) -> str:
    """A signed difference, ``+0.2500`` or ``-0.1250``."""
    return f"{value:+.4f}"


def format_p_value(p_value: float) -> str:
    """An exact p-value to four significant digits."""
    return f"{p_value:.4g}"


def _interval(entry: Mapping[str, Any]) -> str:
    return f"[{format_delta(entry['lower'])}, {format_delta(entry['upper'])}]"


def _percent(confidence: float) -> str:
    return f"{confidence * 100:g}%"


def _revision(value: str | None) -> str:
    return f"`{value}`" if value is not None else "unpinned"


def _bootstrap_line(settings: Mapping[str, Any]) -> str:
    return (
        f"{settings['method']} (quantiles: {settings['quantile_method']}), "
        f"{settings['resamples']} resamples, {_percent(settings['confidence'])} confidence, "
        f"seed {settings['seed']}"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def _identity_lines(report: Mapping[str, Any]) -> list[str]:
    identity = report["identity"]
    model = identity["model_identity"]
    decoding = identity["decoding"]
    adapter = report["runs"]["adapter"]["adapter"]
    runs = report["runs"]
    return [
        "## Identity (identical for both arms; checked by the gate)",
        "",
        f"- Base model: `{model['base_model']}` (revision {_revision(model['base_revision'])})",
        f"- Tokenizer: `{model['tokenizer']}` (revision {_revision(model['tokenizer_revision'])})",
        f"- Adapter: `{adapter['source']}` (sha256 `{adapter['sha256']}`)",
        f"- Test split sha256: `{identity['test_split_sha256']}`",
        f"- Parser: `{identity['parser_version']}`",
        f"- Decoding: temperature {decoding['temperature']}, do_sample "
        f"{str(decoding['do_sample']).lower()}, max_new_tokens {decoding['max_new_tokens']}, "
        f"batch_size {decoding['batch_size']}",
        f"- Slices: {', '.join(identity['slices'])}",
        f"- Base report sha256: `{runs['base']['report_sha256']}`",
        f"- Adapter report sha256: `{runs['adapter']['report_sha256']}`",
        f"- Delta intervals: {_bootstrap_line(report['bootstrap'])} "
        "(each slice derives its own seed, shown below)",
        "",
    ]


def _slice_lines(name: str, entry: Mapping[str, Any], metric_names: Sequence[str]) -> list[str]:
    bootstrap = entry["bootstrap"]
    mcnemar = entry["mcnemar"]
    rows = [
        [
            metric,
            format_metric(entry["base"][metric]),
            format_metric(entry["adapter"][metric]),
            format_delta(entry["delta"][metric]["value"]),
            _interval(entry["delta"][metric]),
        ]
        for metric in metric_names
    ]
    lines = [f"### {name} ({entry['examples']} examples)", ""]
    lines += _table(
        [
            "metric",
            "base",
            "adapter",
            "delta (adapter - base)",
            f"{_percent(bootstrap['confidence'])} interval",
        ],
        rows,
    )
    lines += [
        "",
        f"Delta bootstrap: seed {bootstrap['seed']}, {bootstrap['resamples']} resamples over "
        f"n = {bootstrap['n']} paired examples.",
        "",
        f"McNemar on {mcnemar['metric']} ({mcnemar['method']}): b = {mcnemar['b']} "
        f"(base right, adapter wrong), c = {mcnemar['c']} (base wrong, adapter right), "
        f"n = {mcnemar['n']}, p = {format_p_value(mcnemar['p_value'])}.",
        "",
    ]
    return lines


def _primary_gap_lines(
    model_kind: str, language: str, gap: Mapping[str, Any], metric_names: Sequence[str]
) -> list[str]:
    root = gap["root_language"]
    coverage = gap["coverage"]
    bootstrap = gap["bootstrap"]
    lines = [
        f"### {model_kind}: {language} - {root}",
        "",
        f"{gap['pairs']} matched pairs. Coverage: {language} "
        f"{coverage['paired_targets']}/{coverage['target_rows']} = {coverage['target']:.4f}, "
        f"{root} {coverage['paired_roots']}/{coverage['root_rows']} = {coverage['root']:.4f}; "
        f"translated rows without an evaluated root: {coverage['unmatched_targets']}. "
        f"Pair set sha256 `{gap['pair_set_sha256']}`.",
        f"Bootstrap: {_bootstrap_line(bootstrap)}, n = {bootstrap['n']}.",
        "",
    ]
    rows = [
        [
            metric,
            format_metric(gap["root_metrics"][metric]),
            format_metric(gap["target_metrics"][metric]),
            format_delta(gap["gaps"][metric]["value"]),
            _interval(gap["gaps"][metric]),
        ]
        for metric in metric_names
    ]
    lines += _table(
        [
            "metric",
            f"root ({root}, pairs)",
            f"target ({language}, pairs)",
            f"gap ({language} - {root})",
            f"{_percent(bootstrap['confidence'])} interval",
        ],
        rows,
    )
    lines.append("")
    return lines


def _marginal_lines(
    model_kind: str, language: str, entry: Mapping[str, Any], metric_names: Sequence[str]
) -> list[str]:
    root = entry["root_language"]
    rows = [
        [
            metric,
            format_metric(entry["metrics"][metric]["root"]),
            format_metric(entry["metrics"][metric]["target"]),
            format_delta(entry["metrics"][metric]["value"]),
        ]
        for metric in metric_names
    ]
    lines = [f"### {model_kind}: {language} - {root} (full slices)", ""]
    lines += _table(
        [
            "metric",
            f"root slice ({root})",
            f"target slice ({language})",
            f"difference ({language} - {root})",
        ],
        rows,
    )
    lines.append("")
    return lines


def render_comparison_markdown(report: Mapping[str, Any]) -> str:
    """Render ``comparison_report.md`` from the comparison JSON document.

    Args:
        report: A document produced by
            :func:`~sommelier_mlflow.evaluation.compare_reports`.

    Returns:
        The Markdown text, ending in a newline.
    """
    metric_names = report["identity"]["metric_names"]
    slices = report["slices"]
    order = ["overall", *report["identity"]["slices"]]
    lines = ["# Tool-call comparison: adapter vs base", ""]
    lines += _identity_lines(report)
    lines += ["## Adapter minus base, per slice", ""]
    for name in order:
        lines += _slice_lines(name, slices[name], metric_names)

    lines += [
        "## Language gaps - primary: matched pairs (target minus root, paired bootstrap)",
        "",
    ]
    gaps = report["gaps"]
    if not gaps["base"]:
        lines += ["No translated rows: no language gap was measured.", ""]
    for model_kind in ("base", "adapter"):
        for language in sorted(gaps[model_kind]):
            lines += _primary_gap_lines(
                model_kind, language, gaps[model_kind][language], metric_names
            )

    marginal = report["marginal_full_slices"]
    lines += [
        "## Language gaps - marginal_full_slices (descriptive, no interval)",
        "",
        f"> {marginal['note']}",
        "",
    ]
    for model_kind in ("base", "adapter"):
        for language in sorted(marginal[model_kind]):
            lines += _marginal_lines(
                model_kind, language, marginal[model_kind][language], metric_names
            )
    return "\n".join(lines).rstrip("\n") + "\n"
