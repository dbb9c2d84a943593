"""Preregistered claims about a comparison and the verdict on them.

A comparison report answers "what are the deltas?"; a team usually has a
narrower question fixed in advance, such as "the adapter wins in French and
loses at most one point in English". Writing that question down *before* the
results exist, and deciding it by a procedure fixed in advance, is what makes
the answer evidence rather than a reading of fifteen intervals after the fact.

The claims file (``sommelier_mlflow.claims.v1``)::

    {"schema_version": "sommelier_mlflow.claims.v1", "alpha": 0.05,
     "seed": 0, "resamples": 2000,
     "claims": [{"id": "fr-gain", "slice": "fr", "metric": "full_call_exact_match",
                 "kind": "superiority", "margin": 0.0}]}

``alpha`` defaults to 0.05; ``seed`` and ``resamples`` default to the
comparison's and, when given, must equal them (the claims are decided from the
comparison's own bootstrap draws, so a different seed would mean a second
resampling). A claim of kind ``superiority`` asserts ``adapter - base >
margin``; ``non_inferiority`` asserts ``adapter - base > -margin``. Either way
the claim asserts ``delta > threshold`` and ``margin >= 0``.

How a one-sided claim is decided from the bootstrap
---------------------------------------------------
The null hypothesis of a claim is ``delta <= threshold``. Its p-value is read
off the same resampled differences ``d_1 .. d_R`` whose percentiles are the
published interval::

    p = (1 + #{r : d_r <= threshold}) / (R + 1)

This is the percentile-bootstrap test dual to the published intervals:
``#{d_r <= threshold} / R < alpha`` says exactly that the ``alpha`` quantile
of the draws (the lower end of a one-sided ``1 - alpha`` percentile interval)
lies above the threshold. The ``+1`` in numerator and denominator counts the
observed sample as one of the draws, the usual Monte Carlo correction that
keeps ``p`` away from zero (no finite number of resamples can prove more than
``1 / (R + 1)``) and errs on the conservative side. A draw at the threshold
(within :data:`TIE_TOLERANCE`, since draws are float ratios) counts against
the claim: a tie is not a win.

The family of claims is then controlled with Holm's step-down procedure at
``alpha``: sort the ``k`` p-values ascending; the ``i``-th smallest (0-based)
is compared with ``alpha / (k - i)``, and testing stops at the first one that
fails. The report carries Holm-adjusted p-values (``max over j <= i of
min(1, (k - j) p_(j))``), computed in exact rational arithmetic, and a claim
is ``supported`` exactly when its adjusted p-value is at most ``alpha``. Holm
bounds the family-wise error rate by ``alpha`` under any dependence between
the claims, which matters here because claims on ``overall`` and on a
language share examples.

Nothing here imports MLflow; the integration layer logs what this module
decides.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import numpy as np

from sommelier_mlflow._json import JSONDecodeError, field_dict, loads
from sommelier_mlflow.data._schemas import schema_version
from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError, DataError
from sommelier_mlflow.evaluation._stats import BootstrapDraws, PairedBootstrapResult

__all__ = [
    "CLAIMS_SCHEMA",
    "CLAIM_KINDS",
    "DEFAULT_ALPHA",
    "TIE_TOLERANCE",
    "VERDICT_METHOD",
    "Claim",
    "ClaimsSpec",
    "RegistrationRecord",
    "ClaimDecision",
    "Verdict",
    "parse_claim",
    "parse_claims",
    "read_claims",
    "check_claims",
    "bootstrap_p_value",
    "holm_adjust",
    "verdict_from_counts",
    "decide_claims",
]

CLAIMS_SCHEMA: Final = schema_version("claims")
CLAIM_KINDS: Final[tuple[str, ...]] = ("superiority", "non_inferiority")
DEFAULT_ALPHA: Final = 0.05
TIE_TOLERANCE: Final = 1e-12
"""Draws within this distance of the threshold count as ties (against the
claim). Resampled differences are differences of float ratios, so a draw that
equals the threshold in exact arithmetic can land a few ulps either side."""

VERDICT_METHOD: Final = "holm_step_down_one_sided_percentile_bootstrap"
"""Name recorded in reports so a reader knows how the verdict was reached."""

SUPPORTED: Final = "supported"
NOT_SUPPORTED: Final = "not_supported"

_TOP_FIELDS: Final = frozenset({"schema_version", "alpha", "seed", "resamples", "claims"})
_CLAIM_FIELDS: Final = frozenset({"id", "slice", "metric", "kind", "margin"})
# Claim ids end up in MLflow tag keys (``sommelier.claim.<id>``) and in
# Markdown tables, so they use a conservative alphabet valid in both.
_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True)
class Claim:
    """One preregistered claim: ``adapter - base > threshold`` on a slice and metric.

    Attributes:
        id: Unique name of the claim (used in tags and tables).
        slice: ``"overall"`` or a language slice of the comparison.
        metric: One of the comparison's metric names.
        kind: ``"superiority"`` or ``"non_inferiority"``.
        margin: Non-negative margin; see :attr:`threshold`.
    """

    id: str
    slice: str
    metric: str
    kind: str
    margin: float

    @property
    def threshold(self) -> float:
        """The value the delta must exceed: ``margin`` or ``-margin``."""
        return self.margin if self.kind == "superiority" else -self.margin

    def to_dict(self) -> dict[str, Any]:
        """Return the claim as it appears in the claims file."""
        return field_dict(self)


@dataclass(frozen=True)
class ClaimsSpec:
    """A validated claims file and the digest of its exact bytes.

    Attributes:
        alpha: Family-wise error rate the verdict controls.
        seed: Preregistered bootstrap seed, or ``None`` for the comparison's.
        resamples: Preregistered resample count, or ``None`` for the comparison's.
        claims: The claims, in file order.
        sha256: SHA-256 of the file's bytes (what preregistration records).
        source: Where the claims came from, for error messages.
    """

    alpha: float
    seed: int | None
    resamples: int | None
    claims: tuple[Claim, ...]
    sha256: str
    source: str


@dataclass(frozen=True)
class RegistrationRecord:
    """What is known about a claims file's preregistration when it was decided.

    MLflow knows the times; the evaluation layer only records them, so this
    record is filled in by the integration layer (or left unchecked when no
    tracking store was consulted).

    Attributes:
        checked: Whether a tracking store was searched at all.
        registered: Whether a registration run recorded this file's digest.
        run_id: The earliest such run.
        registered_at_ms: Its start time (ms since the epoch, MLflow's clock).
        arm_run_ids: The two arms' runs, when known.
        arms_started_at_ms: The earlier of the arms' start times.
        registered_before_arms: Registration strictly before both arms
            started; ``None`` when either side is unknown.
    """

    checked: bool = False
    registered: bool | None = None
    run_id: str | None = None
    registered_at_ms: int | None = None
    arm_run_ids: tuple[str, ...] = ()
    arms_started_at_ms: int | None = None
    registered_before_arms: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``claims.registration`` object of the comparison report."""
        if not self.checked:
            return {"checked": False}
        return {
            "checked": True,
            "registered": self.registered,
            "run_id": self.run_id,
            "registered_at_ms": self.registered_at_ms,
            "arm_run_ids": list(self.arm_run_ids),
            "arms_started_at_ms": self.arms_started_at_ms,
            "registered_before_arms": self.registered_before_arms,
        }


@dataclass(frozen=True)
class ClaimDecision:
    """The outcome of one claim within its family.

    Attributes:
        claim: The claim decided.
        estimate: The point estimate of ``adapter - base``.
        lower: Lower bound of the published interval (same draws).
        upper: Upper bound of the published interval.
        confidence: Nominal coverage of that interval.
        resamples: Number of bootstrap draws the p-value counts over.
        draws_at_or_below: How many of them lie at or below the threshold;
            recorded so a reader can recompute every p-value and decision.
        p_value: One-sided bootstrap p-value (see the module docstring).
        adjusted_p_value: Holm-adjusted p-value within the family.
        supported: Whether the claim survives Holm at ``alpha``.
    """

    claim: Claim
    estimate: float
    lower: float
    upper: float
    confidence: float
    resamples: int
    draws_at_or_below: int
    p_value: float
    adjusted_p_value: float
    supported: bool

    @property
    def decision(self) -> str:
        """``"supported"`` or ``"not_supported"``."""
        return SUPPORTED if self.supported else NOT_SUPPORTED

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-safe row of the verdict table."""
        return {
            **self.claim.to_dict(),
            "threshold": self.claim.threshold,
            "estimate": self.estimate,
            "lower": self.lower,
            "upper": self.upper,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "draws_at_or_below": self.draws_at_or_below,
            "p_value": self.p_value,
            "adjusted_p_value": self.adjusted_p_value,
            "decision": self.decision,
        }


@dataclass(frozen=True)
class Verdict:
    """The decisions on a whole claims family.

    Attributes:
        alpha: The family-wise error rate controlled.
        claims_sha256: Digest of the claims file decided.
        decisions: One decision per claim, in file order.
        registration: The claims file's preregistration, as far as known.
        method: Always :data:`VERDICT_METHOD`.
    """

    alpha: float
    claims_sha256: str
    decisions: tuple[ClaimDecision, ...]
    registration: RegistrationRecord = RegistrationRecord()
    method: str = VERDICT_METHOD

    @property
    def supported(self) -> bool:
        """True when every claim of the family is supported."""
        return all(decision.supported for decision in self.decisions)

    @property
    def verdict(self) -> str:
        """``"supported"`` when all claims are, else ``"not_supported"``."""
        return SUPPORTED if self.supported else NOT_SUPPORTED

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-safe verdict recorded in the comparison report."""
        return {
            "schema_version": CLAIMS_SCHEMA,
            "sha256": self.claims_sha256,
            "alpha": self.alpha,
            "method": self.method,
            "tie_tolerance": TIE_TOLERANCE,
            "verdict": self.verdict,
            "claims": [decision.to_dict() for decision in self.decisions],
            "registration": self.registration.to_dict(),
        }


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fail(source: str, message: str) -> DataError:
    return DataError(f"{message}; fix the claims file and run again", path=source)


def _optional_count(
    document: Mapping[str, Any], key: str, source: str, *, minimum: int
) -> int | None:
    if key not in document:
        return None
    value = document[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(source, f"{key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_claim(index: int, raw: object, source: str) -> Claim:
    """Validate one claim object (``claims[index]`` of a file from ``source``).

    Raises:
        DataError: An unknown or missing field or a bad value, named (exit 2).
    """
    where = f"claims[{index}]"
    if not isinstance(raw, dict):
        raise _fail(source, f"{where} must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _CLAIM_FIELDS)
    if unknown:
        raise _fail(
            source,
            f"{where} has unknown field {unknown[0]!r}; a claim has exactly "
            f"{sorted(_CLAIM_FIELDS)}",
        )
    missing = sorted(_CLAIM_FIELDS - set(raw))
    if missing:
        raise _fail(source, f"{where} is missing field {missing[0]!r}")
    claim_id = raw["id"]
    if not isinstance(claim_id, str) or not _ID_PATTERN.fullmatch(claim_id):
        raise _fail(
            source,
            f"{where}.id must be 1-100 characters of letters, digits, '_', '.', '-' "
            f"starting with a letter or digit (it becomes an MLflow tag key), got {claim_id!r}",
        )
    for key in ("slice", "metric"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise _fail(source, f"claim {claim_id!r}: {key!r} must be a non-empty string")
    kind = raw["kind"]
    if kind not in CLAIM_KINDS:
        raise _fail(source, f"claim {claim_id!r}: unknown kind {kind!r}; use one of {CLAIM_KINDS}")
    margin = raw["margin"]
    if not _is_number(margin) or not math.isfinite(margin) or not 0 <= margin < 1:
        raise _fail(
            source,
            f"claim {claim_id!r}: margin must be a number in [0, 1) (a difference of "
            f"rates; a non-inferiority claim states it as a positive number), got {margin!r}",
        )
    return Claim(
        id=claim_id, slice=raw["slice"], metric=raw["metric"], kind=kind, margin=float(margin)
    )


def parse_claims(document: object, *, source: str, sha256: str) -> ClaimsSpec:
    """Validate a parsed claims document strictly.

    Args:
        document: The parsed JSON value.
        source: Where it came from (a path), named in every error.
        sha256: Digest of the bytes the document was parsed from.

    Returns:
        The validated claims.

    Raises:
        DataError: An unknown or missing field, a wrong schema version, a bad
            value, or a duplicate claim id (exit 2), naming it.
    """
    if not isinstance(document, dict):
        raise _fail(source, "a claims file must hold one JSON object")
    unknown = sorted(set(document) - _TOP_FIELDS)
    if unknown:
        raise _fail(
            source,
            f"unknown field {unknown[0]!r}; a claims file has only {sorted(_TOP_FIELDS)}",
        )
    version = document.get("schema_version")
    if version != CLAIMS_SCHEMA:
        raise _fail(source, f"schema_version must be {CLAIMS_SCHEMA!r}, got {version!r}")
    alpha = document.get("alpha", DEFAULT_ALPHA)
    if not _is_number(alpha) or not 0 < alpha < 1:
        raise _fail(source, f"'alpha' must be a number strictly between 0 and 1, got {alpha!r}")
    seed = _optional_count(document, "seed", source, minimum=0)
    resamples = _optional_count(document, "resamples", source, minimum=1)
    raw_claims = document.get("claims")
    if not isinstance(raw_claims, list) or not raw_claims:
        raise _fail(source, "'claims' must be a non-empty list of claims")
    claims = tuple(parse_claim(index, raw, source) for index, raw in enumerate(raw_claims))
    seen: set[str] = set()
    for claim in claims:
        if claim.id in seen:
            raise _fail(source, f"duplicate claim id {claim.id!r}; every claim needs its own id")
        seen.add(claim.id)
    return ClaimsSpec(
        alpha=float(alpha),
        seed=seed,
        resamples=resamples,
        claims=claims,
        sha256=sha256,
        source=source,
    )


def read_claims(path: str | os.PathLike[str]) -> ClaimsSpec:
    """Read, digest and validate a claims file.

    The digest is over the file's exact bytes, so preregistering a file and
    later deciding it can be checked byte for byte.

    Raises:
        DataError: Unreadable, not strict JSON (a key named twice included), or
            invalid (exit 2).
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(
            f"cannot read the claims file ({exc.strerror or exc}); check the path", path=source
        ) from exc
    try:
        # A key named twice would be decided at its last value: refused, as the split readers do.
        document = loads(data, reject_duplicate_keys=True)
    except JSONDecodeError as exc:
        raise _fail(source, f"not strict JSON ({exc})") from exc
    return parse_claims(document, source=source, sha256=hashlib.sha256(data).hexdigest())


def check_claims(
    spec: ClaimsSpec,
    *,
    slices: Sequence[str],
    metric_names: Sequence[str],
    seed: int,
    resamples: int,
) -> None:
    """Check that the claims can be decided on a given comparison.

    Args:
        spec: The claims.
        slices: The comparison's slice names (``overall`` included).
        metric_names: The comparison's metric names.
        seed: The comparison's base seed.
        resamples: The comparison's resamples per interval.

    Raises:
        DataError: A claim names a slice or metric the comparison does not
            have (exit 2).
        ComparisonRefusedError: The claims preregistered a seed or resample
            count other than the comparison's (exit 4); deciding them would
            need a second resampling, which would not be the preregistered one.
    """
    for claim in spec.claims:
        if claim.slice not in slices:
            raise _fail(
                spec.source,
                f"claim {claim.id!r} names unknown slice {claim.slice!r}; "
                f"this comparison has {sorted(slices)}",
            )
        if claim.metric not in metric_names:
            raise _fail(
                spec.source,
                f"claim {claim.id!r} names unknown metric {claim.metric!r}; "
                f"this comparison has {list(metric_names)}",
            )
    for key, registered, actual in (
        ("seed", spec.seed, seed),
        ("resamples", spec.resamples, resamples),
    ):
        if registered is not None and registered != actual:
            raise ComparisonRefusedError(
                f"refusing to decide claims: {spec.source} preregistered {key} {registered} "
                f"but the comparison uses {actual}; run compare with --{key} {registered}",
                field=f"claims.{key}",
            )


def _count_at_or_below(draws: np.ndarray[Any, np.dtype[np.float64]], threshold: float) -> int:
    if int(draws.shape[0]) == 0:
        raise ConfigError("cannot decide a claim from zero bootstrap draws")
    return int(np.count_nonzero(draws <= threshold + TIE_TOLERANCE))


def bootstrap_p_value(draws: np.ndarray[Any, np.dtype[np.float64]], threshold: float) -> Fraction:
    """One-sided p-value of ``delta <= threshold`` from bootstrap draws.

    Returns ``(1 + #{d <= threshold + TIE_TOLERANCE}) / (R + 1)`` exactly, as
    a fraction; see the module docstring for why this is the test dual to the
    percentile interval.

    Raises:
        ConfigError: If there are no draws.
    """
    return Fraction(1 + _count_at_or_below(draws, threshold), int(draws.shape[0]) + 1)


def holm_adjust(p_values: Sequence[Fraction]) -> list[Fraction]:
    """Holm step-down adjusted p-values, exactly, in input order.

    The adjusted value of the ``i``-th smallest p-value is
    ``max_{j <= i} min(1, (k - j) * p_(j))``; rejecting where it is at most
    ``alpha`` is Holm's procedure at level ``alpha``. Ties keep input order,
    which does not change any adjusted value.
    """
    k = len(p_values)
    order = sorted(range(k), key=lambda index: p_values[index])
    adjusted: list[Fraction] = [Fraction(0)] * k
    running = Fraction(0)
    for rank, index in enumerate(order):
        running = max(running, min(Fraction(1), (k - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def verdict_from_counts(
    claims: Sequence[Claim],
    counts: Sequence[int],
    results: Sequence[PairedBootstrapResult],
    *,
    alpha: float,
    claims_sha256: str,
    registration: RegistrationRecord = RegistrationRecord(),
) -> Verdict:
    """The verdict from each claim's count of draws at or below its threshold.

    This is the whole decision once the draws are counted, shared by
    :func:`decide_claims` (which counts) and the comparison report's reader
    (which recomputes every p-value and decision from the recorded counts).

    Args:
        claims: The family, in file order.
        counts: Per claim, the draws at or below its threshold.
        results: Per claim, the bootstrap result of its slice (for the
            estimate, the published interval and the number of draws).
        alpha: The family-wise error rate.
        claims_sha256: Digest of the claims file.
        registration: Its preregistration record.
    """
    p_values = [
        Fraction(1 + count, result.resamples + 1)
        for count, result in zip(counts, results, strict=True)
    ]
    adjusted = holm_adjust(p_values)
    limit = Fraction(alpha)
    decisions = []
    for claim, count, result, p_value, adjusted_p in zip(
        claims, counts, results, p_values, adjusted, strict=True
    ):
        interval = result.interval(claim.metric)
        decisions.append(
            ClaimDecision(
                claim=claim,
                estimate=interval.estimate,
                lower=interval.lower,
                upper=interval.upper,
                confidence=result.confidence,
                resamples=result.resamples,
                draws_at_or_below=count,
                p_value=float(p_value),
                adjusted_p_value=float(adjusted_p),
                supported=adjusted_p <= limit,
            )
        )
    return Verdict(
        alpha=alpha,
        claims_sha256=claims_sha256,
        decisions=tuple(decisions),
        registration=registration,
    )


def decide_claims(
    spec: ClaimsSpec,
    draws: Mapping[str, BootstrapDraws],
    registration: RegistrationRecord = RegistrationRecord(),
) -> Verdict:
    """Decide every claim from the comparison's own bootstrap draws.

    Args:
        spec: The claims (already checked with :func:`check_claims`).
        draws: Per slice name, the draws that produced that slice's published
            delta intervals.
        registration: The claims' preregistration record, carried into the verdict.

    Returns:
        The verdict with one decision per claim, in file order.

    Raises:
        ConfigError: A claim's slice has no draws, or its metric was not
            bootstrapped (a programming error in the caller, as
            :func:`check_claims` rules both out for user input).
    """
    counts: list[int] = []
    results: list[PairedBootstrapResult] = []
    for claim in spec.claims:
        if claim.slice not in draws:
            raise ConfigError(f"no bootstrap draws for slice {claim.slice!r} of {claim.id!r}")
        slice_draws = draws[claim.slice]
        try:
            column = slice_draws.column(claim.metric)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from exc
        counts.append(_count_at_or_below(column, claim.threshold))
        results.append(slice_draws.result)
    return verdict_from_counts(
        spec.claims,
        counts,
        results,
        alpha=spec.alpha,
        claims_sha256=spec.sha256,
        registration=registration,
    )
