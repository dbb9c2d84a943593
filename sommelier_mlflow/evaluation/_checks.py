"""Field checks shared by the report readers: each failure names the file and the dotted field.

A malformed field is a data error (exit 2); a field that disagrees with what
the same file's rows or counts imply is an invariant violation (exit 5),
because it means the file was edited or corrupted after it was written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.data import (
    Decoding,
    ModelIdentity,
    ModelKind,
    check_model_kind,
    validate_language,
)
from sommelier_mlflow.errors import (
    DataError,
    InputError,
    InvariantViolationError,
    SommelierError,
)
from sommelier_mlflow.evaluation._results import BootstrapSettings
from sommelier_mlflow.evaluation._stats import (
    BOOTSTRAP_METHOD,
    CLUSTER_RESAMPLING,
    QUANTILE_METHOD,
    MetricInterval,
    PairedBootstrapResult,
)
from sommelier_mlflow.toolcalls import FORMAT_MISMATCH_FIELDS, FormatMismatch, MetricValue

__all__ = ["ReportKeys", "read_report_document", "ReportChecker"]


class ReportKeys:
    """The fields of the objects both report kinds write the same way.

    Both readers expect exactly these fields, so they are spelled once here.
    """

    # What scoring computed, at the top of an evaluation and an evaluator report alike.
    SCORED: Final = frozenset(
        {
            "schema_version",
            "metric_names",
            "examples",
            "metrics",
            "slices",
            "paired_slices",
            "bootstrap",
        }
    )
    ADAPTER: Final = frozenset({"source", "sha256"})
    BOOTSTRAP: Final = frozenset({"method", "quantile_method", "seed", "resamples", "confidence"})
    GAP_BOOTSTRAP: Final = BOOTSTRAP | {"n"}
    # Written beside an interval only when its resamples drew whole conversations.
    CLUSTERED: Final = frozenset({"resampling", "clusters"})
    COVERAGE: Final = frozenset(
        {
            "target_rows",
            "paired_targets",
            "target",
            "root_rows",
            "paired_roots",
            "root",
            "unmatched_targets",
        }
    )
    INTERVAL: Final = frozenset({"value", "lower", "upper"})
    # A matched-pair gap; the evaluation report also lists its pairs (``pair_ids``).
    GAP_SIDES: Final = ("root_metrics", "target_metrics", "gaps", "target minus root")
    GAP: Final = frozenset(
        {
            "root_language",
            "pairs",
            "coverage",
            "pair_set_sha256",
            "root_metrics",
            "target_metrics",
            "gaps",
            "bootstrap",
        }
    )


def read_report_document(path: str | os.PathLike[str], what: str) -> tuple[str, object]:
    """Read one report file as strict JSON, before its typed reader checks it.

    Both report readers start the same way; a file that cannot be read or is
    not JSON is a data error (exit 2) naming the file, never a traceback.

    Returns:
        The path as text (the readers name it in every later error) and the
        parsed document.
    """
    source = os.fspath(path)
    try:
        return source, loads(Path(source).read_bytes())
    except OSError as exc:
        raise DataError(f"cannot read {what}: {exc.strerror or exc}", path=source) from exc
    except JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc}", path=source) from exc


class ReportChecker:
    """Field checks that name the report and the dotted field that failed."""

    def __init__(self, source: str, regenerate: str) -> None:
        self.source = source
        self.regenerate = regenerate

    def fail(self, where: str, message: str) -> NoReturn:
        raise DataError(f"{where}: {message}", path=self.source)

    def broken(self, where: str, message: str) -> NoReturn:
        raise InvariantViolationError(
            f"{self.source}: {where}: {message}; the report was edited or corrupted, "
            f"regenerate it with `{self.regenerate}`"
        )

    def mapping(
        self, value: object, where: str, keys: frozenset[str] | None = None
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"must be an object, got {type(value).__name__}")
        if keys is not None and set(value) != keys:
            missing = sorted(keys - set(value))
            extra = sorted(set(value) - keys)
            self.fail(where, f"fields wrong: missing {missing}, unexpected {extra}")
        return value

    def bootstrap_methods(self, entry: Mapping[str, Any], where: str) -> None:
        """Refuse bootstrap provenance this version cannot reproduce.

        An interval is only comparable with a rerun under the same resampling
        and quantile method, so any other method is malformed, not merely old.
        """
        if entry["method"] != BOOTSTRAP_METHOD or entry["quantile_method"] != QUANTILE_METHOD:
            self.fail(
                where,
                f"method {entry['method']!r} / {entry['quantile_method']!r} is not "
                f"{BOOTSTRAP_METHOD!r} / {QUANTILE_METHOD!r}, the only one this version reads",
            )
        if not isinstance(entry["confidence"], float):
            self.fail(f"{where}.confidence", f"must be a float, got {entry['confidence']!r}")

    def _provenance(
        self, value: object, where: str, keys: frozenset[str]
    ) -> tuple[dict[str, Any], BootstrapSettings]:
        """Read bootstrap provenance: the fields ``keys`` and settings a run could use."""
        entry = self.mapping(value, where, keys)
        self.bootstrap_methods(entry, where)
        try:
            settings = BootstrapSettings(
                seed=entry["seed"], resamples=entry["resamples"], confidence=entry["confidence"]
            )
        except SommelierError as exc:
            self.fail(where, str(exc))
        return entry, settings

    def settings(self, value: object) -> BootstrapSettings:
        """Read the top-level ``bootstrap`` settings both report kinds record."""
        return self._provenance(value, "bootstrap", ReportKeys.BOOTSTRAP)[1]

    def _paired_result(
        self,
        where: str,
        value: object,
        provenance: object,
        *,
        low: Mapping[str, MetricValue],
        high: Mapping[str, MetricValue],
        difference: str,
        n: int,
    ) -> PairedBootstrapResult:
        """Read one paired bootstrap result: an interval per metric of ``low`` (in its order).

        The intervals stand at ``where`` and their provenance in the
        ``bootstrap`` object beside it, which must count ``n`` paired rows. A
        delta of the comparison and a matched-pair gap of either report are
        read here, so all three are held to one rule. The stored estimate must
        be exactly ``high`` minus ``low``: it is recomputed from counts the same file
        holds, so any other value means an edit.
        """
        names = tuple(low)
        entries = self.mapping(value, where, frozenset(names))
        intervals = []
        for name in names:
            at = f"{where}.{name}"
            entry = self.mapping(entries[name], at, ReportKeys.INTERVAL)
            estimate = self.number(entry["value"], f"{at}.value")
            lower = self.number(entry["lower"], f"{at}.lower")
            upper = self.number(entry["upper"], f"{at}.upper")
            if estimate != high[name].value - low[name].value:
                self.broken(f"{at}.value", f"is not {difference}")
            if not lower <= upper:
                self.broken(at, f"lower {lower} exceeds upper {upper}")
            intervals.append(
                MetricInterval(name, low[name].value, high[name].value, estimate, lower, upper)
            )
        at = where.rsplit(".", 1)[0] + ".bootstrap"
        given = self.mapping(provenance, at)
        keys = ReportKeys.GAP_BOOTSTRAP | (ReportKeys.CLUSTERED if "clusters" in given else set())
        entry, settings = self._provenance(provenance, at, frozenset(keys))
        if entry["n"] != n:
            self.broken(f"{at}.n", f"is {entry['n']!r}, expected {n} paired rows")
        clusters = None
        if "clusters" in entry:
            if entry["resampling"] != CLUSTER_RESAMPLING:
                self.fail(f"{at}.resampling", f"is not {CLUSTER_RESAMPLING!r}")
            clusters = self.count(entry["clusters"], f"{at}.clusters")
            if not 0 < clusters <= n:
                self.broken(f"{at}.clusters", f"is {clusters}, not between 1 and {n} rows")
        return PairedBootstrapResult(
            method=BOOTSTRAP_METHOD,
            quantile_method=QUANTILE_METHOD,
            seed=settings.seed,
            resamples=settings.resamples,
            confidence=settings.confidence,
            n=n,
            intervals=tuple(intervals),
            clusters=clusters,
        )

    def paired_sides(
        self,
        entry: Mapping[str, Any],
        where: str,
        names: Sequence[str],
        n: int,
        sides: tuple[str, str, str, str],
    ) -> tuple[dict[str, MetricValue], dict[str, MetricValue], PairedBootstrapResult]:
        """Read the two sides of a paired result and its intervals.

        A comparison slice (base, adapter, delta) and a matched-pair gap (root,
        target, gaps) are stored alike, so both are read here.

        Args:
            entry: The object holding both sides, the intervals and ``bootstrap``.
            where: Its dotted path, for errors.
            names: The metric names.
            n: Paired rows the bootstrap must count.
            sides: The fields of the low side, the high side and the intervals,
                and how the difference is described (``"target minus root"``).
        """
        low_key, high_key, intervals_key, difference = sides
        low = self.metrics(entry[low_key], f"{where}.{low_key}", names)
        high = self.metrics(entry[high_key], f"{where}.{high_key}", names)
        result = self._paired_result(
            f"{where}.{intervals_key}",
            entry[intervals_key],
            entry["bootstrap"],
            low=low,
            high=high,
            difference=difference,
            n=n,
        )
        return low, high, result

    def model_kind(self, value: object, where: str) -> ModelKind:
        try:
            return check_model_kind(value)
        except InputError as exc:
            self.fail(where, str(exc))

    def model_identity(self, value: object, where: str) -> ModelIdentity:
        """Read the base model and tokenizer identity both report kinds record."""
        model = self.mapping(
            value,
            where,
            frozenset({"base_model", "base_revision", "tokenizer", "tokenizer_revision"}),
        )
        return ModelIdentity(
            base_model=self.text(model["base_model"], f"{where}.base_model"),
            base_revision=self.optional_text(model["base_revision"], f"{where}.base_revision"),
            tokenizer=self.text(model["tokenizer"], f"{where}.tokenizer"),
            tokenizer_revision=self.optional_text(
                model["tokenizer_revision"], f"{where}.tokenizer_revision"
            ),
        )

    def decoding(self, value: object, where: str) -> Decoding:
        """Read decoding settings, refusing any spelling but the canonical one.

        The decoding is part of the gate, so a hand-edited but equivalent
        spelling would make two reports' identities compare unequal as text.
        """
        entry = self.mapping(value, where)
        try:
            decoding = Decoding.from_dict(entry)
        except SommelierError as exc:
            self.fail(where, str(exc))
        if decoding.to_dict() != entry:
            self.fail(where, f"is not in canonical form: {entry!r}")
        return decoding

    def text(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(where, f"must be a non-empty string, got {value!r}")
        return value

    def optional_text(self, value: object, where: str) -> str | None:
        return None if value is None else self.text(value, where)

    def count(self, value: object, where: str) -> int:
        if type(value) is not int or value < 0:
            self.fail(where, f"must be a non-negative integer, got {value!r}")
        return value

    def number(self, value: object, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number, got {value!r}")
        return float(value)

    def format_mismatch(self, value: object, where: str, outputs: int) -> FormatMismatch:
        """Read a ``format_mismatch`` object and check it states what its rule implies.

        Args:
            value: The stored object.
            where: Its dotted field, for messages.
            outputs: How many outputs the report holds (the object must count them all).

        Raises:
            DataError: Missing, unknown or mistyped fields (exit 2).
            InvariantViolationError: Counts that are not the report's, or that
                the rule which writes the object cannot produce (exit 5).
        """
        entry = self.mapping(value, where, frozenset(FORMAT_MISMATCH_FIELDS))
        counted = self.count(entry["outputs"], f"{where}.outputs")
        if counted != outputs:
            self.broken(f"{where}.outputs", f"is {counted} but the report holds {outputs}")
        try:
            return FormatMismatch(
                output_format=self.text(entry["output_format"], f"{where}.output_format"),
                outputs=counted,
                syntax_found=self.count(entry["syntax_found"], f"{where}.syntax_found"),
                other_format=self.text(entry["other_format"], f"{where}.other_format"),
                other_reads_calls=self.count(
                    entry["other_reads_calls"], f"{where}.other_reads_calls"
                ),
            )
        except ValueError as exc:
            self.broken(where, f"cannot come from the format check ({exc})")

    def array(self, value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, f"must be an array, got {type(value).__name__}")
        return value

    def language(self, value: object, where: str) -> str:
        try:
            return validate_language(value)
        except InputError as exc:
            self.fail(where, str(exc))

    def metric_names(self, value: object) -> tuple[str, ...]:
        """Read ``metric_names``: at least one name, none twice."""
        names = tuple(self.text(name, "metric_names") for name in self.array(value, "metric_names"))
        if not names or len(set(names)) != len(names):
            self.fail("metric_names", f"must be unique names, at least one, got {list(names)}")
        return names

    def metrics(self, value: object, where: str, names: Sequence[str]) -> dict[str, MetricValue]:
        entries = self.mapping(value, where, frozenset(names))
        parsed: dict[str, MetricValue] = {}
        for name in names:
            entry = self.mapping(
                entries[name], f"{where}.{name}", frozenset({"value", "numerator", "denominator"})
            )
            try:
                parsed[name] = MetricValue.from_dict(entry)
            except InputError as exc:
                self.fail(f"{where}.{name}", str(exc))
        return parsed

    def same_metrics(
        self, stored: Mapping[str, MetricValue], actual: Mapping[str, MetricValue], where: str
    ) -> None:
        for name, metric in actual.items():
            if stored[name] != metric:
                self.broken(
                    f"{where}.{name}",
                    f"stores {stored[name].numerator}/{stored[name].denominator} but its "
                    f"per-example rows sum to {metric.numerator}/{metric.denominator}",
                )
