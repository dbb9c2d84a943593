"""Reading, checking and writing ``evaluation_report.json``.

A comparison is computed from two report files alone, possibly downloaded
from two MLflow runs months apart, so the reader trusts nothing: the schema
version and every field are checked (unknown or missing ones are refused),
and every aggregate is recomputed from the per-example components stored in
the same file. A report whose metrics, prompt-set digests or pair-set digests
disagree with its own rows was edited or corrupted and is refused as an
invariant violation; a malformed one is a data error naming the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import numpy as np
from numpy.typing import NDArray

from sommelier_mlflow._json import JSONDecodeError, atomic_write_json, loads
from sommelier_mlflow.data import (
    EVALUATION_REPORT_SCHEMA,
    Decoding,
    check_model_kind,
    validate_language,
)
from sommelier_mlflow.errors import DataError, InputError, InvariantViolationError, SommelierError
from sommelier_mlflow.evaluation._digests import pair_set_digest, prompt_set_digest
from sommelier_mlflow.evaluation._scoring import ScoredRun, metrics_from_components
from sommelier_mlflow.toolcalls import PARSE_STATUSES, MetricValue

__all__ = [
    "EVALUATION_REPORT_FILENAME",
    "ArmReport",
    "load_evaluation_report",
    "parse_evaluation_report",
    "read_evaluation_report",
    "validate_evaluation_report",
    "write_evaluation_report",
]

EVALUATION_REPORT_FILENAME: Final = "evaluation_report.json"

_TOP_KEYS: Final = frozenset(
    {
        "schema_version",
        "identity",
        "metric_names",
        "examples",
        "metrics",
        "slices",
        "paired_slices",
        "bootstrap",
        "per_example",
    }
)
_IDENTITY_KEYS: Final = frozenset(
    {
        "model_kind",
        "model_identity",
        "adapter",
        "parser_version",
        "decoding",
        "test_split_sha256",
        "prompt_set_sha256",
    }
)
_MODEL_IDENTITY_KEYS: Final = frozenset(
    {"base_model", "base_revision", "tokenizer", "tokenizer_revision"}
)
_ADAPTER_KEYS: Final = frozenset({"source", "sha256"})
_BOOTSTRAP_KEYS: Final = frozenset({"method", "quantile_method", "seed", "resamples", "confidence"})
_GAP_BOOTSTRAP_KEYS: Final = _BOOTSTRAP_KEYS | {"n"}
_SLICE_KEYS: Final = frozenset({"examples", "metrics", "prompt_set_sha256"})
_PAIRED_KEYS: Final = frozenset(
    {
        "root_language",
        "pairs",
        "pair_ids",
        "coverage",
        "pair_set_sha256",
        "root_metrics",
        "target_metrics",
        "gaps",
        "bootstrap",
    }
)
_COVERAGE_KEYS: Final = frozenset(
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
_ROW_KEYS: Final = frozenset(
    {"example_id", "language", "prompt_sha256", "parse_status", "numerators", "denominators"}
)
_INTERVAL_KEYS: Final = frozenset({"value", "lower", "upper"})


@dataclass(frozen=True, eq=False)
class ArmReport:
    """A checked evaluation report plus its per-example components as arrays.

    Attributes:
        report: The report document itself.
        source: Where it came from (a path or a label), for messages.
        metric_names: Metric names in column order.
        example_ids: Example ids in row order (sorted).
        languages: Each row's language.
        numerators: ``(n, m)`` int64 components.
        denominators: ``(n, m)`` int64 components.
    """

    report: dict[str, Any]
    source: str
    metric_names: tuple[str, ...]
    example_ids: tuple[str, ...]
    languages: tuple[str, ...]
    numerators: NDArray[np.int64]
    denominators: NDArray[np.int64]


class _Checker:
    """Field checks that name the report and the dotted field that failed."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> NoReturn:
        raise DataError(f"{where}: {message}", path=self.source)

    def broken(self, where: str, message: str) -> NoReturn:
        raise InvariantViolationError(
            f"{self.source}: {where}: {message}; the report was edited or corrupted, "
            "regenerate it with `score`"
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

    def array(self, value: object, where: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(where, f"must be an array, got {type(value).__name__}")
        return value

    def language(self, value: object, where: str) -> str:
        try:
            return validate_language(value)
        except InputError as exc:
            self.fail(where, str(exc))

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


def _check_identity(check: _Checker, identity: dict[str, Any]) -> None:
    try:
        check_model_kind(identity["model_kind"])
    except InputError as exc:
        check.fail("identity.model_kind", str(exc))
    model = check.mapping(
        identity["model_identity"], "identity.model_identity", _MODEL_IDENTITY_KEYS
    )
    check.text(model["base_model"], "identity.model_identity.base_model")
    check.optional_text(model["base_revision"], "identity.model_identity.base_revision")
    check.text(model["tokenizer"], "identity.model_identity.tokenizer")
    check.optional_text(model["tokenizer_revision"], "identity.model_identity.tokenizer_revision")
    if identity["adapter"] is not None:
        adapter = check.mapping(identity["adapter"], "identity.adapter", _ADAPTER_KEYS)
        check.text(adapter["source"], "identity.adapter.source")
        check.text(adapter["sha256"], "identity.adapter.sha256")
    check.text(identity["parser_version"], "identity.parser_version")
    try:
        Decoding.from_dict(check.mapping(identity["decoding"], "identity.decoding"))
    except SommelierError as exc:
        check.fail("identity.decoding", str(exc))
    check.text(identity["test_split_sha256"], "identity.test_split_sha256")
    prompt_sets = check.mapping(identity["prompt_set_sha256"], "identity.prompt_set_sha256")
    for language, digest in prompt_sets.items():
        check.text(digest, f"identity.prompt_set_sha256.{language}")


def _check_bootstrap(
    check: _Checker, value: object, where: str, keys: frozenset[str]
) -> dict[str, Any]:
    settings = check.mapping(value, where, keys)
    check.text(settings["method"], f"{where}.method")
    check.text(settings["quantile_method"], f"{where}.quantile_method")
    if isinstance(settings["seed"], bool) or not isinstance(settings["seed"], int):
        check.fail(f"{where}.seed", f"must be an integer, got {settings['seed']!r}")
    if check.count(settings["resamples"], f"{where}.resamples") < 1:
        check.fail(f"{where}.resamples", "must be at least 1")
    confidence = check.number(settings["confidence"], f"{where}.confidence")
    if not 0.0 < confidence < 1.0:
        check.fail(f"{where}.confidence", f"must be strictly between 0 and 1, got {confidence}")
    return settings


def _check_rows(
    check: _Checker, value: object, names: Sequence[str]
) -> tuple[list[str], list[str], list[str], NDArray[np.int64], NDArray[np.int64]]:
    rows = check.array(value, "per_example")
    width = len(names)
    ids: list[str] = []
    languages: list[str] = []
    prompts: list[str] = []
    numerators: list[list[int]] = []
    denominators: list[list[int]] = []
    previous = ""
    for index, raw in enumerate(rows):
        where = f"per_example[{index}]"
        row = check.mapping(raw, where, _ROW_KEYS)
        example_id = check.text(row["example_id"], f"{where}.example_id")
        if ids and example_id <= previous:
            check.fail(
                f"{where}.example_id",
                f"{example_id!r} is out of order or duplicated; rows are sorted by example_id",
            )
        previous = example_id
        ids.append(example_id)
        languages.append(check.text(row["language"], f"{where}.language"))
        prompts.append(check.text(row["prompt_sha256"], f"{where}.prompt_sha256"))
        if row["parse_status"] not in PARSE_STATUSES:
            check.fail(f"{where}.parse_status", f"unknown status {row['parse_status']!r}")
        for key, target in (("numerators", numerators), ("denominators", denominators)):
            counts = check.array(row[key], f"{where}.{key}")
            if len(counts) != width or any(type(item) is not int or item < 0 for item in counts):
                check.fail(
                    f"{where}.{key}", f"must be {width} non-negative integers, got {counts!r}"
                )
            target.append(counts)
    try:
        num = np.array(numerators, dtype=np.int64).reshape(len(rows), width)
        den = np.array(denominators, dtype=np.int64).reshape(len(rows), width)
    except OverflowError:
        check.fail("per_example", "a count does not fit in 64 bits")
    bad = np.flatnonzero((num > den).any(axis=1))
    if bad.size:
        check.fail(f"per_example[{int(bad[0])}]", "a numerator exceeds its denominator")
    return ids, languages, prompts, num, den


def _check_paired(
    check: _Checker,
    language: str,
    value: object,
    names: Sequence[str],
    slices: Mapping[str, dict[str, Any]],
    row_of: Mapping[str, int],
    languages: Sequence[str],
    prompts: Sequence[str],
    numerators: NDArray[np.int64],
    denominators: NDArray[np.int64],
) -> None:
    where = f"paired_slices.{language}"
    paired = check.mapping(value, where, _PAIRED_KEYS)
    if language not in slices:
        check.fail(where, f"target language {language!r} is not among the slices")
    root_language = check.text(paired["root_language"], f"{where}.root_language")
    if root_language not in slices or root_language == language:
        check.fail(f"{where}.root_language", f"{root_language!r} is not another evaluated slice")
    pair_ids = check.array(paired["pair_ids"], f"{where}.pair_ids")
    count = check.count(paired["pairs"], f"{where}.pairs")
    if count == 0 or count != len(pair_ids):
        check.fail(f"{where}.pairs", f"{count} does not match {len(pair_ids)} listed pairs")
    root_rows: list[int] = []
    target_rows: list[int] = []
    previous = ""
    for index, pair in enumerate(pair_ids):
        at = f"{where}.pair_ids[{index}]"
        items = check.array(pair, at)
        if len(items) != 2:
            check.fail(at, "must be [root_id, target_id]")
        root_id = check.text(items[0], at)
        target_id = check.text(items[1], at)
        if target_rows and target_id <= previous:
            check.fail(at, "pairs must be sorted by target id without repeats")
        previous = target_id
        if root_id not in row_of or target_id not in row_of:
            check.broken(at, "names an example that is not in per_example")
        root_row, target_row = row_of[root_id], row_of[target_id]
        if languages[root_row] != root_language or languages[target_row] != language:
            check.broken(at, f"does not join a {root_language} root to a {language} target")
        root_rows.append(root_row)
        target_rows.append(target_row)
    digest = pair_set_digest(
        (
            pair_ids[index][0],
            pair_ids[index][1],
            prompts[root_rows[index]],
            prompts[target_rows[index]],
        )
        for index in range(count)
    )
    if digest != paired["pair_set_sha256"]:
        check.broken(f"{where}.pair_set_sha256", "does not match the listed pairs and prompts")

    coverage = check.mapping(paired["coverage"], f"{where}.coverage", _COVERAGE_KEYS)
    expected = {
        "target_rows": slices[language]["examples"],
        "paired_targets": count,
        "root_rows": slices[root_language]["examples"],
        "paired_roots": len(set(root_rows)),
    }
    for key, wanted in expected.items():
        if coverage[key] != wanted:
            check.broken(f"{where}.coverage.{key}", f"is {coverage[key]!r}, rows say {wanted}")
    check.count(coverage["unmatched_targets"], f"{where}.coverage.unmatched_targets")
    if (
        coverage["target"] != count / expected["target_rows"]
        or coverage["root"] != expected["paired_roots"] / expected["root_rows"]
    ):
        check.broken(f"{where}.coverage", "rates disagree with the counts")

    roots = np.array(root_rows, dtype=np.int64)
    targets = np.array(target_rows, dtype=np.int64)
    root_metrics = check.metrics(paired["root_metrics"], f"{where}.root_metrics", names)
    target_metrics = check.metrics(paired["target_metrics"], f"{where}.target_metrics", names)
    check.same_metrics(
        root_metrics,
        metrics_from_components(numerators[roots], denominators[roots], names),
        f"{where}.root_metrics",
    )
    check.same_metrics(
        target_metrics,
        metrics_from_components(numerators[targets], denominators[targets], names),
        f"{where}.target_metrics",
    )
    gaps = check.mapping(paired["gaps"], f"{where}.gaps", frozenset(names))
    for name in names:
        gap = check.mapping(gaps[name], f"{where}.gaps.{name}", _INTERVAL_KEYS)
        value = check.number(gap["value"], f"{where}.gaps.{name}.value")
        lower = check.number(gap["lower"], f"{where}.gaps.{name}.lower")
        upper = check.number(gap["upper"], f"{where}.gaps.{name}.upper")
        if value != target_metrics[name].value - root_metrics[name].value:
            check.broken(f"{where}.gaps.{name}.value", "is not target minus root")
        if not lower <= upper:
            check.broken(f"{where}.gaps.{name}", f"lower {lower} exceeds upper {upper}")
    settings = _check_bootstrap(
        check, paired["bootstrap"], f"{where}.bootstrap", _GAP_BOOTSTRAP_KEYS
    )
    if settings["n"] != count:
        check.broken(f"{where}.bootstrap.n", f"is {settings['n']!r} but there are {count} pairs")


def parse_evaluation_report(report: object, *, source: str) -> ArmReport:
    """Check an evaluation report completely and expose its per-example arrays.

    Args:
        report: The decoded JSON document.
        source: A path or label used in error messages.

    Returns:
        The checked report with its components as arrays.

    Raises:
        DataError: Wrong or missing ``schema_version``, missing, unknown or
            mistyped fields (exit 2).
        InvariantViolationError: Stored aggregates or digests that disagree
            with the report's own per-example rows (exit 5).
    """
    check = _Checker(source)
    top = check.mapping(report, "report")
    if "schema_version" not in top:
        check.fail("schema_version", "missing; this is not a sommelier_mlflow evaluation report")
    if top["schema_version"] != EVALUATION_REPORT_SCHEMA:
        check.fail(
            "schema_version",
            f"unsupported {top['schema_version']!r}; "
            f"this version reads {EVALUATION_REPORT_SCHEMA!r}",
        )
    check.mapping(top, "report", _TOP_KEYS)
    identity = check.mapping(top["identity"], "identity", _IDENTITY_KEYS)
    _check_identity(check, identity)

    names_raw = check.array(top["metric_names"], "metric_names")
    names = tuple(check.text(name, "metric_names") for name in names_raw)
    if not names or len(set(names)) != len(names):
        check.fail("metric_names", f"must be unique names, at least one, got {list(names)}")
    _check_bootstrap(check, top["bootstrap"], "bootstrap", _BOOTSTRAP_KEYS)

    ids, languages, prompts, numerators, denominators = _check_rows(
        check, top["per_example"], names
    )
    if not ids:
        check.fail("per_example", "is empty; a report covers at least one example")
    if check.count(top["examples"], "examples") != len(ids):
        check.broken("examples", f"is {top['examples']} but per_example holds {len(ids)} rows")
    check.same_metrics(
        check.metrics(top["metrics"], "metrics", names),
        metrics_from_components(numerators, denominators, names),
        "metrics",
    )

    slices = check.mapping(top["slices"], "slices")
    language_array = np.array(languages)
    if set(slices) != set(languages):
        check.broken("slices", f"are {sorted(slices)} but rows have {sorted(set(languages))}")
    prompt_sets = identity["prompt_set_sha256"]
    if set(prompt_sets) != set(slices):
        check.broken("identity.prompt_set_sha256", "does not name exactly the slices")
    for language, raw in slices.items():
        where = f"slices.{language}"
        check.language(language, where)
        entry = check.mapping(raw, where, _SLICE_KEYS)
        rows = np.flatnonzero(language_array == language)
        if check.count(entry["examples"], f"{where}.examples") != rows.size:
            check.broken(f"{where}.examples", f"is {entry['examples']}, rows say {rows.size}")
        check.same_metrics(
            check.metrics(entry["metrics"], f"{where}.metrics", names),
            metrics_from_components(numerators[rows], denominators[rows], names),
            f"{where}.metrics",
        )
        digest = prompt_set_digest([prompts[row] for row in rows])
        if entry["prompt_set_sha256"] != digest or prompt_sets[language] != digest:
            check.broken(f"{where}.prompt_set_sha256", "does not match the rows' prompt digests")

    row_of = {example_id: row for row, example_id in enumerate(ids)}
    paired_slices = check.mapping(top["paired_slices"], "paired_slices")
    for language, raw in paired_slices.items():
        _check_paired(
            check,
            language,
            raw,
            names,
            slices,
            row_of,
            languages,
            prompts,
            numerators,
            denominators,
        )
    return ArmReport(
        report=top,
        source=source,
        metric_names=names,
        example_ids=tuple(ids),
        languages=tuple(languages),
        numerators=numerators,
        denominators=denominators,
    )


def validate_evaluation_report(report: object, *, source: str = "evaluation report") -> None:
    """Refuse a report that is malformed or inconsistent with its own rows.

    Raises:
        DataError: Malformed report (exit 2).
        InvariantViolationError: Inconsistent report (exit 5).
    """
    parse_evaluation_report(report, source=source)


def read_evaluation_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and completely check an ``evaluation_report.json``.

    Raises:
        DataError: Unreadable, not strict JSON, or malformed (exit 2).
        InvariantViolationError: Aggregates disagree with the rows (exit 5).
    """
    return load_evaluation_report(path).report


def load_evaluation_report(path: str | os.PathLike[str]) -> ArmReport:
    """Read and check a report file, keeping its component arrays for a comparison.

    Raises:
        DataError: Unreadable, not strict JSON, or malformed (exit 2).
        InvariantViolationError: Aggregates disagree with the rows (exit 5).
    """
    source = os.fspath(path)
    try:
        data = loads(Path(source).read_bytes())
    except OSError as exc:
        raise DataError(
            f"cannot read evaluation report: {exc.strerror or exc}", path=source
        ) from exc
    except JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc}", path=source) from exc
    return parse_evaluation_report(data, source=source)


def write_evaluation_report(
    path: str | os.PathLike[str], report: ScoredRun | Mapping[str, Any]
) -> Path:
    """Check and atomically write an evaluation report.

    Args:
        path: Target file (conventionally ``evaluation_report.json``).
        report: A scored run or a report document.

    Returns:
        The written path.

    Raises:
        DataError: If a given document is malformed; nothing is written.
        InvariantViolationError: If a given document is inconsistent; nothing is written.
    """
    if isinstance(report, ScoredRun):
        # Built from checked objects by this package: re-checking 20,000 rows would
        # only re-derive what score_run just computed.
        document = report.to_report()
    else:
        document = dict(report)
        parse_evaluation_report(document, source=os.fspath(path))
    return atomic_write_json(path, document)
