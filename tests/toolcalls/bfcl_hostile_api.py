"""A test-only class for the BFCL sandbox's ``class_modules`` hook: methods that misbehave.

Each method first changes the state (``counter``), so a test can tell whether
a call that was stopped left a trace.
"""

from __future__ import annotations

import decimal
import os
import sys
from typing import Any


class HostileAPI:
    """Built with no arguments and loaded with ``_load_scenario``, like BFCL's classes."""

    def __init__(self) -> None:
        self.counter = 0

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        self.counter = scenario.get("counter", 0)

    def bump(self) -> dict[str, int]:
        self.counter += 1
        return {"counter": self.counter}

    def spin(self) -> None:
        self.counter += 100
        while True:  # a Python-level loop: the alarm stops it
            pass

    def hang(self) -> str:
        self.counter += 1000
        decimal.getcontext().prec = 10**8
        return str(decimal.Decimal(2).sqrt())  # stuck in C: only the parent's deadline ends it

    def allocate(self, size: int) -> int:
        self.counter += 10_000
        return len(bytearray(size))

    def shout(self, size: int) -> str:
        return "x" * size


class CrashingAPI:
    """Its scenario loader ends the worker process, saying why on stderr."""

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        sys.stderr.write("CrashingAPI: this scenario ends the process\n")
        sys.stderr.flush()
        os._exit(1)
