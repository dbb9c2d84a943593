"""``python -m sommelier_mlflow.cli``: what the MLproject entry points run."""

from __future__ import annotations

import sys

from sommelier_mlflow.cli._commands import main

sys.exit(main())
