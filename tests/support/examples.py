"""One factory for the already-formatted test examples many tests build by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import TestExample

WEATHER_OSLO: dict[str, Any] = {"name": "get_weather", "arguments": {"city": "Oslo"}}


def formatted_example(
    example_id: str,
    *,
    prompt: str | None = None,
    language: str = "en",
    gold: Mapping[str, Any] | None = None,
    gold_calls: Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[Any] = (),
    query: str | None = None,
    source: str | None = None,
    **extra: Any,
) -> TestExample:
    """A formatted example whose prompt digest matches its prompt text.

    ``prompt`` defaults to a short text naming the example, ``gold`` to a
    weather call; pass ``gold_calls`` instead for zero or several gold calls.
    """
    text = prompt if prompt is not None else f"<sys>tools</sys><user>{example_id}</user>"
    calls = {"gold_calls": [dict(c) for c in gold_calls]} if gold_calls is not None else {
        "gold_call": dict(gold if gold is not None else WEATHER_OSLO)
    }
    return TestExample(
        example_id=example_id,
        language=language,
        query=query if query is not None else f"request {example_id}",
        tools=list(tools),
        source_example_id=source,
        prompt_text=text,
        prompt_sha256=sha256_text(text),
        **calls,
        **extra,
    )
