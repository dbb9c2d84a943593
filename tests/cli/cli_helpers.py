"""Hand-made arm files for CLI and MLflow-project tests: a formatted split and generations."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow._json import dumps_line, sha256_text
from sommelier_mlflow.data import Decoding, TestExample, write_test_split
from tests.support.generation_records import parsed_generation

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"city": {"type": "str"}, "units": {"type": "str"}},
    },
    {
        "name": "fetch_weather",
        "description": "Another weather tool",
        "parameters": {"city": {"type": "str"}, "units": {"type": "str"}},
    },
]
CITIES = ["Paris", "Oslo", "Rome", "Lyon"]
DECODING = Decoding(max_new_tokens=32, batch_size=2)


def gold(city: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"city": city, "units": "celsius"}}


def examples() -> list[TestExample]:
    rows = []
    for index, city in enumerate(CITIES):
        for language, source in (("en", None), ("fr", f"en-{index}")):
            example_id = f"{language}-{index}"
            prompt = f"<system>tools</system><user>{language} weather {city}</user>"
            rows.append(
                TestExample(
                    example_id=example_id,
                    language=language,
                    query=f"weather in {city} ({language})",
                    tools=TOOLS,
                    gold_call=gold(city),
                    source_example_id=source,
                    prompt_text=prompt,
                    prompt_sha256=sha256_text(prompt),
                )
            )
    return sorted(rows, key=lambda row: row.source_example_id is not None)


# The spec's worked example per language: exact, wrong units, wrong name, prose.
BASE_OUTPUTS = {
    0: json.dumps(gold("Paris")),
    1: json.dumps({"name": "get_weather", "arguments": {"city": "Oslo", "units": "kelvin"}}),
    2: json.dumps({"name": "fetch_weather", "arguments": {"city": "Rome", "units": "celsius"}}),
    3: "The weather in Lyon is sunny.",
}
ADAPTER_OUTPUTS = {index: json.dumps(gold(city)) for index, city in enumerate(CITIES)}


def precomputed_rows(outputs: dict[int, str]) -> list[dict[str, str]]:
    """The rows of a ``--precomputed`` file, as an outside producer writes them.

    Each example's id and the text ``outputs`` (``BASE_OUTPUTS`` or
    ``ADAPTER_OUTPUTS``) gives its index.
    """
    return [
        {"example_id": ex.example_id, "raw_text": outputs[int(ex.example_id.split("-")[1])]}
        for ex in examples()
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` one JSON object a line (a ``--precomputed`` file); return ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def logged_run_id(printed: str) -> str:
    """The id of the run the last ``--mlflow`` command in ``printed`` said it logged to."""
    return re.findall(r"logged to MLflow run ([0-9a-f]+)", printed)[-1]


def write_arm(folder: Path, kind: str, outputs: dict[int, str]) -> Path:
    """Write ``folder/generations/<lang>.jsonl`` as the generation layer would."""
    by_language: dict[str, list[bytes]] = {}
    for example in examples():
        index = int(example.example_id.split("-")[1])
        record = parsed_generation(
            example, outputs[index], model_kind=kind, decoding=DECODING.to_dict()
        )
        by_language.setdefault(example.language, []).append(dumps_line(record.to_json()))
    target = folder / "generations"
    target.mkdir(parents=True, exist_ok=True)
    for language, lines in by_language.items():
        (target / f"{language}.jsonl").write_bytes(b"".join(lines))
    return target


def write_fixture(root: Path) -> dict[str, Path]:
    """A formatted split, base and adapter generations, and a stand-in adapter folder."""
    split = write_test_split(root / "test.jsonl", examples())
    adapter_dir = root / "adapter"
    adapter_dir.mkdir(parents=True, exist_ok=True)
    (adapter_dir / "adapter_config.json").write_text('{"r": 4}')
    (adapter_dir / "adapter_model.safetensors").write_bytes(b"weights")
    return {
        "split": split,
        "base": write_arm(root / "base", "base", BASE_OUTPUTS),
        "adapter": write_arm(root / "adapter_arm", "adapter", ADAPTER_OUTPUTS),
        "adapter_dir": adapter_dir,
    }


def score_args(
    files: dict[str, Path],
    kind: str,
    out: Path,
    *,
    resamples: int = 200,
    revision: str | None = "abc123",
) -> list[str]:
    """``score`` of one arm of :func:`write_fixture`, without the program name.

    The generations path stays at index 4, where a test can swap it.
    """
    args = ["score", "--test-split", str(files["split"]), "--generations", str(files[kind])]
    args += ["--model-kind", kind, "--model", "tiny/model"]
    args += [] if revision is None else ["--revision", revision]
    args += ["--out", str(out), "--resamples", str(resamples)]
    return args + (["--adapter", str(files["adapter_dir"])] if kind == "adapter" else [])


def compare_args(base: Path, adapter: Path, out: Path, *extra: str) -> list[str]:
    """``compare`` of two arms' reports, each in the ``--out`` folder its ``score`` wrote."""
    return [
        *("compare", "--base-report", str(base / "evaluation_report.json")),
        *("--adapter-report", str(adapter / "evaluation_report.json")),
        *("--out", str(out), *extra),
    ]


def declared_score_args(split: Path, kind: str = "base") -> list[str]:
    """``score`` of ``split`` by ``tiny/model`` with the fixture's decoding declared.

    Outputs from elsewhere (``--precomputed``) carry no decoding record, so the
    producer's is declared; the source and ``--out`` are the caller's.
    """
    return [
        *("score", "--test-split", str(split), "--model-kind", kind, "--model", "tiny/model"),
        *("--max-new-tokens", str(DECODING.max_new_tokens)),
        *("--batch-size", str(DECODING.batch_size)),
    ]


def evaluate_args(split: Path, out: Path, backend: str, *extra: str) -> list[str]:
    """``evaluate`` of the fixture's base arm with ``backend`` (a model it declares, not loads)."""
    return [
        *("evaluate", "--test-split", str(split), "--model", "tiny/model"),
        *("--revision", "abc123", "--model-kind", "base", "--batch-size", "2"),
        *("--backend", backend, *extra, "--resamples", "100", "--out", str(out)),
    ]


def tiny_arms(root: Path, *, gold_in_vocabulary: bool = True) -> dict[str, Path]:
    """The fixture's split without prompts, a tiny Llama with a chat template, and its LoRA.

    The tokenizer is trained on the tools and queries, and on the gold calls unless
    ``gold_in_vocabulary`` is off; the model and adapter are seeded, so every build is alike.
    """
    from dataclasses import replace

    from sommelier_mlflow._json import canonical_json
    from tests.support.tiny_models import build_lora_adapter, build_tiny_llama, build_tokenizer

    rows = [replace(ex, prompt_text=None, prompt_sha256=None) for ex in examples()]
    split = write_test_split(root / "test.jsonl", rows)
    texts = [canonical_json(TOOLS), *(row.query for row in rows)]
    if gold_in_vocabulary:
        texts += [canonical_json(row.gold_call) for row in rows]
    tokenizer = build_tokenizer(root / "tokenizer", texts)
    model = build_tiny_llama(root / "model", tokenizer, seed=0)
    adapter = build_lora_adapter(model, root / "adapter", seed=1)
    return {"split": Path(split), "model": Path(model), "adapter": Path(adapter)}


def main_run_children(client: MlflowClient, parent_id: str) -> tuple[Run, dict[str, Run]]:
    """The ``main`` entry point's parent run and its child runs by name.

    Checked as every ``main`` run must be, whatever its backend: the parent is a
    comparison with a delta, and its children are a finished base and a finished
    adapter arm whose adapter was hashed.
    """
    parent = client.get_run(parent_id)
    assert parent.data.tags["sommelier.model_kind"] == "comparison"
    assert "delta/overall/full_call_exact_match" in parent.data.metrics
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    by_name = {run.info.run_name: run for run in children}
    assert set(by_name) == {"base", "adapter"}
    for run in children:
        assert run.info.status == "FINISHED"
    assert by_name["adapter"].data.params["adapter_sha256"] != "None"
    return parent, by_name


def assert_not_in_files(folder: Path, secret: str) -> None:
    """Fail, naming the file, if any file below ``folder`` holds the bytes of ``secret``."""
    for path in folder.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def assert_never_logged(
    client: MlflowClient, runs: Iterable[Run], secret: str, download_to: Path
) -> None:
    """Fail if ``secret`` is in any run's params, tags or metrics, or in any of its artifacts.

    Each run's artifacts are downloaded below ``download_to / <run id>``.
    """
    for run in runs:
        assert secret not in json.dumps([run.data.params, run.data.tags, run.data.metrics])
        target = download_to / run.info.run_id
        assert_not_in_files(
            Path(client.download_artifacts(run.info.run_id, "", str(target))), secret
        )


BFCL_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bfcl"


def bfcl_example_split(root: Path, categories: Sequence[str] | None = None) -> Path:
    """The bundled BFCL example imported (``categories``, default BFCL's) and formatted.

    Any chat template renders the prompts, since the example's outputs are
    precomputed; the formatted split keeps the ``category`` slice field.
    """
    from sommelier_mlflow.cli import main
    from sommelier_mlflow.data import import_bfcl
    from tests.support.tiny_models import build_tokenizer

    import_bfcl(BFCL_EXAMPLE / "data", root / "test.jsonl", categories=categories)
    build_tokenizer(root / "tokenizer", ["Find the area of a triangle."])
    split = root / "test.formatted.jsonl"
    argv = ["format", "--test-split", str(root / "test.jsonl"), "--slice-by", "category"]
    assert main([*argv, "--tokenizer", str(root / "tokenizer"), "--out", str(split)]) == 0
    return split


def bfcl_example_score_args(split: Path, kind: str, outputs: str, out: Path) -> list[str]:
    """``score --scoring bfcl`` of the example's ``<outputs>_<kind>.jsonl`` on ``split``."""
    args = ["score", "--test-split", str(split), "--scoring", "bfcl"]
    args += ["--precomputed", str(BFCL_EXAMPLE / f"{outputs}_{kind}.jsonl")]
    args += ["--model-kind", kind, "--model", "example/model", "--max-new-tokens", "256"]
    args += ["--batch-size", "1", "--out", str(out), "--resamples", "300"]
    return [*args, *(["--adapter", "example-adapter"] if kind == "adapter" else [])]
