"""Hand-made generation records carrying the parser's own result, as generation writes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sommelier_mlflow.data import GenerationRecord, TestExample
from sommelier_mlflow.toolcalls import parse_tool_call


def parsed_generation(
    example: TestExample, raw_text: str, *, model_kind: str, decoding: Mapping[str, Any]
) -> GenerationRecord:
    """The record of ``raw_text`` generated for ``example``, storing ``parse_tool_call``'s parse.

    ``score_run`` parses every output again and refuses a record whose stored
    parse differs, so tests that build records by hand (the evaluation and
    integration builders) store exactly what the v1 parser returns.
    """
    parsed = parse_tool_call(raw_text)
    assert example.prompt_sha256 is not None, example.example_id
    return GenerationRecord(
        example_id=example.example_id,
        model_kind=model_kind,  # type: ignore[arg-type]
        language=example.language,
        prompt_sha256=example.prompt_sha256,
        raw_text=raw_text,
        parse_status=parsed.status,
        parsed_call=parsed.call,
        decoding=dict(decoding),
    )
