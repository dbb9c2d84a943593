"""Markdown rendering of a comparison report.

The Markdown is a view, never a second source of numbers: it is a pure
function of the typed comparison report and prints only values its JSON holds
(rounded for reading, with the exact numerator/denominator beside every rate),
so the two files cannot tell different stories. Values that come from the
user's data (slice values, languages, field names, model ids, claim ids) are
escaped (:func:`_text`, :func:`_code`): a newline, ``#`` heading, ``|`` or
``<script>`` in a slice value must not become Markdown or HTML.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.evaluation._claims import ClaimDecision, RegistrationRecord, Verdict
from sommelier_mlflow.evaluation._comparison_report import (
    MARGINAL_GAP_NOTE,
    ComparisonReport,
    LanguageGap,
    MarginalGap,
    SliceComparison,
)
from sommelier_mlflow.evaluation._stats import (
    BOOTSTRAP_METHOD,
    QUANTILE_METHOD,
    PairedBootstrapResult,
)
from sommelier_mlflow.evaluation._weighted import weighted_markdown_lines
from sommelier_mlflow.toolcalls import (
    DEFAULT_MODE,
    MetricValue,
    calls_in_reasoning_message,
    find_scoring_mode,
    markdown_table,
)

__all__ = ["format_metric", "format_delta", "format_p_value", "render_comparison_markdown"]


def format_metric(metric: MetricValue) -> str:
    """``0.7500 (3/4)``: the rate and the exact counts it came from."""
    return f"{metric.value:.4f} ({metric.numerator}/{metric.denominator})"


def format_delta(value: float) -> str:
    """A signed difference, ``+0.2500`` or ``-0.1250``."""
    return f"{value:+.4f}"


def format_p_value(p_value: float) -> str:
    """An exact p-value to four significant digits."""
    return f"{p_value:.4g}"


def _clean(value: float) -> float:
    return float(value) + 0.0


def _interval_rows(
    result: PairedBootstrapResult,
    low: Mapping[str, MetricValue],
    high: Mapping[str, MetricValue],
    metric_names: Sequence[str],
) -> list[list[str]]:
    """Table rows of ``high - low`` per metric: both values, the estimate, the interval.

    Deltas and language gaps are both such differences and print alike.
    """
    rows = []
    for metric in metric_names:
        interval = result.interval(metric)
        rows.append(
            [
                metric,
                format_metric(low[metric]),
                format_metric(high[metric]),
                format_delta(_clean(interval.estimate)),
                f"[{format_delta(_clean(interval.lower))}, {format_delta(_clean(interval.upper))}]",
            ]
        )
    return rows


def _percent(confidence: float) -> str:
    return f"{confidence * 100:g}%"


def _revision(value: str | None) -> str:
    return _code(value) if value is not None else "unpinned"


def _bootstrap_line(
    method: str, quantile_method: str, resamples: int, confidence: float, seed: int
) -> str:
    return (
        f"{method} (quantiles: {quantile_method}), "
        f"{resamples} resamples, {_percent(confidence)} confidence, seed {seed}"
    )


#: Characters that start Markdown markup inside a line (emphasis, links, code, tables).
_MARKUP = re.compile(r"([\\`*_\[\]|])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


def _text(value: object) -> str:
    """``value`` as literal text on one line: no heading, table cell break, link or HTML."""
    one_line = _LINE_BREAKS.sub(" ", str(value))
    html_safe = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKUP.sub(r"\\\1", html_safe)


def _code(value: object) -> str:
    """``value`` as one inline code span, whatever backticks it holds."""
    text = _LINE_BREAKS.sub(" ", str(value)).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


_table = markdown_table  # the one table layout, shared with the scoring modes' sections


def _scoring_lines(report: ComparisonReport) -> list[str]:
    # Shown only when not the spec's defaults, like the report fields they come from.
    identity = report.identity
    lines = []
    if identity.scoring != DEFAULT_MODE:
        lines.append(f"- Scoring: {_code(identity.scoring)}")
    if identity.slice_by:
        lines.append(
            f"- Field slices (by {', '.join(map(_text, identity.slice_by))}): "
            f"{', '.join(map(_text, identity.field_slices))}"
        )
    return lines


def _identity_lines(report: ComparisonReport) -> list[str]:
    identity = report.identity
    model = identity.model_identity
    decoding = identity.decoding
    adapter = report.runs["adapter"].adapter
    adapter_line = (
        f"- Adapter: {_code(adapter.source)} (sha256 {_code(adapter.sha256)})"
        if adapter is not None
        else "- Adapter: none"
    )
    settings = report.bootstrap
    return [
        "## Identity (identical for both arms; checked by the gate)",
        "",
        f"- Base model: {_code(model.base_model)} (revision {_revision(model.base_revision)})",
        f"- Tokenizer: {_code(model.tokenizer)} (revision {_revision(model.tokenizer_revision)})",
        adapter_line,
        f"- Test split sha256: `{identity.test_split_sha256}`",
        f"- Parser: `{identity.parser_version}`",
        f"- Decoding: temperature {decoding.temperature}, do_sample "
        f"{str(decoding.do_sample).lower()}, max_new_tokens {decoding.max_new_tokens}, "
        f"batch_size {decoding.batch_size}",
        f"- Slices: {', '.join(map(_text, identity.languages))}",
        *_scoring_lines(report),
        f"- Base report sha256: `{report.runs['base'].report_sha256}`",
        f"- Adapter report sha256: `{report.runs['adapter'].report_sha256}`",
        "- Delta intervals: "
        + _bootstrap_line(
            BOOTSTRAP_METHOD,
            QUANTILE_METHOD,
            settings.resamples,
            float(settings.confidence),
            settings.seed,
        )
        + " (each slice derives its own seed, shown below)",
        "",
    ]


def _format_warning_lines(report: ComparisonReport) -> list[str]:
    """Each arm's output-format warning, hint and reasoning note, first in the file, or nothing."""
    items = []
    for kind, run in report.runs.items():
        if run.format_mismatch is not None:
            items.append(f"- **{kind} arm:** {_text(run.format_mismatch.message)}.")
        if run.format_hint is not None:
            items.append(f"- {kind} arm hint: {_text(run.format_hint)}")
        if run.calls_in_reasoning:
            note = calls_in_reasoning_message(run.calls_in_reasoning, run.examples)
            items.append(f"- {kind} arm note: {_text(note)}.")
    if not items:
        return []
    return ["## Output format warnings", "", *items, ""]


def _slice_lines(
    name: str,
    entry: SliceComparison,
    metric_names: Sequence[str],
    not_meaningful: Mapping[str, str],
) -> list[str]:
    delta = entry.delta
    mcnemar = entry.mcnemar
    rows = _interval_rows(delta, entry.base, entry.adapter, metric_names)
    lines = [f"### {_text(name)} ({entry.examples} examples)", ""]
    for kind, why in not_meaningful.items():
        lines += [f"**{kind} arm: {_text(why)}** (see the output format warnings).", ""]
    lines += _table(
        [
            "metric",
            "base",
            "adapter",
            "delta (adapter - base)",
            f"{_percent(delta.confidence)} interval",
        ],
        rows,
    )
    # A conversation split resamples and tests whole conversations (written only then,
    # so single-turn reports keep their Markdown).
    units = "" if delta.clusters is None else f", resampling {delta.clusters} conversations"
    test = (
        "McNemar"
        if mcnemar.clusters is None
        else f"Sign-flip test over {mcnemar.clusters} conversations"
    )
    lines += [
        "",
        f"Delta bootstrap: seed {delta.seed}, {delta.resamples} resamples over "
        f"n = {delta.n} paired examples{units}.",
        "",
        f"{test} on {entry.mcnemar_metric} ({mcnemar.method}): b = {mcnemar.b} "
        f"(base right, adapter wrong), c = {mcnemar.c} (base wrong, adapter right), "
        f"n = {mcnemar.n}, p = {format_p_value(mcnemar.p_value)}.",
        "",
    ]
    return lines


def _primary_gap_lines(
    model_kind: str, language: str, gap: LanguageGap, metric_names: Sequence[str]
) -> list[str]:
    root, language = _text(gap.root_language), _text(language)
    coverage = gap.coverage
    bootstrap = gap.bootstrap
    target_rate = coverage.paired_targets / coverage.target_rows
    root_rate = coverage.paired_roots / coverage.root_rows
    lines = [
        f"### {model_kind}: {language} - {root}",
        "",
        f"{gap.pairs} matched pairs. Coverage: {language} "
        f"{coverage.paired_targets}/{coverage.target_rows} = {target_rate:.4f}, "
        f"{root} {coverage.paired_roots}/{coverage.root_rows} = {root_rate:.4f}; "
        f"translated rows without an evaluated root: {coverage.unmatched_targets}. "
        f"Pair set sha256 `{gap.pair_set_sha256}`.",
        "Bootstrap: "
        + _bootstrap_line(
            bootstrap.method,
            bootstrap.quantile_method,
            bootstrap.resamples,
            bootstrap.confidence,
            bootstrap.seed,
        )
        + f", n = {bootstrap.n}.",
        "",
    ]
    rows = _interval_rows(bootstrap, gap.root_metrics, gap.target_metrics, metric_names)
    lines += _table(
        [
            "metric",
            f"root ({root}, pairs)",
            f"target ({language}, pairs)",
            f"gap ({language} - {root})",
            f"{_percent(bootstrap.confidence)} interval",
        ],
        rows,
    )
    lines.append("")
    return lines


def _marginal_lines(
    model_kind: str, language: str, entry: MarginalGap, metric_names: Sequence[str]
) -> list[str]:
    root, language = _text(entry.root_language), _text(language)
    rows = [
        [
            metric,
            format_metric(entry.root[metric]),
            format_metric(entry.target[metric]),
            format_delta(entry.value(metric)),
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


def _timestamp(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "an unknown time"
    moment = datetime.fromtimestamp(milliseconds / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _registration_line(registration: RegistrationRecord) -> str:
    if not registration.checked:
        return "- Preregistration: not checked (no MLflow tracking store was consulted)."
    if not registration.registered:
        return "- Preregistration: **none**: this claims file was never registered."
    line = (
        f"- Preregistration: run `{registration.run_id}` at "
        f"{_timestamp(registration.registered_at_ms)}"
    )
    before = registration.registered_before_arms
    if before is None:
        return line + " (the arms' runs are unknown, so the order was not checked)."
    order = "**before**" if before else "**after** (not a preregistration)"
    started = _timestamp(registration.arms_started_at_ms)
    return f"{line}, {order} the arms' runs started ({started})."


def _claim_text(decision: ClaimDecision) -> str:
    kind = "superiority" if decision.claim.kind == "superiority" else "non-inferiority"
    return f"{kind}: delta > {format_delta(decision.claim.threshold)}"


def _verdict_lines(verdict: Verdict) -> list[str]:
    decisions = verdict.decisions
    first = decisions[0]
    lines = [
        f"## Preregistered claims: verdict {verdict.verdict.replace('_', ' ').upper()}",
        "",
        f"- Claims file sha256: `{verdict.claims_sha256}`",
        f"- Method: `{verdict.method}`: each claim's one-sided p-value is "
        "(1 + draws at or below its threshold) / (resamples + 1), over the same "
        f"{first.resamples} bootstrap draws as its slice's delta interval; Holm's step-down "
        f"over the {len(decisions)} claims at alpha {verdict.alpha:g}.",
        _registration_line(verdict.registration),
        "",
    ]
    rows = [
        [
            _code(decision.claim.id),
            _text(decision.claim.slice),
            decision.claim.metric,
            _claim_text(decision),
            format_delta(decision.estimate),
            f"[{format_delta(decision.lower)}, {format_delta(decision.upper)}]",
            format_p_value(decision.p_value),
            format_p_value(decision.adjusted_p_value),
            decision.decision,
        ]
        for decision in decisions
    ]
    header = ["id", "slice", "metric", "claim", "estimate"]
    header += [f"{_percent(first.confidence)} interval", "p (one-sided)", "Holm-adjusted p"]
    lines += _table([*header, "decision"], rows)
    lines.append("")
    return lines


def render_comparison_markdown(report: ComparisonReport) -> str:
    """Render ``comparison_report.md`` from the comparison report.

    Args:
        report: A report produced by
            :func:`~sommelier_mlflow.evaluation.compare_reports` or read back.

    Returns:
        The Markdown text, ending in a newline.
    """
    metric_names = report.metric_names
    lines = ["# Tool-call comparison: adapter vs base", ""]
    lines += _format_warning_lines(report)
    lines += _identity_lines(report)
    if report.claims is not None:
        lines += _verdict_lines(report.claims)
    lines += ["## Adapter minus base, per slice", ""]
    for name in (OVERALL, *report.identity.languages, *report.identity.field_slices):
        lines += _slice_lines(name, report.slices[name], metric_names, report.not_meaningful(name))
    mode = find_scoring_mode(report.identity.scoring)
    if mode is not None and mode.markdown_lines is not None:
        lines += mode.markdown_lines(report)  # the mode's own summing-up (BFCL's aggregation)
    lines += weighted_markdown_lines(report)  # the mode's weighted overall, with its interval

    lines += [
        "## Language gaps - primary: matched pairs (target minus root, paired bootstrap)",
        "",
    ]
    if not report.gaps["base"]:
        lines += ["No translated rows: no language gap was measured.", ""]
    for model_kind in ("base", "adapter"):
        for language in sorted(report.gaps[model_kind]):
            lines += _primary_gap_lines(
                model_kind, language, report.gaps[model_kind][language], metric_names
            )

    lines += [
        "## Language gaps - marginal_full_slices (descriptive, no interval)",
        "",
        f"> {MARGINAL_GAP_NOTE}",
        "",
    ]
    for model_kind in ("base", "adapter"):
        for language in sorted(report.marginal[model_kind]):
            lines += _marginal_lines(
                model_kind, language, report.marginal[model_kind][language], metric_names
            )
    return "\n".join(lines).rstrip("\n") + "\n"
