"""The parallel-call parser, ``sommelier.calls_parser.v1``.

A completion may answer with one call, several calls (an array) or an
explicit "no call" (``[]``). The parser applies the same first-balanced-span,
strict-JSON, repair-nothing rule as ``sommelier.parser.v1`` (it calls the same
scanner), and differs only in the shapes it accepts.

Abstaining is deliberately narrow: only ``[]`` (``ok`` with zero calls) and a
text without any bracket (``no_json``) count as "the model did not call".
Broken JSON or a wrong shape is a failure, never an abstention; counting it
as one would reward a model for emitting garbage on irrelevance items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sommelier_mlflow.toolcalls._parse import (
    NO_BRACKET,
    NOT_JSON,
    ParseStatus,
    first_json_span,
    is_tool_call,
)

__all__ = [
    "CALLS_PARSER_VERSION",
    "CallsParseResult",
    "ok_calls",
    "parse_tool_calls",
]

CALLS_PARSER_VERSION: Final = "sommelier.calls_parser.v1"


@dataclass(frozen=True, slots=True)
class CallsParseResult:
    """What the calls parser concluded about one completion.

    Attributes:
        status: One of ``ok``, ``no_json``, ``invalid_json``, ``invalid_shape``.
        calls: The calls in output order when ``status == "ok"`` (possibly
            empty: an explicit "no call"), otherwise ``None``.
        calls_in_reasoning: The output made no call in its answer (``no_json``)
            but wrote the format's call syntax while reasoning (inside
            ``<think>``, harmony's ``analysis`` channel): a call written while
            thinking is not the answer, yet a report counts such outputs,
            since they tell a model that would call from one that would not.
    """

    status: ParseStatus
    calls: tuple[dict[str, Any], ...] | None = None
    calls_in_reasoning: bool = False

    @property
    def abstained(self) -> bool:
        """Whether the completion says "no call": ``[]`` or no bracket at all."""
        return self.status == "no_json" or (self.status == "ok" and not self.calls)

    @property
    def predicted_calls(self) -> tuple[dict[str, Any], ...]:
        """The calls the completion makes; a failure makes none."""
        return self.calls or ()


# The frozen dataclass's __init__ sets each field through ``object.__setattr__``,
# which costs a hot decoder about as much as reading a call; :func:`ok_calls`
# fills the two slots directly instead.
_new_result = object.__new__
_set_status = CallsParseResult.__dict__["status"].__set__
_set_calls = CallsParseResult.__dict__["calls"].__set__
_set_in_reasoning = CallsParseResult.__dict__["calls_in_reasoning"].__set__


def ok_calls(calls: tuple[dict[str, Any], ...]) -> CallsParseResult:
    """``CallsParseResult("ok", calls)``, built for a decoder's hot loop (the same object)."""
    result: CallsParseResult = _new_result(CallsParseResult)
    _set_status(result, "ok")
    _set_calls(result, calls)
    _set_in_reasoning(result, False)
    return result


_NO_JSON: Final = CallsParseResult("no_json")
_INVALID_JSON: Final = CallsParseResult("invalid_json")
_INVALID_SHAPE: Final = CallsParseResult("invalid_shape")
_NO_CALL: Final = CallsParseResult("ok", ())


def parse_tool_calls(text: str) -> CallsParseResult:
    """Parse one completion into zero or more tool calls, conservatively.

    ``ok`` means the first balanced span is one call object or an array whose
    every element is exactly ``{"name": <non-empty str>, "arguments": <object>}``;
    ``[]`` is ``ok`` with zero calls. One bad element makes the whole answer
    ``invalid_shape``: partial credit for the well-formed rest would again be
    the parser's generosity, not the model's behaviour. Never raises for any
    ``str``.

    Args:
        text: The raw completion exactly as the model produced it.

    Returns:
        The :class:`CallsParseResult`.
    """
    value = first_json_span(text)
    if value is NO_BRACKET:
        return _NO_JSON
    if value is NOT_JSON:
        return _INVALID_JSON
    if isinstance(value, list):
        if not value:
            return _NO_CALL
        for element in value:
            if not is_tool_call(element):
                return _INVALID_SHAPE
        return CallsParseResult("ok", tuple(value))
    if is_tool_call(value):
        return CallsParseResult("ok", (value,))
    return _INVALID_SHAPE
