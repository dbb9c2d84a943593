"""The ``llama4_pythonic`` output format (Llama 4), decoder ``llama4_pythonic.v1``.

Llama 4 answers with a Python list of calls, sometimes between its code
tokens::

    <|python_start|>[get_weather(city="Paris"), get_time(zone="CET")]<|python_end|>

What the decoder accepts, exactly:

1. The text is trimmed of whitespace; one leading ``<|python_start|>`` and,
   after it, one trailing ``<|python_end|>`` are removed when present (either
   may be missing: the model does not always write them, and a server that
   skips special tokens drops them).
2. What is left is read exactly as the ``pythonic`` format reads a whole
   output: a Python list of calls with literal keyword arguments, read with
   :mod:`ast` only, never evaluated. A code token anywhere else is not Python
   (``invalid_json``).
"""

from __future__ import annotations

from typing import Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import INVALID_JSON
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_llama4_pythonic"]

_START: Final = "<|python_start|>"
_END: Final = "<|python_end|>"
#: An output cut inside the end token ends with one of these.
_CUT_ENDS: Final = tuple(_END[:length] for length in range(1, len(_END)))


def decode_llama4_pythonic(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``llama4_pythonic`` format (see the module docstring).

    Args:
        text: The raw completion, with or without the code tokens.
        tools: The example's tools; unused, the arguments are Python literals.

    Returns:
        The calls in list order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    del tools
    body = text.strip()
    if body.startswith(_START):
        body = body[len(_START) :]
    if body.endswith(_END):
        body = body[: -len(_END)]
    elif body.endswith(_CUT_ENDS) and "(" in body and "#" not in body:
        # pythonic's verdict, sooner: with no comment to hide it, a "<" at the
        # end (or "<|" anywhere) is a syntax error in Python, and no string can
        # hold it, since a string open at the end never closes. Without this,
        # every output cut inside the end token took the slow ast path.
        return INVALID_JSON
    return decode_pythonic(body)


register_output_format(
    OutputFormat(
        "llama4_pythonic",
        "Llama 4: the pythonic list of calls, optionally between <|python_start|> and "
        "<|python_end|>.",
        decode=decode_llama4_pythonic,
        version="llama4_pythonic.v1",
        special_tokens=False,
        variant_of="pythonic",
    )
)
