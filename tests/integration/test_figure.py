from __future__ import annotations

import io
from typing import Any

import pytest

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.integration import comparison_figure, gaps_figure
from sommelier_mlflow.toolcalls import METRIC_NAMES
from tests.integration.integration_helpers import Arms


def _texts(figure: Any) -> list[Any]:
    from matplotlib.text import Text

    figure.canvas.draw()  # lays out tick labels so every text artist exists
    return [text for text in figure.findobj(Text) if text.get_text().strip()]


def _png_size(figure: Any) -> tuple[int, int]:
    from PIL import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    buffer.seek(0)
    return Image.open(buffer).size  # type: ignore[no-any-return]


def _row_labels(figure: Any) -> list[str]:
    """Row labels from the top row down."""
    axes = figure.axes[0]
    ticks = sorted(zip(axes.get_yticks(), axes.get_yticklabels(), strict=True), key=lambda t: -t[0])
    return [label.get_text() for _, label in ticks]


def test_forest_plot_has_one_row_per_slice_and_metric(arms: Arms) -> None:
    report = arms.comparison_typed
    figure = comparison_figure(report)
    labels = _row_labels(figure)
    slices = ["overall", *sorted(s for s in report.slices if s != "overall")]
    assert len(labels) == len(slices) * len(METRIC_NAMES)
    # Top to bottom: overall first, in the report's metric order.
    top_down = labels
    assert top_down[0].endswith("overall · valid_json_rate")
    for label, (slice_name, metric) in zip(
        top_down, [(s, m) for s in slices for m in METRIC_NAMES], strict=True
    ):
        delta = report.slices[slice_name].delta.interval(metric)
        clear = delta.lower > 0 or delta.upper < 0
        assert label == f"{'* ' if clear else ''}{slice_name} · {metric}"
    assert any(label.startswith("* ") for label in labels)  # the fixture has clear gains
    axes = figure.axes[0]
    assert any(line.get_xdata()[0] == 0.0 == line.get_xdata()[-1] for line in axes.get_lines())


def test_charts_are_readable_at_1200_px(arms: Arms) -> None:
    for figure in (comparison_figure(arms.comparison_typed), gaps_figure(arms.comparison_typed)):
        width, height = _png_size(figure)
        assert width == 1200 and height > 300
        sizes = [text.get_fontsize() for text in _texts(figure)]
        assert sizes and min(sizes) >= 11


def test_gaps_chart_shows_both_models_per_language_and_metric(arms: Arms) -> None:
    figure = gaps_figure(arms.comparison_typed)
    labels = _row_labels(figure)
    assert len(labels) == 2 * len(METRIC_NAMES) * len(arms.comparison_typed.gaps["base"])
    assert labels[0] == "fr-en · valid_json_rate · base"
    assert labels[1] == "fr-en · valid_json_rate · adapter"


def test_charts_refuse_reports_without_the_numbers(arms: Arms) -> None:
    from dataclasses import replace

    with pytest.raises(DataError, match="no 'overall' slice"):
        comparison_figure(replace(arms.comparison_typed, slices={}))
    with pytest.raises(DataError, match="no matched-pair gaps"):
        gaps_figure(replace(arms.comparison_typed, gaps={"base": {}, "adapter": {}}))
