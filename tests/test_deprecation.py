"""Issue 31's renames: every old name still works for one release, and says so.

A user's code written against the old vocabulary must keep running: the
old names resolve to the very same objects (not copies), warn with a
``DeprecationWarning`` that names the new spelling, and DESIGN's contract
names (``BaseMetric``, ``MetricSpec``, ...) resolve without a warning.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import warnings
from types import ModuleType

import pytest

from sommelier_mlflow._deprecation import DOCUMENTED, RENAMED
from sommelier_mlflow.errors import InputError
from sommelier_mlflow.evaluation import AnsweredExample, BootstrapSettings, score_completions
from sommelier_mlflow.toolcalls import CallMatch, ScoringMode, scoring_mode
from tests.test_public_api import PACKAGES as PUBLIC_PACKAGES

# Every package whose ``__all__`` may hold a renamed name.
PACKAGES = (*PUBLIC_PACKAGES, "sommelier_mlflow.metrics.builtin")


def _exporters(new: str) -> list[ModuleType]:
    modules = [importlib.import_module(name) for name in PACKAGES]
    return [module for module in modules if new in module.__all__]


ALIASES = [
    (module.__name__, old, new)
    for old, new in sorted(RENAMED.items())
    for module in _exporters(new)
]
SILENT = [
    (module.__name__, old, new)
    for old, new in sorted(DOCUMENTED.items())
    for module in _exporters(new)
]


def test_every_renamed_name_is_exported_under_its_new_name_somewhere() -> None:
    for new in [*RENAMED.values(), *DOCUMENTED.values()]:
        assert _exporters(new), f"{new} is in no package's __all__"
    assert not set(RENAMED) & set(DOCUMENTED)


@pytest.mark.parametrize(("package", "old", "new"), ALIASES)
def test_an_old_name_resolves_to_the_new_object_and_warns(package: str, old: str, new: str) -> None:
    module = importlib.import_module(package)
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {package}.{new}"):
        value = getattr(module, old)
    assert value is getattr(module, new)
    assert old not in module.__all__


@pytest.mark.parametrize(("package", "old", "new"), SILENT)
def test_designs_names_resolve_silently_to_the_new_object(package: str, old: str, new: str) -> None:
    module = importlib.import_module(package)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = getattr(module, old)
    assert value is getattr(module, new)
    assert old not in module.__all__


def test_from_import_of_an_old_name_warns_at_the_users_line() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from sommelier_mlflow import CallComparison  # noqa: F401
    assert caught[0].filename == __file__


def test_designs_list_still_imports_from_the_top_level() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from sommelier_mlflow import (  # noqa: F401
            BaseMetric,
            CompositeMetric,
            CountsMetric,
            EvaluationResult,
            JsonFormatMetric,
            MetricSpec,
            get_metric,
            register_metric,
        )
    assert MetricSpec(name="CountsMetric").build().score("a b") == {"CountsMetric": 3}


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import sommelier_mlflow

    with pytest.raises(AttributeError, match="no attribute 'CallsComparison'"):
        _ = sommelier_mlflow.CallsComparison  # only toolcalls ever exported it
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = sommelier_mlflow.NoSuchName


def test_scoring_mode_compare_is_match_and_warns() -> None:
    mode = scoring_mode("single")
    with pytest.warns(
        DeprecationWarning, match=r"ScoringMode.compare is renamed ScoringMode.match"
    ):
        compare = mode.compare
    assert compare is mode.match
    fields = {f.name: getattr(mode, f.name) for f in dataclasses.fields(mode) if f.name != "match"}
    with pytest.warns(DeprecationWarning, match=r"ScoringMode\(compare=...\)"):
        rebuilt = ScoringMode(**fields, compare=mode.match)
    assert rebuilt == mode
    gold = mode.make_gold([{"name": "f", "arguments": {}}])
    matched = rebuilt.match(mode.parse_json('{"name": "f", "arguments": {}}'), gold)
    assert isinstance(matched, CallMatch)
    assert matched.name_correct


def _answered() -> list[AnsweredExample]:
    gold = {"name": "get_weather", "arguments": {"city": "Paris"}}
    return [
        AnsweredExample(
            example_id=f"ex-{index}",
            language="en",
            source_example_id=None,
            gold_call=gold,
            raw_text=json.dumps(gold if index % 2 else {"name": "get_time", "arguments": {}}),
        )
        for index in range(4)
    ]


def test_score_completions_takes_answered_and_its_old_keyword_with_a_warning() -> None:
    settings = BootstrapSettings(seed=3, resamples=10, confidence=0.95)
    new = score_completions(answered=_answered(), bootstrap=settings, gap_scope="base")
    with pytest.warns(DeprecationWarning, match=r"score_completions\(answered=...\)"):
        old = score_completions(completions=_answered(), bootstrap=settings, gap_scope="base")
    assert old.examples == new.examples
    assert old.metrics == new.metrics
    assert new.metrics["full_call_exact_match"].numerator == 2
    with pytest.raises(InputError, match="give only answered="):
        score_completions(
            _answered(), completions=_answered(), bootstrap=settings, gap_scope="base"
        )
