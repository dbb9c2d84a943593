"""Run a ``sommelier-mlflow`` command with ``demo`` standing for the bundled offline demo.

The package knows nothing about the demo: this script is the one place that
does. It replaces the value ``demo`` of ``--model`` and ``--adapter`` with the
demo's base model and LoRA adapter (committed under ``examples/demo/model/``
and verified by digest on every use; a missing or altered file exits 3, it is
never retrained), fills an empty ``--test-split`` of ``main`` with the demo's
prepared test split (cached under ``.cache/demo/``) and passes
its ``drop_summary.json`` to be logged, has the demo generate in float64
(see ``build_model.GENERATION_DTYPE``), then hands the rewritten command line
to the package's CLI unchanged otherwise. The MLproject's ``main`` and
``evaluate`` entry points run through it, so ``mlflow run .`` with no
parameters runs the demo; with your own model and adapter it only forwards.

    python examples/demo/run.py main                  # the whole demo
    python examples/demo/run.py evaluate --test-split S --model demo --model-kind base
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

_HERE: Final = Path(__file__).resolve().parent
_REPO: Final = _HERE.parents[1]
DEMO: Final = "demo"
#: The commands that generate, and so run in the demo's precision unless told otherwise.
_GENERATING: Final = ("main", "evaluate")

if str(_REPO) not in sys.path:
    # Run from a checkout: the package is importable without installing it.
    sys.path.insert(0, str(_REPO))


def _values(argv: list[str], flag: str) -> list[str]:
    """Every value of ``--flag VALUE`` or ``--flag=VALUE``, in order."""
    found = []
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            found.append(argv[index + 1])
        elif token.startswith(f"{flag}="):
            found.append(token.split("=", 1)[1])
    return found


def _value(argv: list[str], flag: str) -> str | None:
    """The value of ``--flag``; the last one wins, as in argparse."""
    found = _values(argv, flag)
    return found[-1] if found else None


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with every value of ``flag`` set to ``value`` (appended if absent)."""
    out: list[str] = []
    seen = False
    skip = False
    for index, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if token == flag and index + 1 < len(argv):
            out += [flag, value]
            seen = skip = True
        elif token.startswith(f"{flag}="):
            out.append(f"{flag}={value}")
            seen = True
        else:
            out.append(token)
    return out if seen else [*out, flag, value]


def resolve_demo(argv: Sequence[str], build: Callable[[], Any]) -> list[str]:
    """Rewrite a command line so that ``demo`` means the bundled demo's files.

    One rule for every command: an adapter belongs to its base model, so the
    ``demo`` adapter goes only with the ``demo`` model, and the ``demo`` model
    takes no adapter but its own. ``build`` is called (once) only when
    ``demo`` is asked for; it returns an object with ``splits_dir``,
    ``base_model_dir``, ``adapter_dir`` and ``dtype``. The demo generates in
    its own precision (``dtype``) on the ``hf`` backend unless a
    ``--backend-options dtype=...`` says otherwise.

    Raises:
        ConfigError: The rule is broken (exit 2).
    """
    from sommelier_mlflow.errors import ConfigError

    args = list(argv)
    command = args[0] if args else ""
    model, adapter = _value(args, "--model"), _value(args, "--adapter")
    if DEMO not in (model, adapter):
        return args
    if adapter == DEMO and model != DEMO:
        raise ConfigError(
            "the demo adapter was trained on the demo base model: pass --model demo too"
        )
    if model == DEMO and adapter not in (None, "", DEMO):
        hint = "pass --adapter demo or none"
        if str(adapter).startswith("models:/"):
            # MLproject's `model` defaults to demo, so say how to leave it out.
            hint = (
                "a registered adapter names its own base: pass --model '' (mlflow run: "
                "-P model='') to load it onto that base, or give the base as --model"
            )
        raise ConfigError(f"the demo model takes only the demo adapter: {hint}")
    built = build()
    args = _replace(args, "--model", str(built.base_model_dir))
    if adapter == DEMO:
        args = _replace(args, "--adapter", str(built.adapter_dir))
    if command in _GENERATING and _value(args, "--backend") in (None, "", "hf"):
        # The old spelling --backend-option is still accepted for one release.
        given = [*_values(args, "--backend-options"), *_values(args, "--backend-option")]
        options = ",".join(given).split(",")
        if not any(option.strip().startswith("dtype=") for option in options):
            args += ["--backend-options", f"dtype={built.dtype}"]
    if command == "main" and not _value(args, "--test-split"):
        args = _replace(args, "--test-split", str(Path(built.splits_dir) / "test.jsonl"))
        drop_summary = Path(built.splits_dir) / "drop_summary.json"
        if drop_summary.is_file() and _value(args, "--drop-summary") is None:
            args = _replace(args, "--drop-summary", str(drop_summary))
    return args


def _build() -> Any:
    sys.path.insert(0, str(_HERE))
    from build_model import demo_assets

    return demo_assets()


def main(argv: Sequence[str] | None = None) -> int:
    """Resolve ``demo`` and run the package's command line."""
    from sommelier_mlflow.cli import error_line
    from sommelier_mlflow.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["main"] and _value(args, "--model") is None:
        args += ["--model", DEMO, "--adapter", DEMO]  # `run.py main` alone: the whole demo
    from sommelier_mlflow.errors import SommelierError

    try:
        resolved = resolve_demo(args, _build)
    except SommelierError as exc:  # a missing or altered committed file (3), a bad pairing (2)
        print(error_line(str(exc), exc.exit_code), file=sys.stderr)
        return exc.exit_code
    return cli_main(resolved)


if __name__ == "__main__":
    sys.exit(main())
