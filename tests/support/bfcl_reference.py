"""BFCL's own AST checker and data, loaded from its published wheel (test and benchmark code only).

The product never imports BFCL: ``--scoring bfcl`` re-implements its rules.
To prove the re-implementation agrees, the agreement test and the benchmark
run BFCL's checker itself. Its package depends on dozens of provider SDKs,
so the wheel is fetched with ``pip download --no-deps`` (PyPI, about 2 MB),
unpacked once into a cache folder (``SOMMELIER_BFCL_CACHE`` or
``~/.cache/sommelier_mlflow``), and imported from there with a stand-in for
the one module the checker needs that would pull those SDKs in
(``bfcl_eval.constants.model_config``, read only to ask whether a model
rewrites ``.`` in function names: here, never).

The module also derives outputs from each question's possible answers
(correct ones, acceptable alternatives, and the mistakes BFCL must catch),
shared by the agreement test and ``benchmarks/bench_bfcl.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import types
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BFCL_VERSION = "2026.3.23"
_OMIT = object()


def _cache_root() -> Path:
    configured = os.environ.get("SOMMELIER_BFCL_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "sommelier_mlflow"


def bfcl_package_root(version: str = BFCL_VERSION) -> Path:
    """The folder holding the unpacked ``bfcl_eval`` package, downloaded on first use."""
    target = _cache_root() / f"bfcl-eval-{version}"
    if (target / "bfcl_eval" / "eval_checker" / "ast_eval" / "ast_checker.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                f"bfcl-eval=={version}",
                "-d",
                work,
            ],
            check=True,
        )
        (wheel,) = Path(work).glob("bfcl_eval-*.whl")
        unpacked = Path(work) / "unpacked"
        with zipfile.ZipFile(wheel) as archive:
            members = [name for name in archive.namelist() if name.startswith("bfcl_eval/")]
            archive.extractall(unpacked, members)
        try:
            os.replace(unpacked, target)
        except OSError:  # another process won the race: its copy is as good
            if not target.is_dir():
                raise
    return target


@dataclass(frozen=True)
class BfclReference:
    """BFCL's checker functions and its data folder."""

    ast_checker: Callable[..., dict[str, Any]]
    is_empty_output: Callable[[Any], bool]
    python: Any
    data_dir: Path

    def verdict(
        self,
        category: str,
        functions: list[dict[str, Any]],
        answers: list[dict[str, Any]],
        calls: list[dict[str, Any]] | None,
    ) -> bool:
        """BFCL's conclusion for decoded ``calls`` (``None``: the output did not decode).

        Irrelevance follows BFCL's relevance runner: correct when decoding
        failed or decoded to no call; call categories go through ``ast_checker``,
        and an undecodable output fails there.
        """
        if "irrelevance" in category:
            return calls is None or self.is_empty_output([_bfcl_call(c) for c in calls])
        if calls is None:
            return False
        result = self.ast_checker(
            functions, [_bfcl_call(c) for c in calls], answers, self.python, category, "stub"
        )
        return bool(result["valid"])


def _bfcl_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {call["name"]: call["arguments"]}


def load_bfcl(version: str = BFCL_VERSION) -> BfclReference:
    """Import BFCL's AST checker from the cached wheel, with the model-config stand-in."""
    root = bfcl_package_root(version)
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _Config:
        underscore_to_dot = False

    class _Mapping(dict[str, Any]):
        def __missing__(self, key: str) -> _Config:
            return _Config()

    stub.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = stub
    sys.path.insert(0, str(root))
    try:
        from bfcl_eval import utils
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval import ast_checker
    finally:
        sys.path.remove(str(root))
    return BfclReference(
        ast_checker=ast_checker.ast_checker,
        is_empty_output=utils.is_empty_output,
        python=Language.PYTHON,
        data_dir=root / "bfcl_eval" / "data",
    )


def read_bfcl_category(data_dir: Path, category: str) -> list[tuple[dict[str, Any], list[Any]]]:
    """BFCL's questions of one category with their ground truth (``[]`` for irrelevance)."""
    name = f"BFCL_v4_{category}.json"
    with (data_dir / name).open(encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle]
    if "irrelevance" in category:
        return [(question, []) for question in questions]
    with (data_dir / "possible_answer" / name).open(encoding="utf-8") as handle:
        answers = [json.loads(line)["ground_truth"] for line in handle]
    return list(zip(questions, answers, strict=True))


# ---------------------------------------------------------------- derived outputs


def _pick(values: list[Any], last: bool) -> Any:
    options = [value for value in values if not (type(value) is str and value == "")]
    if not options:
        return _OMIT
    return _instance(options[-1] if last else options[0], last)


def _instance(value: Any, last: bool) -> Any:
    """A concrete value from an acceptable one (dicts hold acceptable lists per key)."""
    if type(value) is dict:
        out = {}
        for key, values in value.items():
            chosen = _pick(values, last) if type(values) is list else values
            if chosen is not _OMIT:
                out[key] = chosen
        return out
    if type(value) is list:
        return [_instance(item, last) if type(item) is dict else item for item in value]
    return value


def _arguments(params: Mapping[str, list[Any]], *, last: bool, omit: bool) -> dict[str, Any]:
    out = {}
    for param, values in params.items():
        if omit and any(type(v) is str and v == "" for v in values):
            continue
        chosen = _pick(values, last)
        if chosen is not _OMIT:
            out[param] = chosen
    return out


def _map_leaves(value: Any, change: Callable[[Any], Any]) -> Any:
    if type(value) is dict:
        return {key: _map_leaves(item, change) for key, item in value.items()}
    if type(value) is list:
        return [_map_leaves(item, change) for item in value]
    return change(value)


def _case_spacing(value: Any) -> Any:
    return value.upper().replace(" ", " - ") if type(value) is str else value


def _swap_number(value: Any) -> Any:
    if type(value) is int:
        return float(value)
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _wrong(value: Any) -> Any:
    if type(value) is bool:
        return not value
    if type(value) is int:
        return value + 1
    if type(value) is float:
        return value + 0.5
    if type(value) is str:
        return value + " zz"
    if type(value) is list:
        return [*value, value[0] if value else "zz"]
    if type(value) is dict:
        return {**value, "zz": 1}
    return "zz"


def _stringified(value: Any) -> Any:
    return str(value) if type(value) in (int, float) else value


def _calls(answers: list[dict[str, Any]], **how: bool) -> list[dict[str, Any]]:
    calls = []
    for answer in answers:
        ((name, params),) = answer.items()
        calls.append({"name": name, "arguments": _arguments(params, **how)})
    return calls


def _edit_first(
    calls: list[dict[str, Any]], edit: Callable[[dict[str, Any]], dict[str, Any]]
) -> list[dict[str, Any]]:
    return [{"name": calls[0]["name"], "arguments": edit(dict(calls[0]["arguments"]))}, *calls[1:]]


def _change_first_value(change: Callable[[Any], Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def edit(arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments:
            key = next(iter(arguments))
            arguments[key] = change(arguments[key])
        return arguments

    return edit


def _drop_first(arguments: dict[str, Any]) -> dict[str, Any]:
    if arguments:
        del arguments[next(iter(arguments))]
    return arguments


def derived_outputs(
    category: str, functions: list[dict[str, Any]], answers: list[dict[str, Any]]
) -> Iterator[tuple[str, list[dict[str, Any]] | None]]:
    """Named outputs (decoded calls, or ``None`` for an undecodable one) for one question."""
    if not answers:  # irrelevance: abstain, call anyway, or emit something undecodable
        first = functions[0]
        required = first["parameters"].get("required", [])
        yield "abstain", []
        yield "call_without_arguments", [{"name": first["name"], "arguments": {}}]
        yield (
            "call_with_argument",
            [{"name": first["name"], "arguments": {name: "x" for name in required[:1]}}],
        )
        yield "undecodable", None
        return
    correct = _calls(answers, last=False, omit=False)
    yield "correct", correct
    yield "alternative_values", _calls(answers, last=True, omit=False)
    yield "omitted_optionals", _calls(answers, last=False, omit=True)
    yield (
        "case_and_spacing",
        [
            {"name": c["name"], "arguments": _map_leaves(c["arguments"], _case_spacing)}
            for c in correct
        ],
    )
    yield (
        "int_float_swap",
        [
            {"name": c["name"], "arguments": _map_leaves(c["arguments"], _swap_number)}
            for c in correct
        ],
    )
    yield (
        "numbers_as_strings",
        [
            {"name": c["name"], "arguments": _map_leaves(c["arguments"], _stringified)}
            for c in correct
        ],
    )
    yield "wrong_value", _edit_first(correct, _change_first_value(_wrong))
    yield "extra_parameter", _edit_first(correct, lambda a: {**a, "unexpected_extra": 1})
    yield "missing_parameter", _edit_first(correct, _drop_first)
    yield "wrong_name", [{**correct[0], "name": correct[0]["name"] + "_v2"}, *correct[1:]]
    yield "reordered", correct[::-1]
    yield "duplicated_call", [*correct, correct[0]]
    yield "missing_call", correct[:-1]
    yield "undecodable", None
