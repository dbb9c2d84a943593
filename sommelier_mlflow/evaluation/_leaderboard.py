"""One base against many adapters: a leaderboard with a family-wise error guarantee.

A training run saves many checkpoints. Comparing each with the base and
keeping the best one that looks better multiplies the chances of a false
"better": with five adapters that are all as good as the base, each tested at
5 %, the chance that at least one looks better is far above 5 %. The
leaderboard therefore tests the family: each adapter's one-sided p-value for
``delta(select_metric) <= 0`` is exact on the per-example outcome
``full_call_exact_match`` (one-sided McNemar) and otherwise comes from the
very bootstrap draws behind its published interval (as a preregistered
claim's does), and Holm's step-down adjustment over the family keeps the
chance of any false "better" at or under ``alpha``.

The best adapter (highest estimated delta) is still subject to the winner's
curse: its estimate is biased upwards by the choice itself. The leaderboard
says which adapter to confirm, not by how much it wins; confirm it on a second
split with a claim preregistered after the choice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, Literal

from sommelier_mlflow._json import atomic_write_bytes, dumps_pretty
from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError
from sommelier_mlflow.evaluation._checks import ReportChecker, read_report_document
from sommelier_mlflow.evaluation._claims import DEFAULT_ALPHA, bootstrap_p_value, holm_adjust
from sommelier_mlflow.evaluation._compare import compare_reports_with_draws
from sommelier_mlflow.evaluation._comparison_report import ComparisonReport
from sommelier_mlflow.evaluation._report import EvaluationReport
from sommelier_mlflow.evaluation._results import BootstrapSettings
from sommelier_mlflow.evaluation._stats import BootstrapDraws, mcnemar_one_sided

__all__ = [
    "LEADERBOARD_SCHEMA",
    "LEADERBOARD_FILENAME",
    "LEADERBOARD_MARKDOWN_FILENAME",
    "AdapterArm",
    "LeaderboardRow",
    "Leaderboard",
    "select_p_value",
    "family_decisions",
    "build_leaderboard",
    "render_leaderboard_markdown",
    "write_leaderboard",
    "read_leaderboard",
]

LEADERBOARD_SCHEMA: Final = "sommelier_mlflow.leaderboard.v1"
LEADERBOARD_FILENAME: Final = "leaderboard.json"
LEADERBOARD_MARKDOWN_FILENAME: Final = "leaderboard.md"
#: How a row's p-value was computed (see :func:`select_p_value`).
_PValueMethod = Literal[
    "exact_mcnemar_one_sided", "exact_sign_flip_one_sided", "paired_bootstrap_one_sided"
]


@dataclass(frozen=True)
class AdapterArm:
    """One adapter of the family: its report and where it came from.

    Attributes:
        label: A short unique name (the run id, the checkpoint, the file).
        report: Its evaluation report.
        run_id: Its MLflow run, when it came from one.
        step: Its training step (checkpoint), when known; the chart's x axis.
    """

    label: str
    report: EvaluationReport
    run_id: str | None = None
    step: int | None = None


@dataclass(frozen=True)
class LeaderboardRow:
    """One adapter against the base: its comparison and its family decision.

    Attributes:
        arm: The adapter.
        comparison: The full pairwise comparison (every slice, McNemar, gaps).
        p_value: One-sided p-value of ``delta(select_metric) <= 0`` (see :func:`select_p_value`).
        p_method: How it was computed.
        adjusted_p_value: Holm-adjusted over the family.
        better: ``adjusted_p_value <= alpha``.
    """

    arm: AdapterArm
    comparison: ComparisonReport
    p_value: Fraction
    p_method: str
    adjusted_p_value: Fraction
    better: bool

    def to_dict(self, select_metric: str) -> dict[str, Any]:
        overall = self.comparison.slices[OVERALL]
        adapter = self.comparison.runs["adapter"].adapter
        return {
            "label": self.arm.label,
            "run_id": self.arm.run_id,
            "step": self.arm.step,
            "adapter": None if adapter is None else adapter.to_dict(),
            "report_sha256": self.arm.report.sha256,
            "delta": {interval.metric: interval.to_dict() for interval in overall.delta.intervals},
            "mcnemar": {"metric": overall.mcnemar_metric, **overall.mcnemar.to_dict()},
            "select_metric": select_metric,
            "p_value": float(self.p_value),
            "p_method": self.p_method,
            "adjusted_p_value": float(self.adjusted_p_value),
            "better": self.better,
        }


@dataclass(frozen=True)
class Leaderboard:
    """The family's rows in the given order, the best one, and how they were decided."""

    select_metric: str
    alpha: float
    rows: tuple[LeaderboardRow, ...]
    best: int
    seed: int
    resamples: int

    @property
    def best_row(self) -> LeaderboardRow:
        """The adapter with the highest estimated delta of the select metric."""
        return self.rows[self.best]

    def to_json(self) -> dict[str, Any]:
        """The ``leaderboard.json`` document."""
        return {
            "schema_version": LEADERBOARD_SCHEMA,
            "select_metric": self.select_metric,
            "alpha": self.alpha,
            "method": "one-sided p-value per adapter, Holm over the family",
            "bootstrap": {"seed": self.seed, "resamples": self.resamples},
            "best": self.best_row.arm.label,
            "best_run_id": self.best_row.arm.run_id,
            "winners_curse": (
                "the best adapter's delta is biased upwards by the choice; confirm it on a "
                "second split with a claim preregistered after the choice"
            ),
            "adapters": [row.to_dict(self.select_metric) for row in self.rows],
        }


def select_p_value(
    comparison: ComparisonReport, draws: BootstrapDraws, metric: str
) -> tuple[Fraction, _PValueMethod]:
    """One adapter's one-sided p-value that it beats the base on ``metric``, and its method.

    On the comparison's McNemar outcome (``full_call_exact_match``: right or
    wrong per example) the test is the exact one-sided McNemar test on the
    discordant pairs, which is valid at any sample size, so Holm over the
    family controls the error exactly; on a conversation split it is the exact
    one-sided sign-flip test over conversations that replaces McNemar there.
    Any other metric is tested from the very bootstrap draws behind its
    published interval, as a claim is: a good approximation, not an exact test.

    Raises:
        ConfigError: ``metric`` was not compared.
    """
    overall = comparison.slices[OVERALL]
    if metric == overall.mcnemar_metric:
        if overall.mcnemar.differences is not None:
            return overall.mcnemar.one_sided(), "exact_sign_flip_one_sided"
        return mcnemar_one_sided(overall.mcnemar.b, overall.mcnemar.c), "exact_mcnemar_one_sided"
    try:
        return bootstrap_p_value(draws.column(metric), 0.0), "paired_bootstrap_one_sided"
    except KeyError as exc:
        raise ConfigError(f"select metric: {exc.args[0]}") from exc


def family_decisions(
    p_values: Sequence[Fraction], alpha: float = DEFAULT_ALPHA
) -> tuple[list[Fraction], list[bool]]:
    """Holm-adjusted p-values and "better" decisions for a family of adapters.

    Raises:
        ConfigError: ``alpha`` outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    adjusted = holm_adjust(p_values)
    limit = Fraction(alpha)
    return adjusted, [value <= limit for value in adjusted]


def build_leaderboard(
    base: EvaluationReport,
    arms: Sequence[AdapterArm],
    *,
    select_metric: str,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
    resamples: int = 2000,
) -> Leaderboard:
    """Gate and compare every adapter with the base, then decide the family.

    Raises:
        ConfigError: No adapter, repeated labels, an unknown select metric or a bad alpha.
        ComparisonRefusedError: The gate refused an adapter (exit 4, naming it).
    """
    if not arms:
        raise ConfigError("a leaderboard needs at least one adapter arm")
    labels = [arm.label for arm in arms]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"adapter labels must be unique, got {labels}")
    if select_metric not in base.metric_names:
        raise ConfigError(
            f"select metric {select_metric!r} is not one of the reports' metrics: "
            f"{', '.join(base.metric_names)}"
        )
    compared: list[tuple[ComparisonReport, Mapping[str, BootstrapDraws]]] = []
    for arm in arms:
        try:
            compared.append(
                compare_reports_with_draws(
                    base,
                    arm.report,
                    BootstrapSettings(seed=seed, resamples=resamples, confidence=0.95),
                )
            )
        except ComparisonRefusedError as exc:
            raise ComparisonRefusedError(f"adapter {arm.label}: {exc}", field=exc.field) from exc
    tested = [select_p_value(report, draws[OVERALL], select_metric) for report, draws in compared]
    adjusted, better = family_decisions([p for p, _ in tested], alpha)
    rows = tuple(
        LeaderboardRow(arm, report, p, method, q, ok)
        for arm, (report, _), (p, method), q, ok in zip(
            arms, compared, tested, adjusted, better, strict=True
        )
    )
    estimates = [
        row.comparison.slices[OVERALL].delta.interval(select_metric).estimate for row in rows
    ]
    best = max(range(len(rows)), key=lambda i: (estimates[i], -adjusted[i], -i))
    return Leaderboard(select_metric, alpha, rows, best, seed, resamples)


def render_leaderboard_markdown(document: Mapping[str, Any]) -> str:
    """The ``leaderboard.md`` table of a ``leaderboard.json`` document.

    It reads the document, not the :class:`Leaderboard`, so that ``show`` prints
    a logged leaderboard's table from its logged JSON with the very function
    that wrote the Markdown beside it.
    """
    metric = document["select_metric"]
    rows = document["adapters"]
    bootstrap = document["bootstrap"]
    lines = [
        "# Leaderboard: one base, many adapters",
        "",
        f'Select metric `{metric}`; "better" = Holm-adjusted one-sided p <= '
        f"{document['alpha']:g} over the {len(rows)} adapters (bootstrap seed "
        f"{bootstrap['seed']}, {bootstrap['resamples']} resamples).",
        "",
        f"| adapter | step | delta {metric} [95% interval] | McNemar p | p | Holm p | better |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        interval = row["delta"][metric]
        mark = " **(best)**" if row["label"] == document["best"] else ""
        lines.append(
            f"| {row['label']}{mark} | {'' if row['step'] is None else row['step']} | "
            f"{interval['estimate']:+.4f} [{interval['lower']:+.4f}, {interval['upper']:+.4f}] | "
            f"{row['mcnemar']['p_value']:.4g} | {row['p_value']:.4g} | "
            f"{row['adjusted_p_value']:.4g} | {'yes' if row['better'] else 'no'} |"
        )
    lines += [
        "",
        "The best adapter's delta is biased upwards by having been chosen (winner's curse). "
        "Confirm it on a second split: evaluate it there, preregister a claim now, and compare.",
        "",
    ]
    return "\n".join(lines)


def write_leaderboard(out_dir: str | os.PathLike[str], board: Leaderboard) -> tuple[Path, Path]:
    """Write ``leaderboard.json`` and ``leaderboard.md`` atomically; return their paths."""
    directory = Path(out_dir)
    markdown = render_leaderboard_markdown(board.to_json()).encode("utf-8")
    json_path = atomic_write_bytes(directory / LEADERBOARD_FILENAME, dumps_pretty(board.to_json()))
    return json_path, atomic_write_bytes(directory / LEADERBOARD_MARKDOWN_FILENAME, markdown)


def read_leaderboard(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``leaderboard.json`` and check every field its table shows.

    Returns:
        The document, fit for :func:`render_leaderboard_markdown`.

    Raises:
        DataError: The file is unreadable, not strict JSON, of another schema,
            or a field is missing or of the wrong type (exit 2), naming it.
    """
    source, data = read_report_document(path, "leaderboard")
    check = ReportChecker(source, "sommelier-mlflow compare --adapter-run-id ...")
    document = check.mapping(data, "leaderboard")
    if document.get("schema_version") != LEADERBOARD_SCHEMA:
        check.fail("schema_version", f"must be {LEADERBOARD_SCHEMA!r}")
    metric = check.text(document.get("select_metric"), "select_metric")
    check.number(document.get("alpha"), "alpha")
    bootstrap = check.mapping(
        document.get("bootstrap"), "bootstrap", frozenset({"seed", "resamples"})
    )
    check.count(bootstrap["seed"], "bootstrap.seed")
    check.count(bootstrap["resamples"], "bootstrap.resamples")
    rows = check.array(document.get("adapters"), "adapters")
    labels = []
    for index, entry in enumerate(rows):
        where = f"adapters[{index}]"
        row = check.mapping(entry, where)
        labels.append(check.text(row.get("label"), f"{where}.label"))
        if row.get("step") is not None:
            check.count(row.get("step"), f"{where}.step")
        delta = check.mapping(row.get("delta"), f"{where}.delta")
        interval = check.mapping(delta.get(metric), f"{where}.delta.{metric}")
        for bound in ("estimate", "lower", "upper"):
            check.number(interval.get(bound), f"{where}.delta.{metric}.{bound}")
        mcnemar = check.mapping(row.get("mcnemar"), f"{where}.mcnemar")
        check.number(mcnemar.get("p_value"), f"{where}.mcnemar.p_value")
        for name in ("p_value", "adjusted_p_value"):
            check.number(row.get(name), f"{where}.{name}")
        if not isinstance(row.get("better"), bool):
            check.fail(f"{where}.better", f"must be true or false, got {row.get('better')!r}")
    if not labels:
        check.fail("adapters", "lists no adapter")
    if document.get("best") not in labels:
        check.fail("best", f"must be one of the adapters' labels, got {document.get('best')!r}")
    return document
