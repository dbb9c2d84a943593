"""Logging a leaderboard (one base, many adapters) into the comparison's MLflow run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from sommelier_mlflow.integration._figure import leaderboard_figure
from sommelier_mlflow.integration._primitives import (
    client_uri,
    log_artifact_files,
    resolve_client,
    set_sommelier_tags,
)
from sommelier_mlflow.integration._store_errors import tracking_errors

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.evaluation import Leaderboard

__all__ = ["LEADERBOARD_FIGURE", "TAG_BEST_ADAPTER_RUN", "log_leaderboard"]

LEADERBOARD_FIGURE: Final = "sommelier/leaderboard.png"
TAG_BEST_ADAPTER_RUN: Final = "sommelier.best_adapter_run_id"


def log_leaderboard(
    board: Leaderboard,
    *,
    run_id: str,
    files: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    client: MlflowClient | None = None,
) -> None:
    """Log the leaderboard files under ``sommelier/``, its chart, and the best adapter's tags."""
    tracker = resolve_client(client)
    best = board.best_row.arm
    tags = {"sommelier.best_adapter": best.label, "sommelier.select_metric": board.select_metric}
    if best.run_id:
        tags[TAG_BEST_ADAPTER_RUN] = best.run_id
    set_sommelier_tags(run_id, model_kind="leaderboard", extra=tags, client=tracker)
    log_artifact_files(files, "sommelier", root=root, run_id=run_id, client=tracker)
    with tracking_errors(f"log figure {LEADERBOARD_FIGURE}", client_uri(tracker)):
        tracker.log_figure(run_id, leaderboard_figure(board), LEADERBOARD_FIGURE)
