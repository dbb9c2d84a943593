"""Random texts for the output-format decoders: format fragments, JSON, anything."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=5,
)

_FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    ";",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    '"',
    "'",
    "=",
    ",",
    ":",
    "f",
    "f(",
    "a=",
    '"name": "f"',
    '"arguments": {}',
    '"parameters"',
    '"tool_calls"',
    '"function"',
    "True",
    "null",
    "\\",
    "\x00",
    "\ud800",
    " ",
    "\n",
    "1e999",
    "-0",
    "a.b",
    '"""',
    "#",
    # issue 30's formats
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|start|>assistant",
    "<|channel|>analysis",
    "<|channel|>commentary to=functions.f",
    "<|constrain|>json",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|tool_call>call:f{",
    "<tool_call|>",
    '<|"|>',
    "<|channel>",
    "<channel|>",
    "<start_function_call>call:f{",
    "<end_function_call>",
    "<escape>",
    # kimi_k2, deepseek_v31, phi4_mini_json, llama4_pythonic
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "functions.f:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
    "functools",
    "<|python_start|>",
    "<|python_end|>",
]

#: Random texts built from format fragments, JSON values and arbitrary characters.
texts = st.lists(
    st.sampled_from(_FRAGMENTS) | st.text(max_size=3) | _json_values.map(json.dumps), max_size=12
).map("".join)

#: Tools that type the values of qwen3_xml and glm45 outputs: xlam's flat form for one,
#: JSON Schema for the other (both shapes a split row allows).
TYPED_TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "parameters": {
            "city": {"type": "str"},
            "days": {"type": "int"},
            "units": {"type": "str, optional"},
        },
    },
    {
        "name": "book",
        "parameters": {
            "type": "object",
            "properties": {
                "price": {"type": "number"},
                "quiet": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "filters": {"type": "object"},
                "code": {"type": ["integer", "string"]},
                "note": {},
            },
        },
    },
]


def _as_text(value: object) -> str:
    """A value as these formats write it: a string as it is, anything else as its JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def qwen3_xml_call(name: str, arguments: Mapping[str, object]) -> str:
    """One ``<tool_call>`` block as Qwen3-Coder's template writes it."""
    inner = "".join(
        f"<parameter={key}>\n{_as_text(value)}\n</parameter>\n" for key, value in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{inner}</function>\n</tool_call>"


def glm45_call(name: str, arguments: Mapping[str, object], *, compact: bool = False) -> str:
    """One ``<tool_call>`` block as GLM-4.5 writes it (GLM-4.7: ``compact``, no newlines)."""
    sep = "" if compact else "\n"
    pairs = "".join(
        f"<arg_key>{key}</arg_key>{sep}<arg_value>{_as_text(value)}</arg_value>{sep}"
        for key, value in arguments.items()
    )
    return f"<tool_call>{name}{sep}{pairs}</tool_call>"
