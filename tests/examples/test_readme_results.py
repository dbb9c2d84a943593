"""The README's demo results table is the demo's current output, not a copy that drifts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    return load_script("docs/update_readme_results.py")


def _shots() -> ModuleType:
    return load_script("docs/screenshots.py")


OUTPUT = """\
[demo-build] ...
slice    metric                      base  adapter  delta [95% CI]
overall  valid_json_rate            0.944    0.983  +0.039 [+0.014, +0.067]
matched-pair gap fr-en (base, full_call_exact_match, 157 pairs): -0.242 [-0.312, -0.172]

reports: /somewhere
"""


def test_the_table_is_cut_from_mains_output_and_written_between_the_markers() -> None:
    script = _script()
    table = script.summary_table(OUTPUT)
    assert table.splitlines()[0].startswith("slice ")
    assert table.splitlines()[-1].startswith("matched-pair gap fr-en (base")
    readme = f"intro\n{script.START}\n```text\nold\n```\n{script.END}\noutro\n"
    updated = script.with_table(readme, table)
    assert script.readme_table(updated) == table
    assert updated.startswith("intro\n") and updated.endswith("\noutro\n")
    with pytest.raises(ValueError, match="reports:"):
        script.summary_table("slice metric\n")


@pytest.mark.slow
def test_readme_table_is_what_main_prints_on_the_demo() -> None:
    """Runs the real demo on the committed weights: what any x86-64 machine prints."""
    script = _script()
    printed = script.summary_table(script.run_demo())
    in_readme = script.readme_table((ROOT / "README.md").read_text(encoding="utf-8"))
    assert in_readme == printed, "README.md is stale: run python docs/update_readme_results.py"


def _pictures() -> dict[str, Any]:
    """What docs/screenshots.py recorded beside the committed pictures."""
    return json.loads((ROOT / "docs" / "screenshots.json").read_text(encoding="utf-8"))


def _table(readme: str) -> dict[tuple[str, str], float]:
    script = _script()
    values: dict[tuple[str, str], float] = script.table_values(script.readme_table(readme))
    return values


def _stale_values(pictures: dict[str, Any], readme: str) -> tuple[list[str], set[tuple[str, str]]]:
    """Each recorded value the README's table prints otherwise, and the cells compared."""
    table = _table(readme)
    stale: list[str] = []
    compared: set[tuple[str, str]] = set()
    for picture, shown in sorted(pictures.items()):
        for run, metrics in sorted(shown.get("runs", {}).items()):
            for key, value in sorted(metrics.items()):
                printed = table.get((run, key))
                if printed is None:
                    continue  # a value the table does not print (a count, another gap)
                compared.add((run, key))
                if abs(value - printed) > 5e-4 + 1e-9:  # the table rounds to 3 decimals
                    stale.append(f"{picture}: {run} {key} = {value:.4f}, README {printed}")
    return stale, compared


def test_the_committed_pictures_show_the_readmes_numbers() -> None:
    """The pictures come from a demo run: its values, recorded beside them, are the table's."""
    pictures = _pictures()
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    shown = {
        m for page in pages for m in re.findall(r"\(((?:docs/)?ui-[\w-]+\.png)\)", page.read_text())
    }
    assert set(pictures) == {Path(name).name for name in shown}  # every picture the docs show
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stale, compared = _stale_values(pictures, readme)
    assert stale == [], "retake the pictures: python docs/screenshots.py"
    assert compared == set(_table(readme))  # every number of the table is in some picture
    for name in ("ui-experiment.png", "ui-run-metrics.png", "ui-compare-runs.png"):
        assert _stale_values({name: pictures[name]}, readme)[1], name


def test_a_picture_of_other_numbers_fails_the_check() -> None:
    """The check compares values, so the old 0.983 in a picture is caught."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = {"runs": {"adapter": {"overall/valid_json_rate": 0.983}}}
    stale, compared = _stale_values({"ui-run-metrics.png": shown}, readme)
    assert len(compared) == 1 and len(stale) == 1 and "README 0.969" in stale[0]


def test_the_pictures_show_the_experiment_the_readmes_command_logs_into() -> None:
    pictures = _pictures()
    shots = _shots()
    assert {shown["experiment"] for shown in pictures.values()} == {shots.EXPERIMENT}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"MLflow's `{shots.EXPERIMENT}` experiment" in readme
