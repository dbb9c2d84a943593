"""How the command line words a failure: the exit code in the line, the flag meant.

Two things reach a user of ``mlflow run`` badly without this module. MLflow
wraps the command's failure and exits 1 itself, so the documented exit codes
(2 bad input, 3 missing model, ...) never reach the shell: under ``mlflow
run`` each ``error`` line therefore states its code. And a misspelled ``-P``
parameter is not refused by MLflow but appended to the command as a flag
(``-P max_exampels=10`` becomes ``--max_exampels 10``), which argparse only
calls an unrecognized argument: :func:`refuse_unknown` names the parameter and
the closest one the command has.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn

__all__ = ["error_line", "CommandParser", "refuse_unknown"]


def error_line(message: str, exit_code: int) -> str:
    """The one ``error`` line of a failure with ``exit_code``.

    ``error: ...`` in a shell, where the exit status says the code; ``error
    (exit code N): ...`` under ``mlflow run`` (``MLFLOW_RUN_ID`` set), whose own
    exit status is 1 whatever the command returned.
    """
    if os.environ.get("MLFLOW_RUN_ID"):
        return f"error (exit code {exit_code}): {message}"
    return f"error: {message}"


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose usage errors (exit 2) say so under ``mlflow run``."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the error line, and exit 2 (argparse's code for bad usage)."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {error_line(message, 2)}\n")


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The subcommand's own parser (it knows the command's flags), or ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            chosen: argparse.ArgumentParser = action.choices[command]
            return chosen
    return parser


def _long_options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each long flag of the parser, without its dashes, to its action's first spelling.

    A renamed flag keeps its old spelling as a second option string of the
    same action (``--raw-data``, ``--raw``); a near miss of either is pointed at
    the first, the one the MLproject parameter matches.
    """
    spellings: dict[str, str] = {}
    for action in parser._actions:
        names = [o[2:] for o in action.option_strings if o.startswith("--") and o != "--help"]
        spellings.update((name, names[0]) for name in names)
    return spellings


def _unknown_flag(token: str, options: Mapping[str, str]) -> str:
    """One sentence on an unknown ``--flag``: its parameter name and the closest valid one.

    The token is read as an MLproject parameter when it has an underscore
    (``mlflow run`` passes ``-P max_exampels=10`` as ``--max_exampels``), so the
    suggestion is spelt as the parameter the user would type.
    """
    name = token[2:].split("=", 1)[0]
    as_parameter = "_" in name
    close = difflib.get_close_matches(name.replace("_", "-"), list(options), n=1, cutoff=0.6)
    what = f"unknown parameter {name!r}" if as_parameter else f"unknown option {token}"
    if not close:
        return f"{what}: this command has no such option"
    meant = options[close[0]]
    flag = f"--{meant}"
    if as_parameter:
        return f"{what}: did you mean {meant.replace('-', '_')!r} ({flag})?"
    return f"{what}: did you mean {flag}?"


def refuse_unknown(
    parser: argparse.ArgumentParser, command: str, unknown: Sequence[str]
) -> NoReturn:
    """Exit 2 for arguments ``command`` does not take, naming the closest valid flags."""
    chosen = _command_parser(parser, command)
    options = _long_options(chosen)
    flags = [token for token in unknown if token.startswith("--")]
    sentences = [_unknown_flag(token, options) for token in flags]
    if not sentences:
        sentences = [f"unrecognized arguments: {' '.join(unknown)}"]
    listing = f"`{parser.prog} {command} --help` lists its options"
    chosen.error("; ".join(sentences) + f" ({listing})")
