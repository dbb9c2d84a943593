"""`sommelier-mlflow format`: prompts rendered without a model, answered elsewhere, scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import TestExample, read_test_split, write_test_split
from sommelier_mlflow.errors import ComparisonRefusedError
from sommelier_mlflow.evaluation import EvaluationReport, compare_reports
from tests.cli.cli_helpers import ADAPTER_OUTPUTS, BASE_OUTPUTS, examples

HERMES_TEMPLATE = (
    "{% if tools %}<|system|>\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>"
    "<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _tokenizer(directory: Path, template: str) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.train_from_iterator(
        ["weather in Paris"], trainers.WordLevelTrainer(special_tokens=["[UNK]"])
    )
    fast: Any = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    fast.chat_template = template
    fast.save_pretrained(directory)
    return directory


def _unformatted(root: Path) -> Path:
    rows = [
        TestExample(
            example.example_id,
            example.language,
            example.query,
            example.tools,
            gold_calls=list(example.gold_calls),
            source_example_id=example.source_example_id,
        )
        for example in examples()
    ]
    return write_test_split(root / "raw.jsonl", rows)


def _score(split: Path, outputs: dict[int, str], kind: str, out: Path, root: Path) -> int:
    rows = [
        {"example_id": ex.example_id, "raw_text": outputs[int(ex.example_id.split("-")[1])]}
        for ex in examples()
    ]
    precomputed = root / f"{kind}-{out.name}.jsonl"
    precomputed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["score", "--test-split", str(split), "--precomputed", str(precomputed)]
    args += ["--model-kind", kind, "--model", "tiny/model", "--revision", "abc"]
    args += ["--max-new-tokens", "32", "--batch-size", "2", "--out", str(out)]
    if kind == "adapter":
        args += ["--adapter", "served-lora"]
    return main(args)


def test_format_renders_native_prompts_that_score_and_gate(tmp_path: Path) -> None:
    hermes = _tokenizer(tmp_path / "hermes", HERMES_TEMPLATE)
    raw = _unformatted(tmp_path)
    native = tmp_path / "native.jsonl"
    args = ["format", "--test-split", str(raw), "--tokenizer", str(hermes)]
    assert main([*args, "--prompt-format", "native", "--out", str(native)]) == 0
    split = read_test_split(native)
    assert {example.prompt_format for example in split.examples} == {"native"}
    assert all("<tools>" in (example.prompt_text or "") for example in split.examples)
    sommelier = tmp_path / "sommelier.jsonl"
    assert main([*args, "--out", str(sommelier)]) == 0
    assert "exactly one" in (read_test_split(sommelier).examples[0].prompt_text or "")

    assert _score(native, BASE_OUTPUTS, "base", tmp_path / "nb", tmp_path) == 0
    assert _score(native, ADAPTER_OUTPUTS, "adapter", tmp_path / "na", tmp_path) == 0
    assert _score(sommelier, ADAPTER_OUTPUTS, "adapter", tmp_path / "sa", tmp_path) == 0
    reports = {
        name: EvaluationReport.from_json(
            json.loads((tmp_path / name / "evaluation_report.json").read_text())
        )
        for name in ("nb", "na", "sa")
    }
    assert reports["nb"].identity.prompt_format == "native"
    assert reports["sa"].identity.prompt_format == "sommelier"
    compare_reports(reports["nb"], reports["na"])  # same prompts: compared
    with pytest.raises(ComparisonRefusedError) as refused:
        compare_reports(reports["nb"], reports["sa"])
    assert refused.value.field == "prompt_format"


def test_format_refuses_a_template_that_ignores_tools_and_a_split_of_another_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _tokenizer(tmp_path / "plain", "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    raw = _unformatted(tmp_path)
    args = ["format", "--test-split", str(raw), "--tokenizer", str(plain)]
    assert main([*args, "--prompt-format", "native", "--out", str(tmp_path / "n.jsonl")]) == 2
    assert "ignores `tools`" in capsys.readouterr().err
    formatted = tmp_path / "s.jsonl"
    assert main([*args, "--out", str(formatted)]) == 0
    again = ["format", "--test-split", str(formatted), "--tokenizer", str(plain)]
    code = main([*again, "--prompt-format", "native", "--out", str(tmp_path / "x.jsonl")])
    assert code == 2
    assert "prompt_format 'sommelier', not 'native'" in capsys.readouterr().err
    assert main([*args, "--prompt-format", "nope", "--out", str(tmp_path / "y.jsonl")]) == 2
    assert "unknown prompt format 'nope'" in capsys.readouterr().err


def test_chat_template_kwargs_and_a_system_prompt_file_reach_rows_report_and_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Qwen3's switch as a template variable, and a system prompt read from a file.
    template = HERMES_TEMPLATE.replace(
        "<|assistant|>\n{% endif %}",
        "<|assistant|>\n{% if enable_thinking is false %}<think></think>{% endif %}{% endif %}",
    )
    tokenizer = _tokenizer(tmp_path / "qwen", template)
    raw = _unformatted(tmp_path)
    system = tmp_path / "system.txt"
    system.write_text("Use the tools. " * 10_000, encoding="utf-8")  # 150 kB, past any param
    args = ["format", "--test-split", str(raw), "--tokenizer", str(tokenizer)]
    args += ["--prompt-format", "native", "--system-prompt-file", str(system)]
    off, on = tmp_path / "off.jsonl", tmp_path / "on.jsonl"
    kwargs = '{"enable_thinking": false}'
    assert main([*args, "--chat-template-kwargs", kwargs, "--out", str(off)]) == 0
    assert main([*args, "--out", str(on)]) == 0
    thinking_off = read_test_split(off).examples
    assert all(e.chat_template_kwargs == {"enable_thinking": False} for e in thinking_off)
    assert all((e.prompt_text or "").endswith("<think></think>") for e in thinking_off)
    assert all(system.read_text() in (e.prompt_text or "") for e in thinking_off)

    assert _score(off, BASE_OUTPUTS, "base", tmp_path / "b", tmp_path) == 0
    assert _score(on, ADAPTER_OUTPUTS, "adapter", tmp_path / "a", tmp_path) == 0
    report = json.loads((tmp_path / "b" / "evaluation_report.json").read_text())
    assert report["identity"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert (
        "chat_template_kwargs"
        not in json.loads((tmp_path / "a" / "evaluation_report.json").read_text())["identity"]
    )
    capsys.readouterr()
    compare = ["compare", "--base-report", str(tmp_path / "b" / "evaluation_report.json")]
    compare += ["--adapter-report", str(tmp_path / "a" / "evaluation_report.json")]
    assert main([*compare, "--out", str(tmp_path / "c")]) == 4
    err = capsys.readouterr().err
    assert "chat_template_kwargs differs" in err and "--chat-template-kwargs" in err
    # Replaying a formatted split with other variables is refused naming the field.
    replay = ["format", "--test-split", str(off), "--tokenizer", str(tokenizer)]
    replay += ["--prompt-format", "native", "--out", str(tmp_path / "r.jsonl")]
    assert main(replay) == 2
    assert "rendered with chat_template_kwargs" in capsys.readouterr().err
    assert main([*args, "--system-prompt", "x", "--out", str(tmp_path / "both.jsonl")]) == 2
    assert "not both" in capsys.readouterr().err


def test_a_failing_template_is_exit_2_naming_tokenizer_and_example_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    looping = "{% macro deeper(n) %}{{ deeper(n + 1) }}{% endmacro %}{{ deeper(0) }}"
    tokenizer = _tokenizer(tmp_path / "looping", looping)
    out = tmp_path / "never.jsonl"
    args = ["format", "--test-split", str(_unformatted(tmp_path)), "--tokenizer", str(tokenizer)]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "looping' recursed without end on example" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.glob("never*")) == []


def test_evaluate_logs_a_system_prompt_file_whole_and_the_template_variables(
    tmp_path: Path, tracking_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient
    from transformers import AutoTokenizer

    from sommelier_mlflow._json import sha256_text
    from tests.cli.cli_helpers import logged_run_id, tiny_arms
    from tests.support.tiny_models import build_tiny_llama

    tiny = tiny_arms(tmp_path / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(tiny["model"])
    tokenizer.chat_template = HERMES_TEMPLATE  # renders tools, as a native template does
    tokenizer.save_pretrained(tmp_path / "native-tokenizer")
    prompt = "Call exactly one tool.\n" * 400  # 9,200 characters: past MLflow's param limit
    # About 9,100 tokens in the tiny tokenizer: a model whose context holds them, since
    # prompts past the context are refused before generating.
    model = build_tiny_llama(tmp_path / "long", tokenizer, max_position_embeddings=16384)
    (tmp_path / "system.txt").write_text(prompt, encoding="utf-8")
    args = [
        *("evaluate", "--test-split", str(tiny["split"]), "--model", str(model)),
        *("--tokenizer", str(tmp_path / "native-tokenizer"), "--model-kind", "base"),
        *("--prompt-format", "native", "--system-prompt-file", str(tmp_path / "system.txt")),
        *("--chat-template-kwargs", '{"date_string": "26 Jul 2024"}', "--max-examples", "2"),
        *("--max-new-tokens", "4", "--batch-size", "2", "--num-threads", "1"),
        *("--resamples", "50", "--log-traces", "false", "--out", str(tmp_path / "out"), "--mlflow"),
    ]
    assert main(args) == 0
    client = MlflowClient(tracking_uri)
    run_id = logged_run_id(capsys.readouterr().out)
    params = client.get_run(run_id).data.params
    assert params["system_prompt.sha256"] == sha256_text(prompt)
    assert "system_prompt" not in params
    assert params["chat_template_kwargs.resolved"] == '{"date_string":"26 Jul 2024"}'
    logged = client.download_artifacts(run_id, "sommelier/system_prompt.txt", str(tmp_path))
    assert Path(logged).read_text(encoding="utf-8") == prompt
    report = json.loads((tmp_path / "out" / "evaluation_report.json").read_text())
    assert report["identity"]["chat_template_kwargs"] == {"date_string": "26 Jul 2024"}


def test_gpt_oss_renders_on_the_template_date_and_the_day_reaches_report_and_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.chat_templates import specimen_tokenizer

    specimen_tokenizer(tmp_path / "gpt_oss", "gpt_oss")
    raw = _unformatted(tmp_path)
    args = ["format", "--test-split", str(raw), "--tokenizer", str(tmp_path / "gpt_oss")]
    args += ["--prompt-format", "native"]
    assert main([*args, "--out", str(tmp_path / "refused.jsonl")]) == 2
    assert "else --template-date YYYY-MM-DD" in capsys.readouterr().err
    days = {"b": "2024-07-26", "a": "2024-07-27"}
    for name, day in days.items():
        out = tmp_path / f"{name}.jsonl"
        assert main([*args, "--template-date", day, "--out", str(out)]) == 0
        rendered = read_test_split(out).examples
        assert all(f"Current date: {day}" in (e.prompt_text or "") for e in rendered)
        assert {e.template_date for e in rendered} == {day}
    assert _score(tmp_path / "b.jsonl", BASE_OUTPUTS, "base", tmp_path / "b", tmp_path) == 0
    assert _score(tmp_path / "a.jsonl", ADAPTER_OUTPUTS, "adapter", tmp_path / "a", tmp_path) == 0
    report = json.loads((tmp_path / "b" / "evaluation_report.json").read_text())
    assert report["identity"]["template_date"] == "2024-07-26"
    capsys.readouterr()
    compare = ["compare", "--base-report", str(tmp_path / "b" / "evaluation_report.json")]
    compare += ["--adapter-report", str(tmp_path / "a" / "evaluation_report.json")]
    assert main([*compare, "--out", str(tmp_path / "c")]) == 4
    err = capsys.readouterr().err
    assert "template_date differs" in err and "--template-date" in err
