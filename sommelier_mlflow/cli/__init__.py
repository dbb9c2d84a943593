"""The ``sommelier-mlflow`` command line (also behind the MLproject entry points)."""

from __future__ import annotations

from sommelier_mlflow.cli._commands import main
from sommelier_mlflow.cli._errors import error_line
from sommelier_mlflow.cli._parser import build_parser

__all__ = ["build_parser", "error_line", "main"]
