from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sommelier_mlflow.errors import DependencyError, MetricConfigError
from sommelier_mlflow.metrics import CountsConfig, CountsMeasure, count_encodings

VOCAB = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "!": 5}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word-level tokenizer saved locally, so counts are known exactly and nothing downloads."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    directory = tmp_path_factory.mktemp("wordlevel-tokenizer")
    fast.save_pretrained(directory)
    return directory


def test_default_counts_stripped_characters() -> None:
    metric = CountsMeasure()
    assert metric.config == {
        "segments": "characters",
        "segmentation": None,
        "hf_token": None,
        "revision": None,
        "allow_unpinned": False,
    }
    assert metric.evaluate("  héllo, 世界 \n") == {"CountsMetric": 9}
    assert metric.evaluate("") == {"CountsMetric": 0}
    assert metric.evaluate(" \t\n ") == {"CountsMetric": 0}


def test_null_segments_means_characters_and_segmentation_is_ignored() -> None:
    metric = CountsMeasure.from_config(json_payload='{"segments": null, "segmentation": "x"}')
    assert metric.config["segments"] == "characters"
    assert metric.evaluate(" ab ") == {"CountsMetric": 2}


def test_tokens_whitespace_is_the_default() -> None:
    metric = CountsMeasure(segments="tokens")
    assert metric.config["segmentation"] == "whitespace"
    assert metric.evaluate("Don't  stop—now!!\n\tok") == {"CountsMetric": 3}
    assert metric.evaluate("   ") == {"CountsMetric": 0}


def test_tokens_wordpunct_splits_words_and_punctuation_runs() -> None:
    metric = CountsMeasure(segments="tokens", segmentation="wordpunct")
    # Don | ' | t | stop | — | now | !! | ok
    assert metric.evaluate("Don't  stop—now!!\n\tok") == {"CountsMetric": 8}
    assert metric.evaluate('{"a": [1, 2]}') == {"CountsMetric": 8}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"segments": "bytes"}, "segments: Input should be"),
        ({"segments": "tokens", "segmentation": "bpe"}, "must be one of"),
        ({"segments": "encodings"}, "needs segmentation"),
        ({"segments": "encodings", "segmentation": "   "}, "needs segmentation"),
        ({"segments": "tokens", "surplus": 1}, "Extra inputs"),
        ({"segments": "tokens", "segmentation": 3}, "valid string"),
    ],
)
def test_invalid_configurations(params: dict[str, object], message: str) -> None:
    with pytest.raises(MetricConfigError, match=message):
        CountsMeasure(**params)


def test_config_schema_is_counts_config() -> None:
    assert CountsMeasure.config_schema is CountsConfig
    assert CountsMeasure.value_type is int


def test_encodings_with_local_tokenizer(tokenizer_dir: Path) -> None:
    metric = CountsMeasure(segments="encodings", segmentation=str(tokenizer_dir))
    # hello | world | ! | [UNK]; the [CLS]/[SEP] framing is not counted.
    assert metric.evaluate("hello world! foo") == {"CountsMetric": 4}
    assert metric.evaluate("  ") == {"CountsMetric": 0}
    assert count_encodings("hello hello", str(tokenizer_dir)) == 2


def test_hf_token_is_masked_everywhere_shown(tokenizer_dir: Path) -> None:
    metric = CountsMeasure(
        segments="encodings", segmentation=str(tokenizer_dir), hf_token="hf_TOPSECRET"
    )
    assert metric.evaluate("world") == {"CountsMetric": 1}
    assert metric.config["hf_token"] == "**********"
    assert "hf_TOPSECRET" not in repr(metric)
    assert "hf_TOPSECRET" not in repr(metric.settings)


def test_missing_local_tokenizer_is_a_dependency_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tokenizer"
    with pytest.raises(DependencyError, match="No tokenizer directory") as info:
        CountsMeasure(segments="encodings", segmentation=str(missing))
    assert str(missing) in str(info.value)
    assert info.value.exit_code == 3
    with pytest.raises(DependencyError, match="hub model id"):
        count_encodings("x", "./definitely/not/here")


def test_uncached_hub_model_offline_is_a_dependency_error_without_leaking_token() -> None:
    with pytest.raises(DependencyError, match="hf_token or set HF_TOKEN") as info:
        CountsMeasure(
            segments="encodings",
            segmentation="sommelier-tests/no-such-model",
            revision="0123456789abcdef0123456789abcdef01234567",
            hf_token="hf_LEAKCHECK",
        )
    assert "hf_LEAKCHECK" not in str(info.value)
    assert info.value.__cause__ is None


def test_missing_transformers_is_a_dependency_error(
    tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(DependencyError, match="pip install 'transformers"):
        # A token not used before, so the tokenizer cache cannot answer.
        CountsMeasure(
            segments="encodings", segmentation=str(tokenizer_dir), hf_token="hf_fresh_key"
        )


def test_a_hub_tokenizer_must_be_pinned_unless_explicitly_not(tokenizer_dir: Path) -> None:
    with pytest.raises(MetricConfigError, match="must be pinned"):
        CountsMeasure(segments="encodings", segmentation="sommelier-tests/no-such-model")
    with pytest.raises(MetricConfigError, match="must be pinned"):
        count_encodings("x", "sommelier-tests/no-such-model")
    with pytest.raises(MetricConfigError, match="revision"):
        CountsMeasure(segments="encodings", segmentation=str(tokenizer_dir), revision=" ")
    # The opt-out is explicit and gets as far as loading (offline: not cached).
    with pytest.raises(DependencyError, match="Cannot load the tokenizer"):
        CountsMeasure(
            segments="encodings",
            segmentation="sommelier-tests/no-such-model",
            allow_unpinned=True,
        )
    # A local directory is pinned by its files: no revision needed.
    local = CountsMeasure(segments="encodings", segmentation=str(tokenizer_dir))
    assert local.evaluate("hello world") == {"CountsMetric": 2}
