"""Claims on the command line: ``claims register``, ``--claims``, the verdict lines, exit 6.

Kept apart from the commands so ``compare`` and ``main`` share one reading of
the option, one comparison with its claims, one terminal rendering of the
verdict and one exit rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sommelier_mlflow.errors import ClaimNotSupportedError
from sommelier_mlflow.evaluation import (
    ClaimsSpec,
    ComparisonReport,
    RegistrationRecord,
    Verdict,
    read_claims,
    run_comparison,
)

if TYPE_CHECKING:
    import argparse
    import os
    from collections.abc import Sequence

    from sommelier_mlflow.evaluation import ComparisonArtifacts

__all__ = [
    "read_claims_option",
    "registration_for",
    "compare_arms",
    "raise_if_unsupported",
    "format_verdict",
    "register_command",
]


def read_claims_option(value: str | None) -> ClaimsSpec | None:
    """The claims file named by ``--claims`` (MLproject ``claims``), or None when empty."""
    if not value:
        return None
    return read_claims(value)


def registration_for(
    args: argparse.Namespace, claims: ClaimsSpec | None, arm_runs: Sequence[str], logged: bool
) -> RegistrationRecord | None:
    """The claims' preregistration, looked up when the comparison is logged or one is required.

    Raises:
        ComparisonRefusedError: ``--require-registered`` and none was found (exit 4).
    """
    if claims is None or not (logged or args.require_registered):
        return None
    from sommelier_mlflow.cli._runs import claims_registration

    return claims_registration(claims, list(arm_runs), require=args.require_registered)


def compare_arms(
    args: argparse.Namespace,
    reports: tuple[str | os.PathLike[str], str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    claims: ClaimsSpec | None,
    registration: RegistrationRecord | None,
) -> ComparisonArtifacts:
    """Gate and compare the base and adapter reports with the command's statistics flags.

    Files are written only if the gate passes.
    """
    return run_comparison(
        *reports,
        out_dir,
        seed=args.seed,
        resamples=args.resamples,
        claims=claims,
        registration=registration,
    )


def raise_if_unsupported(report: ComparisonReport) -> None:
    """Raise exit 6 when the report's verdict is not ``supported`` (``--fail-on-unsupported``).

    Raises:
        ClaimNotSupportedError: Naming the claims that were not supported.
    """
    verdict = report.claims
    if verdict is None or verdict.supported:
        return
    failed = tuple(d.claim.id for d in verdict.decisions if not d.supported)
    raise ClaimNotSupportedError(
        f"claim(s) not supported at alpha {verdict.alpha:g} after Holm's adjustment: "
        f"{', '.join(failed)}; the reports were written (see the verdict table)",
        claim_ids=failed,
    )


def _registration_state(registration: RegistrationRecord) -> str:
    if not registration.registered:
        return "not registered"
    before = registration.registered_before_arms
    if before is None:
        return "registered (arms' runs unknown, order not checked)"
    return "registered before the arms ran" if before else "registered AFTER the arms ran"


def format_verdict(verdict: Verdict) -> str:
    """Terminal lines of the claims verdict: one per claim, then the family's verdict."""
    lines = [f"claims (sha256 {verdict.claims_sha256[:12]}, Holm at alpha {verdict.alpha:g}):"]
    for decision in verdict.decisions:
        claim = decision.claim
        lines.append(
            f"  {claim.id:<16}{claim.slice:<9}{claim.metric:<24}delta > {claim.threshold:+.3f}: "
            f"{decision.estimate:+.3f} [{decision.lower:+.3f}, {decision.upper:+.3f}]  "
            f"p_adj {decision.adjusted_p_value:.4g}  {decision.decision}"
        )
    if verdict.registration.checked:
        lines.append(f"  preregistration: {_registration_state(verdict.registration)}")
    lines.append(f"verdict: {verdict.verdict}")
    return "\n".join(lines)


def register_command(claims_file: str) -> int:
    """``sommelier-mlflow claims register FILE``: validate, then log the file and its digest.

    The file is validated before any MLflow run is created, so a broken claims
    file leaves no half-made registration behind.
    """
    from sommelier_mlflow.cli._runs import top_run
    from sommelier_mlflow.integration import register_claims

    read_claims(claims_file)
    with top_run("claims-register") as run_id:
        spec = register_claims(claims_file, run_id=run_id)
    print(f"registered {len(spec.claims)} claim(s), sha256 {spec.sha256}")
    print(f"MLflow run {run_id} (tag sommelier.claims_sha256)")
    return 0
