"""One secret rule for the whole package: what is masked in a param is masked everywhere."""

from __future__ import annotations

import pytest

from sommelier_mlflow._redact import (
    REDACTED,
    contains_secret,
    is_secret_key,
    redact,
    redact_registered,
    redact_value,
    register_secret,
)
from sommelier_mlflow.metrics import MeasureSpec

SECRET_NAMES = [
    "hf_token",
    "access_token",
    "db_credential",
    "credentials",
    "user_password",
    "passwd",
    "client_secret",
    "api_key",
    "openai-api-key",
    "apikey",
    "aws_access_key",
]
PLAIN_NAMES = ["max_new_tokens", "tokenizer", "segmentation", "model", "n"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_metric_spec_masks_exactly_what_params_mask(name: str) -> None:
    value = "value-that-must-not-show"
    spec = MeasureSpec(name="PluginMetric", config={name: value})
    assert is_secret_key(name)
    assert redact_value({name: value}) == {name: REDACTED}
    assert spec.redacted()["config"] == {name: REDACTED}
    assert value not in repr(spec)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_plain_names_are_shown(name: str) -> None:
    assert not is_secret_key(name)
    assert MeasureSpec(name="PluginMetric", config={name: "gpt2"}).redacted()["config"] == {
        name: "gpt2"
    }


def test_metric_spec_scrubs_credentials_under_innocent_keys() -> None:
    spec = MeasureSpec(name="CountsMetric", config={"segmentation": "https://ann:pw-123@hub/x"})
    assert spec.redacted()["config"]["segmentation"] == f"https://{REDACTED}@hub/x"
    assert spec.config["segmentation"] == "https://ann:pw-123@hub/x"  # the data stays usable


@pytest.mark.parametrize(
    "text",
    [
        "https://user:pw@host/model",
        "hf_abcdefghijklmnopqrstuvwxyz0123",
        "sk-abcdefghijklmnopqrstuvwxyz012345",
        "ghp_abcdefghijklmnopqrstuvwxyz012345",
        "https://host/x?token=abc123",
    ],
)
def test_contains_secret_finds_credentials(text: str) -> None:
    assert contains_secret(text)
    assert REDACTED in redact(text)


@pytest.mark.parametrize(
    "text", ["gpt2", "Qwen/Qwen2.5-0.5B-Instruct", "/tmp/adapter", "max_new_tokens=64", "ask-me"]
)
def test_contains_secret_leaves_ordinary_values(text: str) -> None:
    assert not contains_secret(text)
    assert redact(text) == text


def test_explicit_secrets_are_scrubbed_even_if_not_exported() -> None:
    token = "opaque-value-4711"
    assert redact(f"401 for token {token}", secrets=[token, None]) == f"401 for token {REDACTED}"
    assert redact_value({"msg": [token]}, secrets=[token]) == {"msg": [REDACTED]}


def test_environment_secret_values_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_CREDENTIAL", "from-the-environment-99")
    assert redact("using from-the-environment-99 now") == f"using {REDACTED} now"


def test_a_registered_secret_is_redacted_everywhere_whatever_its_name() -> None:
    key = "plain-looking-value-4e1f0c"  # no secret-looking name or shape
    assert redact(f"version {key}") == f"version {key}"
    register_secret(key)
    register_secret("EMPTY")  # a placeholder, too short to be a key: ignored
    assert redact(f"version {key}") == f"version {REDACTED}"
    assert redact_value({"server.server_version": key}) == {"server.server_version": REDACTED}
    # Exact replacement only: completions keep everything else byte for byte.
    answer = {"choices": [{"text": f'{{"token=1": "{key}", "v": "EMPTY"}}'}]}
    assert redact_registered(answer) == {
        "choices": [{"text": f'{{"token=1": "{REDACTED}", "v": "EMPTY"}}'}]
    }
