"""The README's demo results table is the demo's current output, not a copy that drifts."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    return load_script("docs/update_readme_results.py")


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
