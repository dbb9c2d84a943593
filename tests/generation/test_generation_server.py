"""The ``server`` backend against a scripted OpenAI-compatible server on loopback.

These cover what a healthy vLLM never does (wrong choices, 503s, a refused
key) and every check made before generation. The same backend against a real
vLLM is in ``test_generation_vllm.py``.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import Decoding, TestExample
from sommelier_mlflow.errors import ConfigError, DependencyError, InvariantViolationError
from sommelier_mlflow.generation import (
    ServerGenerator,
    ServerTransport,
    backend_spec,
    run_generation,
)
from tests.generation.generation_helpers import TinyModels
from tests.support.openai_stub import echo_responder, finishes_within, running_stub

KEY = "sk-planted-0123456789abcdef"


def _models(base: str, adapter_parent: str | None = None) -> list[dict[str, Any]]:
    models = [{"id": "base-model", "object": "model", "root": base, "parent": None}]
    if adapter_parent is not None:
        models.append(
            {"id": "tuned", "object": "model", "root": "/srv/lora", "parent": adapter_parent}
        )
    return models


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://user:hunter2@127.0.0.1:{port}/v1"


def _generator(url: str, tiny: TinyModels, **kwargs: Any) -> ServerGenerator:
    wire_options = ("request_timeout", "api_key_env", "max_retries")
    wire = {k: kwargs.pop(k) for k in wire_options if k in kwargs}
    options: dict[str, Any] = {"served_model": "base-model", "model": str(tiny.model_dir)}
    options.update(kwargs)
    return ServerGenerator(ServerTransport(url, **wire), **options)


def _generate(examples: list[TestExample], generator: ServerGenerator, out: Path) -> None:
    run_generation(
        examples,
        generator,
        decoding=Decoding(max_new_tokens=8, batch_size=4),
        model_kind="base",
        out_dir=out,
        progress=False,
    )


def test_unreachable_server_is_exit_3_naming_the_url_without_credentials(
    tiny: TinyModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    url = _closed_port_url()
    with pytest.raises(DependencyError) as caught:
        _generator(url, tiny, max_retries=1)
    message = str(caught.value)
    assert caught.value.exit_code == 3
    assert "127.0.0.1" in message and "after 2 attempts" in message
    assert "hunter2" not in message and KEY not in message


def test_models_the_server_does_not_list_are_named(tiny: TinyModels) -> None:
    with running_stub(_models(str(tiny.model_dir), "base-model")) as stub:
        with pytest.raises(DependencyError, match="does not serve served_model 'other'") as caught:
            _generator(stub.url, tiny, served_model="other")
        assert "base-model" in str(caught.value) and stub.url in str(caught.value)
        with pytest.raises(DependencyError, match="served_adapter 'nope'"):
            _generator(stub.url, tiny, served_adapter="nope")
    assert stub.requests == []  # nothing was generated


def test_a_server_serving_another_base_is_refused(tiny: TinyModels, tmp_path: Path) -> None:
    with running_stub(_models("/models/some-other-base")) as stub:
        with pytest.raises(ConfigError, match="not the declared base model") as caught:
            _generator(stub.url, tiny)
        assert caught.value.exit_code == 2
    with (
        running_stub(_models(str(tiny.model_dir), "another-base")) as stub,
        pytest.raises(ConfigError, match="serves adapter 'tuned' on 'another-base'"),
    ):
        _generator(stub.url, tiny, served_adapter="tuned")


def test_identity_names_server_model_and_adapter_but_never_the_key(
    tiny: TinyModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    with running_stub(_models(str(tiny.model_dir), "base-model")) as stub:
        generator = _generator(
            stub.url, tiny, served_adapter="tuned", adapter=tiny.adapter_dir, api_key_env="MY_KEY"
        )
        served_only = _generator(stub.url, tiny, served_adapter="tuned", api_key_env="MY_KEY")
    fingerprint = generator.fingerprint()
    assert fingerprint["backend"] == "server"
    assert fingerprint["server"]["served_model_root"] == str(tiny.model_dir)
    assert fingerprint["server"]["served_adapter"] == "tuned"
    assert fingerprint["server"]["server_version"] == "0.0-stub"
    assert fingerprint["model_identity"]["base_model"] == str(tiny.model_dir.resolve())
    assert generator.adapter_info() == {
        "source": str(tiny.adapter_dir.resolve()),
        "sha256": generator.adapter_info()["sha256"],  # type: ignore[index]
    }
    assert served_only.adapter_info() == {
        "source": "served:tuned",
        "sha256": "unverified:served-elsewhere",
    }
    seen = json.dumps([fingerprint, generator.server_info(), repr(generator)])
    assert KEY not in seen
    api_calls = [
        {k.lower(): v for k, v in h.items()} for p, h in stub.headers if p.startswith("/v1/")
    ]
    assert api_calls and all(h.get("authorization") == f"Bearer {KEY}" for h in api_calls)


def test_a_batch_is_spread_over_concurrent_requests_in_prompt_order(
    tiny: TinyModels, tmp_path: Path
) -> None:
    prompts = [f"prompt number {i:02d}" for i in range(10)]
    with running_stub(_models(str(tiny.model_dir))) as stub:
        generator = _generator(stub.url, tiny, concurrency=4, usage_log=tmp_path / "usage.jsonl")
        outputs = generator.generate(prompts, max_new_tokens=7)
    assert outputs == [p[-8:][::-1] for p in prompts]
    assert sorted(len(r["prompt"]) for r in stub.requests) == [1, 3, 3, 3]
    for request in stub.requests:
        assert request["temperature"] == 0.0 and request["n"] == 1
        assert request["max_tokens"] == 7 and request["add_special_tokens"] is False
    stats = generator.stats.metrics()
    assert stats["requests"] == 4 and stats["prompts"] == 10
    assert stats["completion_tokens"] == 30 and stats["tokens_per_s"] > 0
    assert stats["latency_p50_s"] <= stats["latency_p95_s"]
    lines = [json.loads(line) for line in (tmp_path / "usage.jsonl").read_text().splitlines()]
    assert {line["prompt_sha256"] for line in lines} == {sha256_text(p) for p in prompts}
    assert all(line["finish_reason"] == "stop" for line in lines)


def test_a_closed_backend_sends_nothing_more(tiny: TinyModels) -> None:
    with running_stub(_models(str(tiny.model_dir))) as stub:
        generator = _generator(stub.url, tiny)
        assert generator.generate(["one prompt"], max_new_tokens=4) == ["one prompt"[-8:][::-1]]
        generator.close()
        generator.close()
        with pytest.raises(InvariantViolationError, match="was closed"):
            generator.generate(["another prompt"], max_new_tokens=4)
    assert [r["prompt"] for r in stub.requests] == [["one prompt"]]


def test_special_tokens_are_kept_only_when_the_output_format_needs_them(
    tiny: TinyModels,
) -> None:
    with running_stub(_models(str(tiny.model_dir))) as stub:
        plain = _generator(stub.url, tiny)
        plain.generate(["a prompt"], max_new_tokens=4)
        keeping = _generator(stub.url, tiny, keep_special_tokens=True)
        keeping.generate(["a prompt"], max_new_tokens=4)
    first, second = stub.requests
    assert "skip_special_tokens" not in first and second["skip_special_tokens"] is False
    assert second["add_special_tokens"] is False
    assert "special_tokens" not in plain.fingerprint()  # default fingerprints keep their bytes
    assert keeping.fingerprint()["special_tokens"] == "kept"


def test_min_tokens_asks_the_server_for_a_length_floor_capped_at_each_call(
    tiny: TinyModels,
) -> None:
    with running_stub(_models(str(tiny.model_dir))) as stub:
        plain = _generator(stub.url, tiny)
        plain.generate(["a prompt"], max_new_tokens=4)
        floored = _generator(stub.url, tiny, min_tokens=6)
        floored.generate(["a prompt"], max_new_tokens=8)
        floored.generate(["a prompt"], max_new_tokens=4)  # vLLM refuses a floor above the cap
    first, second, third = stub.requests
    assert "min_tokens" not in first and second["min_tokens"] == 6 and third["min_tokens"] == 4
    assert "min_tokens" not in plain.fingerprint()  # default fingerprints keep their bytes
    assert floored.fingerprint()["min_tokens"] == 6
    spec = backend_spec("server")
    given = {"base_url": stub.url, "served_model": "base-model"}
    assert "min_tokens" not in spec.parse_options(given).job_identity()
    assert spec.parse_options({**given, "min_tokens": "6"}).job_identity()["min_tokens"] == 6
    with pytest.raises(ConfigError, match="min_tokens"):
        _generator(stub.url, tiny, min_tokens=0)


def test_overload_is_retried_with_backoff_then_succeeds(tiny: TinyModels) -> None:
    calls = {"n": 0}

    def flaky(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] <= 2:
            return (503 if calls["n"] == 1 else 429), {"error": {"message": "busy"}}
        return echo_responder(body)

    with running_stub(_models(str(tiny.model_dir)), flaky) as stub:
        generator = _generator(stub.url, tiny, max_retries=2)
        assert generator.generate(["abcdefghij"], max_new_tokens=4) == ["jihgfedc"]
        assert len(stub.requests) == 3
        calls["n"] = -10  # always busy from now on: bounded retries, then exit 3
        with pytest.raises(DependencyError, match=r"after 3 attempts \(last: HTTP 429\)"):
            generator.generate(["abcdefghij"], max_new_tokens=4)


def test_a_refused_key_names_the_variable_not_the_key(
    tiny: TinyModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def refuse(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 401, {"error": {"message": f"bad key {KEY}"}}

    with running_stub(_models(str(tiny.model_dir)), refuse) as stub:
        generator = _generator(stub.url, tiny)
        with pytest.raises(ConfigError, match=r"\$OPENAI_API_KEY") as caught:
            generator.generate(["x"], max_new_tokens=4)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    "damage",
    [
        lambda answer: answer["choices"].pop(),
        lambda answer: answer["choices"][0].pop("text"),
        lambda answer: answer["choices"][1].update(index=0),
    ],
    ids=["missing-choice", "missing-text", "duplicate-index"],
)
def test_a_malformed_answer_is_exit_5_and_nothing_is_appended(
    tiny: TinyModels, examples: list[TestExample], tmp_path: Path, damage: Any
) -> None:
    def broken(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, answer = echo_responder(body)
        if len(answer["choices"]) > 1:
            damage(answer)
        return status, answer

    with running_stub(_models(str(tiny.model_dir)), broken) as stub:
        generator = _generator(stub.url, tiny, concurrency=1)
        with pytest.raises(InvariantViolationError) as caught:
            _generate(examples, generator, tmp_path)
    assert caught.value.exit_code == 5 and "nothing from this batch was kept" in str(caught.value)
    for path in (tmp_path / "generations").glob("*.jsonl"):
        assert path.read_bytes() == b""


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"request_timeout": -1}, "request_timeout"),
        ({"api_key_env": "sk-live-key!"}, "api_key_env must name"),
        ({"served_model": ""}, "served_model"),
    ],
)
def test_bad_options_are_refused_before_any_request(
    tiny: TinyModels, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        _generator("http://127.0.0.1:9/v1", tiny, **options)


@pytest.mark.parametrize("path", ["/v1/models", "/v1/completions"])
def test_a_trickling_server_is_cut_off_at_the_total_request_deadline(
    tiny: TinyModels, path: str
) -> None:
    # One byte every 0.4 s keeps every single read well inside a 1.5 s socket
    # timeout; only a deadline on the whole request ends it (issue 23 item 4).
    with running_stub(_models(str(tiny.model_dir))) as stub:
        stub.trickle, stub.trickle_s = frozenset({path}), 0.4

        def work() -> None:
            generator = _generator(stub.url, tiny, request_timeout=1.5, max_retries=1)
            generator.generate(["abcdefghij"], max_new_tokens=4)

        started = time.monotonic()
        with pytest.raises(DependencyError, match=r"after 2 attempts \(last: timed out") as caught:
            finishes_within(20, work)
        elapsed = time.monotonic() - started
    assert caught.value.exit_code == 3
    assert elapsed < 2 * 1.5 + 0.5 + 2.0  # two attempts, one backoff, and slack for a busy CI


def test_a_trickling_version_probe_is_cut_off_and_the_version_is_unknown(
    tiny: TinyModels,
) -> None:
    with running_stub(_models(str(tiny.model_dir))) as stub:
        stub.trickle, stub.trickle_s = frozenset({"/version"}), 0.4
        started = time.monotonic()
        generator = finishes_within(20, lambda: _generator(stub.url, tiny, request_timeout=1.0))
        elapsed = time.monotonic() - started
        assert generator.generate(["abcdefghij"], max_new_tokens=4) == ["jihgfedc"]
    assert generator.server_info()["server_version"] is None
    assert elapsed < 1.0 + 3.0  # the probe's deadline, plus loading the tokenizer


@pytest.mark.parametrize("body", [b"", b"<html>502 Bad Gateway</html>", b"[]"])
def test_a_200_answer_that_is_not_a_json_object_is_exit_3_and_nothing_is_kept(
    tiny: TinyModels, examples: list[TestExample], tmp_path: Path, body: bytes
) -> None:
    with running_stub(_models(str(tiny.model_dir)), lambda request: (200, body)) as stub:
        generator = _generator(stub.url, tiny, max_retries=1)
        with pytest.raises(DependencyError, match=r"after 2 attempts \(last: HTTP 200 with") as err:
            _generate(examples, generator, tmp_path)
    assert err.value.exit_code == 3
    assert ("empty body" if not body else "not a JSON object") in str(err.value)
    for path in (tmp_path / "generations").glob("*.jsonl"):
        assert path.read_bytes() == b""
