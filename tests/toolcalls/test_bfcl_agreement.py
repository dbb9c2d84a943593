"""``--scoring bfcl`` agrees with BFCL's own AST checker on every default-category question.

BFCL's checker is run from its published wheel (``bfcl-eval``, fetched from
PyPI without its dependencies and cached; see ``tests/support/bfcl_reference.py``),
and this package's rules are run on the split ``import-bfcl`` makes from the
same wheel's data. For each of the 1,240 questions of the five default
categories, outputs are derived from the possible answers: correct ones,
acceptable alternatives, omitted optionals, case and spacing variants,
int/float swaps, numbers as strings, wrong values, extra and missing
parameters, wrong names, reordered, duplicated and missing calls, and on
``irrelevance`` abstaining, calling, and an undecodable output.

Two figures come out: how often this mode's verdict equals BFCL's, and
whether every difference is one of the two documented deliberate ones
(undecodable output on ``irrelevance``; a complete pairing BFCL's greedy
pairing misses). ``BfclVerdict.bfcl_passed``, this package's statement of
what BFCL concludes, must equal BFCL's conclusion on every output.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sommelier_mlflow.data import BFCL_DEFAULT_CATEGORIES, BfclImportResult, import_bfcl
from sommelier_mlflow.toolcalls._bfcl import BfclGold, check_bfcl
from tests.support.bfcl_reference import (
    BfclReference,
    derived_outputs,
    load_bfcl,
    read_bfcl_category,
)


@pytest.fixture(scope="module")
def reference() -> BfclReference:
    return load_bfcl()


@pytest.fixture(scope="module")
def imported(
    reference: BfclReference, tmp_path_factory: pytest.TempPathFactory
) -> BfclImportResult:
    return import_bfcl(reference.data_dir, tmp_path_factory.mktemp("bfcl") / "bfcl.jsonl")


def test_every_default_category_question_is_imported(imported: BfclImportResult) -> None:
    result = imported
    assert result.summary["kept"] == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
    }
    assert result.summary["kept_total"] == 1240


def test_verdicts_agree_with_bfcls_checker_on_derived_outputs(
    reference: BfclReference, imported: BfclImportResult
) -> None:
    rows = {row["example_id"]: row for row in imported.rows}
    outputs = 0
    agree = 0
    unexplained: list[str] = []
    differences: Counter[str] = Counter()
    for category in BFCL_DEFAULT_CATEGORIES:
        for question, answers in read_bfcl_category(reference.data_dir, category):
            row = rows[question["id"]]
            gold = BfclGold(row["gold_calls"])
            for name, calls in derived_outputs(category, question["function"], answers):
                theirs = reference.verdict(category, question["function"], answers, calls)
                ours = check_bfcl(calls, gold)
                outputs += 1
                agree += ours.passed == theirs
                if ours.bfcl_passed != theirs:
                    unexplained.append(f"{question['id']} {name}: BFCL {theirs}, ours {ours}")
                if ours.passed != theirs:
                    kind = "undecodable" if ours.reason == "undecodable" else "complete_pairing"
                    differences[kind] += 1
                    if kind == "complete_pairing":
                        differences[f"{question['id']} {name}"] += 1
    print(
        f"\nBFCL agreement: {agree}/{outputs} outputs ({agree / outputs:.4%}); "
        f"deliberate differences: {dict(differences)}"
    )
    assert unexplained == []
    assert outputs == 14_960
    # Every difference is a documented one: the 240 undecodable irrelevance
    # outputs, and one parallel answer BFCL's greedy pairing misses.
    assert differences == {
        "undecodable": 240,
        "complete_pairing": 1,
        "parallel_178 reordered": 1,
    }
    assert agree == outputs - 241
