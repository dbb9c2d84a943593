"""``max_examples``: a seeded sample stratified by the declared slices, translations kept.

Taking the first rows of a split measures whatever the file happens to start
with (an imported BFCL split begins with hundreds of ``simple_python`` rows),
and reports it as "overall". A sample instead keeps every slice in the
proportion the whole split has, so a quick run estimates the same overall and
per-slice numbers as a full one, only with wider intervals.

The rule (:data:`SAMPLE_RULE`), exactly:

1. The unit is a root row (no ``source_example_id``) together with every row
   that translates it, so each matched pair survives whole; translations
   whose root is not in the split are left out, as before. Roots that share a
   ``conversation_id`` are one unit (every turn of the conversation, with
   their translations): a sampled conversation is never cut short, and
   ``max_examples`` counts conversations there.
2. A unit's stratum is the set of its rows' languages and declared slice
   values (``--slice-by`` fields, the scoring mode's default and derived
   slices such as BFCL's ``category``).
3. Each stratum of ``N_h`` of the ``N`` units gets ``floor(n * N_h / N)``
   units; the ``n`` minus their sum left over go one each to the strata with
   the largest remainders ``n * N_h mod N`` (ties: the larger stratum, then the
   stratum whose key sorts first). Integer arithmetic only: no rounding
   differs between machines.
4. Every unit, in order of root id (conversation id), draws one number from
   ``numpy.random.default_rng(seed).random``; in each stratum the units with
   the smallest draws are kept (ties: root id).
5. The kept rows stay in file order.

The same split, seed and slice fields give the same sample on every machine,
so both arms of a comparison (and a resumed run) evaluate the same rows.

On a split without ``conversation_id`` every unit is one root, exactly as in
the first version of the rule, and the sample is byte-identical to it, so the
record keeps its name (:data:`SAMPLE_RULE`) and older reports still compare.
A split with conversations used to be sampled by turn; it now records
:data:`CONVERSATION_SAMPLE_RULE`, so the gate refuses to pair a turn sample
with a conversation sample.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from sommelier_mlflow.data._schemas import TestExample
from sommelier_mlflow.data._slices import LANGUAGE_FIELD, check_slice_fields
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.toolcalls import DEFAULT_MODE, scoring_mode

__all__ = ["CONVERSATION_SAMPLE_RULE", "SAMPLE_RULE", "ExampleSample", "sample_examples"]

#: The name reports record for the rule above; a new rule gets a new name.
SAMPLE_RULE: Final = "stratified_proportional.v1"
#: The name recorded instead when the split has conversations (whole conversations are units).
CONVERSATION_SAMPLE_RULE: Final = "stratified_proportional.v2"

_Stratum = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
#: A sampling unit: ``(root id, 0)`` or ``(conversation id, 1)``; the flag keeps the two
#: id spaces apart and leaves a split without conversations sorted by root id alone.
_Unit = tuple[str, int]
_Derive = Mapping[str, Callable[[Sequence[Mapping[str, Any]]], str]]


@dataclass(frozen=True)
class ExampleSample:
    """The rows a run evaluates and, when they are a strict subset, how they were drawn.

    Attributes:
        examples: The kept rows, in file order.
        record: ``None`` when every row is kept; otherwise what a report
            records (``rule``, ``seed``, ``max_examples``, ``strata`` fields,
            ``roots`` in the split), which the comparison gate holds equal.
    """

    examples: tuple[TestExample, ...]
    record: dict[str, Any] | None = None


def _values(
    example: TestExample, fields: Sequence[str], derived: _Derive
) -> tuple[tuple[str, str], ...]:
    """The row's value of each stratifying field: read from the row, or derived from its gold."""
    given = dict(example.slice_values)
    out = []
    for name in fields:
        derive = derived.get(name)
        value = derive(example.gold_calls) if derive is not None else given.get(name, "")
        out.append((name, str(value)))
    return tuple(out)


def _quotas(sizes: dict[_Stratum, int], wanted: int) -> dict[_Stratum, int]:
    """Largest-remainder proportional allocation of ``wanted`` units, in exact integers."""
    total = sum(sizes.values())
    quotas = {key: wanted * size // total for key, size in sizes.items()}
    left = wanted - sum(quotas.values())
    order = sorted(sizes, key=lambda key: (-(wanted * sizes[key] % total), -sizes[key], key))
    for key in order[:left]:
        quotas[key] += 1
    return quotas


def _units(examples: Sequence[TestExample]) -> dict[str, _Unit]:
    """Each root's unit: its conversation when it has one, else the root alone."""
    return {
        e.example_id: (e.example_id, 0) if e.conversation_id is None else (e.conversation_id, 1)
        for e in examples
        if e.source_example_id is None
    }


def sample_examples(
    examples: Sequence[TestExample],
    max_examples: int,
    *,
    seed: int,
    slice_by: Sequence[str] = (),
    scoring: str = DEFAULT_MODE,
) -> ExampleSample:
    """Keep ``max_examples`` units (roots, or whole conversations) by the module's rule.

    Args:
        examples: The split's rows, in file order.
        max_examples: Units to keep: roots with their translations, or, where
            roots share a ``conversation_id``, whole conversations; ``0`` (or
            at least the split's units) keeps every row.
        seed: The run's ``--seed``.
        slice_by: Declared slice fields (the mode's defaults are added).
        scoring: The scoring mode, whose default and derived slices stratify too.

    Raises:
        ConfigError: ``max_examples`` or ``seed`` is negative or not an integer.
    """
    if type(max_examples) is not int or max_examples < 0:
        raise ConfigError(f"max_examples must be >= 0 (0 = all), got {max_examples!r}")
    if type(seed) is not int or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    unit_of = _units(examples)
    units = sorted(set(unit_of.values()))
    if max_examples == 0 or max_examples >= len(units):
        return ExampleSample(tuple(examples))
    fields = check_slice_fields(slice_by, scoring=scoring)
    derived = scoring_mode(scoring).derived_slices
    members: dict[_Unit, set[tuple[str, tuple[tuple[str, str], ...]]]] = defaultdict(set)
    for example in examples:
        unit = unit_of.get(example.source_example_id or example.example_id)
        if unit is not None:
            members[unit].add((example.language, _values(example, fields, derived)))
    draws = np.random.default_rng(seed).random(len(units))
    strata: dict[_Stratum, list[tuple[float, _Unit]]] = defaultdict(list)
    for unit, draw in zip(units, draws.tolist(), strict=True):
        strata[tuple(sorted(members[unit]))].append((draw, unit))
    quotas = _quotas({key: len(drawn) for key, drawn in strata.items()}, max_examples)
    kept = {unit for key, drawn in strata.items() for _, unit in sorted(drawn)[: quotas[key]]}
    chosen = tuple(e for e in examples if unit_of.get(e.source_example_id or e.example_id) in kept)
    conversations = any(unit[1] for unit in units)
    record = {
        "rule": CONVERSATION_SAMPLE_RULE if conversations else SAMPLE_RULE,
        "seed": seed,
        "max_examples": max_examples,
        "strata": [LANGUAGE_FIELD, *fields],
        "roots": len(units),
    }
    return ExampleSample(chosen, record)
