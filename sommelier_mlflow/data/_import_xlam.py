"""``xlam``: xlam-function-calling-60k rows, the default input format (``data/_prepare.py``).

Registered under the same seam as the conversation formats so
``--input-format xlam`` names it; its rows, checks and drop summary are
exactly those ``prepare`` always wrote.
"""

from __future__ import annotations

from sommelier_mlflow.data._input_formats import InputFormat, register_input_format
from sommelier_mlflow.data._prepare import prepare_xlam

__all__ = ["XLAM"]

XLAM = register_input_format(
    InputFormat(
        "xlam",
        "xlam-function-calling-60k rows: query, tools and answers as JSON strings (JSONL).",
        prepare=prepare_xlam,
    )
)
