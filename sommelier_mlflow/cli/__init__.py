"""The ``sommelier-mlflow`` command line (also behind the MLproject entry points)."""

from __future__ import annotations

from sommelier_mlflow.cli._commands import build_parser, main
from sommelier_mlflow.cli._errors import error_line

__all__ = ["build_parser", "error_line", "main"]
