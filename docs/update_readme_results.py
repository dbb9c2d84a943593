"""Regenerate the README's demo results table from what the demo prints today.

A results table typed into a README drifts from the code that produced it;
this script makes the table a build output instead. It runs the offline demo
exactly as ``mlflow run .`` does (the ``main`` command with its defaults, no
tracking), takes the summary table ``main`` prints, and writes it between the
README's ``demo-results`` markers.

    python docs/update_readme_results.py            # run the demo, rewrite README.md
    python docs/update_readme_results.py --check    # exit 1 if README.md is stale

``tests/examples/test_readme_results.py`` fails when the README's table and
the demo's output differ, so a change that moves the numbers must update it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START = "<!-- demo-results:start (written by docs/update_readme_results.py; do not edit) -->"
END = "<!-- demo-results:end -->"


def run_demo(out: Path | None = None) -> str:
    """Run the demo's ``main`` without MLflow and return everything it printed.

    The reports go to ``out``, or to a fresh temporary directory: generations
    resumed from an earlier run of other code or weights would not be today's.
    """
    if out is None:
        with tempfile.TemporaryDirectory(prefix="demo-main-") as scratch:
            return run_demo(Path(scratch))
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_RUN_ID", None)
    demo = ROOT / "examples" / "demo" / "run.py"  # what the MLproject's main entry point runs
    command = [sys.executable, str(demo), "main", "--out", str(out)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the demo failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def summary_table(stdout: str) -> str:
    """The table ``main`` prints: every line before the ``reports:`` line."""
    lines = stdout.splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("reports:")), None)
    if end is None:
        raise ValueError("no 'reports:' line in the demo's output; is this `main`'s output?")
    table = lines[:end]
    start = next(i for i, line in enumerate(table) if line.startswith("slice "))
    return "\n".join(table[start:]).rstrip()


def readme_table(readme: str) -> str:
    """The table currently between the README's markers (without the code fence)."""
    if START not in readme or END not in readme:
        raise ValueError(f"README.md lacks the markers {START!r} ... {END!r}")
    block = readme.split(START, 1)[1].split(END, 1)[0].strip()
    lines = block.splitlines()
    if not lines or not lines[0].startswith("```") or lines[-1] != "```":
        raise ValueError("the demo-results block must hold exactly one fenced code block")
    return "\n".join(lines[1:-1]).rstrip()


_GAP_LINE = re.compile(
    r"^matched-pair gap (?P<lang>[^-\s]+)-\S+ \((?P<kind>\w+), (?P<metric>\w+), \d+ pairs\): "
    r"(?P<gap>\S+) \[(?P<lower>\S+), (?P<upper>\S+)\]$"
)


def table_values(table: str) -> dict[tuple[str, str], float]:
    """Every number of the table, keyed as MLflow logs it: ``(run, metric key)``.

    ``run`` is ``base`` or ``adapter`` (an arm's ``<slice>/<metric>`` and
    ``gap/<language>/...``) or ``parent`` (the comparison's ``delta/...``), so a
    value read back from the runs, or recorded beside a screenshot of them, can
    be checked against the README.
    """
    values: dict[tuple[str, str], float] = {}
    for line in table.splitlines()[1:]:
        gap = _GAP_LINE.match(line)
        if gap:
            kind, key = gap["kind"], f"gap/{gap['lang']}"
            values[kind, f"{key}/{gap['metric']}"] = float(gap["gap"])
            for end in ("lower", "upper"):
                values[kind, f"{key}/ci95/{gap['metric']}.{end}"] = float(gap[end])
            continue
        cells = line.replace("[", " ").replace("]", " ").replace(",", " ").split()
        if len(cells) != 7:
            raise ValueError(f"not a row of the demo table: {line!r}")
        slice_, metric, base, adapter, delta, lower, upper = cells
        values["base", f"{slice_}/{metric}"] = float(base)
        values["adapter", f"{slice_}/{metric}"] = float(adapter)
        values["parent", f"delta/{slice_}/{metric}"] = float(delta)
        values["parent", f"delta/{slice_}/ci95/{metric}.lower"] = float(lower)
        values["parent", f"delta/{slice_}/ci95/{metric}.upper"] = float(upper)
    return values


def with_table(readme: str, table: str) -> str:
    """``readme`` with the block between the markers replaced by ``table``."""
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n```text\n{table}\n```\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    """Rewrite README.md's table from a fresh demo run (or, with ``--check``, compare)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    parser.add_argument(
        "--out", type=Path, default=None, help="demo output folder (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    table = summary_table(run_demo(args.out))
    readme = README.read_text(encoding="utf-8")
    if args.check:
        if readme_table(readme) != table:
            print("README.md's demo table differs from the demo's output:\n" + table)
            return 1
        print("README.md's demo table matches the demo's output")
        return 0
    updated = with_table(readme, table)
    temporary = README.with_suffix(".md.tmp")
    temporary.write_text(updated, encoding="utf-8")
    temporary.replace(README)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
