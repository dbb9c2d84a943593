"""Logging a leaderboard (one base, many adapters) into the comparison's MLflow run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from sommelier_mlflow.integration._figure import leaderboard_figure
from sommelier_mlflow.integration._logged_models import TAG_LOGGED_MODEL_ID, is_logged_model_id
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

__all__ = ["LEADERBOARD_FIGURE", "TAG_BEST_ADAPTER_RUN", "log_leaderboard", "ranking_tags"]

LEADERBOARD_FIGURE: Final = "sommelier/leaderboard.png"
TAG_BEST_ADAPTER_RUN: Final = "sommelier.best_adapter_run_id"
#: Prefix of the ranking tags set on each adapter's LoggedModel.
LEADERBOARD_TAG_PREFIX: Final = "sommelier.leaderboard."


def log_leaderboard(
    board: Leaderboard,
    *,
    run_id: str,
    files: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    client: MlflowClient | None = None,
) -> None:
    """Log the leaderboard files under ``sommelier/``, its chart, and the best adapter's tags.

    Each adapter whose arm run's metrics are on a LoggedModel (see
    :mod:`._logged_models`) also gets its ranking as model tags
    (:func:`ranking_tags`), so the Models tab shows the decision next to the metrics.
    """
    tracker = resolve_client(client)
    best = board.best_row.arm
    tags = {"sommelier.best_adapter": best.label, "sommelier.select_metric": board.select_metric}
    if best.run_id:
        tags[TAG_BEST_ADAPTER_RUN] = best.run_id
    set_sommelier_tags(run_id, model_kind="leaderboard", extra=tags, client=tracker)
    log_artifact_files(files, "sommelier", root=root, run_id=run_id, client=tracker)
    with tracking_errors(f"log figure {LEADERBOARD_FIGURE}", client_uri(tracker)):
        tracker.log_figure(run_id, leaderboard_figure(board), LEADERBOARD_FIGURE)
    for index, tags in ranking_tags(board, run_id).items():
        arm_run = board.rows[index].arm.run_id
        if not arm_run:
            continue
        with tracking_errors(f"tag the LoggedModel of arm {arm_run}", client_uri(tracker)):
            model_id = (
                arm_run  # a checkpoint's LoggedModel, given as the arm itself
                if is_logged_model_id(arm_run)
                else tracker.get_run(arm_run).data.tags.get(TAG_LOGGED_MODEL_ID)
            )
            if model_id:
                tracker.set_logged_model_tags(model_id, tags)


def ranking_tags(board: Leaderboard, leaderboard_run_id: str) -> dict[int, dict[str, str]]:
    """Per row index: ``sommelier.leaderboard.{rank,adjusted_p_value,verdict,run_id,...}``.

    Rank 1 is the best adapter; the order is the one that picks it (estimated
    delta of the select metric, then the smaller Holm-adjusted p, then the
    order given). The verdict is Holm's family decision at the board's alpha.
    """
    estimates = [
        row.comparison.slices["overall"].delta.interval(board.select_metric).estimate
        for row in board.rows
    ]
    order = sorted(
        range(len(board.rows)),
        key=lambda i: (-estimates[i], board.rows[i].adjusted_p_value, i),
    )
    return {
        index: {
            f"{LEADERBOARD_TAG_PREFIX}{key}": value
            for key, value in {
                "rank": str(rank),
                "of": str(len(board.rows)),
                "adjusted_p_value": repr(float(board.rows[index].adjusted_p_value)),
                "verdict": "better" if board.rows[index].better else "not shown better",
                "select_metric": board.select_metric,
                "run_id": leaderboard_run_id,
            }.items()
        }
        for rank, index in enumerate(order, start=1)
    }
