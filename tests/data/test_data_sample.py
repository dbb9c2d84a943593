"""``max_examples`` draws a seeded sample stratified by the declared slices (issue 29 #3).

It used to keep the first rows: on an imported BFCL split (categories one after
the other) a quick run measured ``simple_python`` alone and called it "overall".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sommelier_mlflow.data import (
    CONVERSATION_SAMPLE_RULE,
    SAMPLE_RULE,
    TestExample,
    sample_examples,
)
from sommelier_mlflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
GOLD = {"name": "f", "arguments": {}}


def _bfcl_like() -> list[TestExample]:
    """100 rows in category blocks, as import-bfcl writes them: 60, 30 and 10."""
    sizes = {"simple_python": 60, "multiple": 30, "parallel": 10}
    return [
        TestExample(f"{category}_{i:02d}", "en", "q", [], GOLD, slice_values={"category": category})
        for category, size in sizes.items()
        for i in range(size)
    ]


def _translated() -> list[TestExample]:
    """40 English roots; the first 20 have a German translation right after them."""
    rows = []
    for i in range(40):
        rows.append(TestExample(f"en-{i:02d}", "en", "q", [], GOLD))
        if i < 20:
            rows.append(TestExample(f"de-{i:02d}", "de", "q", [], GOLD, f"en-{i:02d}"))
    return rows


def test_every_category_keeps_its_share_where_the_first_rows_held_one() -> None:
    rows = _bfcl_like()
    sample = sample_examples(rows, 10, seed=0, slice_by=["category"])
    counts = Counter(dict(e.slice_values)["category"] for e in sample.examples)
    assert counts == {"simple_python": 6, "multiple": 3, "parallel": 1}
    # The first ten rows, the old rule, are one category.
    assert {dict(e.slice_values)["category"] for e in rows[:10]} == {"simple_python"}
    assert sample.record == {
        "rule": SAMPLE_RULE,
        "seed": 0,
        "max_examples": 10,
        "strata": ["language", "category"],
        "roots": 100,
    }


def test_leftover_units_go_to_the_largest_remainders() -> None:
    # 7 of 100: exact shares 4.2, 2.1 and 0.7; the one left over goes to the 0.7.
    sample = sample_examples(_bfcl_like(), 7, seed=5, slice_by=["category"])
    counts = Counter(dict(e.slice_values)["category"] for e in sample.examples)
    assert counts == {"simple_python": 4, "multiple": 2, "parallel": 1}


def test_translations_come_with_their_roots_and_languages_keep_their_share() -> None:
    sample = sample_examples(_translated(), 10, seed=3)
    ids = [e.example_id for e in sample.examples]
    roots = [i for i in ids if i.startswith("en-")]
    assert len(roots) == 10
    translated = [r for r in roots if int(r[3:]) < 20]
    assert len(translated) == 5  # half the roots have a translation, half the sample too
    assert sorted(i for i in ids if i.startswith("de-")) == sorted(
        "de-" + r[3:] for r in translated
    )
    assert ids == sorted(ids, key=[e.example_id for e in _translated()].index)  # file order


def test_the_same_seed_draws_the_same_sample_on_every_machine() -> None:
    rows = _bfcl_like()
    first = sample_examples(rows, 10, seed=7, slice_by=["category"])
    assert first == sample_examples(list(rows), 10, seed=7, slice_by=["category"])
    assert first != sample_examples(rows, 10, seed=8, slice_by=["category"])
    # Pinned: numpy's PCG64 stream from seed 7 picks these rows wherever it runs.
    assert [e.example_id for e in first.examples] == [
        "simple_python_06",
        "simple_python_12",
        "simple_python_27",
        "simple_python_50",
        "simple_python_56",
        "simple_python_58",
        "multiple_06",
        "multiple_23",
        "multiple_24",
        "parallel_07",
    ]


def test_zero_or_enough_keeps_every_row_and_records_no_sample() -> None:
    rows = _translated()
    for wanted in (0, 40, 41):
        sample = sample_examples(rows, wanted, seed=0)
        assert sample.examples == tuple(rows) and sample.record is None
    with pytest.raises(ConfigError, match="max_examples must be >= 0"):
        sample_examples(rows, -1, seed=0)


def test_the_rule_is_documented_where_users_read_it() -> None:
    for page in ("README.md", "docs/datasets.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert SAMPLE_RULE in text, page


def test_slices_the_scoring_mode_derives_stratify_too() -> None:
    # The calls mode slices by the gold-call count (calls:0, calls:1, calls:2+).
    counts = {0: 20, 1: 60, 2: 20}
    rows = [
        TestExample(f"c{calls}-{i:02d}", "en", "q", [], gold_calls=[GOLD] * calls)
        for calls, size in counts.items()
        for i in range(size)
    ]
    sample = sample_examples(rows, 10, seed=1, scoring="calls")
    assert Counter(len(e.gold_calls) for e in sample.examples) == {0: 2, 1: 6, 2: 2}
    assert sample.record is not None and sample.record["strata"] == ["language", "calls"]


def _conversations() -> list[TestExample]:
    """30 conversations of 1 to 4 turns (``c00-t1`` ...), their turns interleaved in the file.

    The first ten also have a German translation of every turn, and five single-turn
    rows stand between them, so the units are conversations and loose roots alike.
    """
    rows = []
    for turn in range(1, 5):
        for c in range(30):
            if turn > 1 + c % 4:
                continue
            root = TestExample(
                f"c{c:02d}-t{turn}", "en", "q", [], GOLD, conversation_id=f"c{c:02d}", turn=turn
            )
            rows.append(root)
            if c < 10:
                rows.append(
                    TestExample(
                        f"de-c{c:02d}-t{turn}",
                        "de",
                        "q",
                        [],
                        GOLD,
                        root.example_id,
                        conversation_id=f"de-c{c:02d}",
                        turn=turn,
                    )
                )
        rows.append(TestExample(f"single-{turn}", "en", "q", [], GOLD))
    rows.append(TestExample("single-5", "en", "q", [], GOLD))
    return rows


def test_a_conversation_is_sampled_whole_with_every_turn_and_translation() -> None:
    rows = _conversations()
    turns = Counter(e.conversation_id for e in rows)
    for seed in range(5):
        sample = sample_examples(rows, 7, seed=seed)
        kept = Counter(e.conversation_id for e in sample.examples)
        # Every kept conversation has all its turns: none is cut short.
        assert all(n == turns[c] for c, n in kept.items() if c is not None), kept
        english = {c for c in kept if c is not None and not c.startswith("de-")}
        singles = kept[None]
        assert len(english) + singles == 7  # max_examples counts conversations (and loose roots)
        # A translated conversation comes with its root conversation, whole.
        assert {c for c in kept if c is not None and c.startswith("de-")} == {
            "de-" + c for c in english if int(c[1:]) < 10
        }
        ids = [e.example_id for e in sample.examples]
        assert ids == [e.example_id for e in rows if e.example_id in set(ids)]  # file order
        assert sample.record == {
            "rule": CONVERSATION_SAMPLE_RULE,
            "seed": seed,
            "max_examples": 7,
            "strata": ["language"],
            "roots": 35,  # 30 conversations and 5 single-turn roots
        }
    assert sample_examples(rows, 35, seed=0).examples == tuple(rows)
    assert sample_examples(rows, 34, seed=0).record is not None


def test_a_split_without_conversations_keeps_the_first_rules_name() -> None:
    assert sample_examples(_translated(), 10, seed=3).record == {
        "rule": SAMPLE_RULE,
        "seed": 3,
        "max_examples": 10,
        "strata": ["language"],
        "roots": 40,
    }
    assert SAMPLE_RULE != CONVERSATION_SAMPLE_RULE
    for page in ("README.md", "docs/conversations.md", "docs/own-model.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert CONVERSATION_SAMPLE_RULE in text, page
