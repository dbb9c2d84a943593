"""BFCL's AST rules: does a list of decoded calls match one of a question's possible answers?

The Berkeley Function Calling Leaderboard scores single-turn questions by
comparing the calls a model made with *possible answers*: per expected call,
the function name and, per parameter, a list of acceptable values (``""``
among them marks the parameter as optional). This module re-implements the
documented behaviour of BFCL's checker, so a split imported by
``import-bfcl`` is scored as the leaderboard would score it, without
importing BFCL (whose package pulls dozens of provider SDKs).

BFCL picks its rule by the category's name; on the categories ``import-bfcl``
accepts, every rule reduces to one on the number of expected calls, which is
what the answer key carries:

- no expected call (the ``irrelevance`` categories): passes when the output
  decoded to zero calls;
- one expected call (``simple_python``, ``multiple``, ``live_simple``,
  ``live_multiple``): exactly one call, matching it;
- several (the ``parallel`` categories): as many calls as expected calls,
  matched one to one in any order.

One call matches one expected call when the names are equal, every required
parameter is present, every given parameter is both in the function's
schema and in the answer, each given value is acceptable, and every answer
parameter left out has ``""`` among its acceptable values (the answer key,
the gold call ``import-bfcl`` writes, holds per parameter BFCL's
``acceptable`` values verbatim, its ``bfcl_type`` and whether it is
``required``). A value is
acceptable after BFCL's type check (an integer may stand for a ``float``, a
float never for an ``integer``; list items checked one level deep; a value
of the answer's own type when the answer names a variable instead of a
literal) and BFCL's comparison: strings after standardisation (the
characters `` ,./-_*^`` removed, lower-cased, ``'`` read as ``"``), lists
element by element in order with their strings standardised, dicts key by
key against their own acceptable lists, anything else by equality.

Two deliberate differences from BFCL, both counted so that a user can see
them (:attr:`BfclVerdict.bfcl_passed` holds what BFCL itself concludes):

- an output that fails to decode is a failure everywhere. BFCL scores it as
  a correct abstention on ``irrelevance`` questions (its issue #443), which
  rewards a model for emitting broken syntax exactly where it should not call;
- on ``parallel`` questions BFCL pairs each expected call with the *first*
  unused call that matches it, and fails when that greedy choice leaves an
  expected call without a partner even though another pairing would have
  matched them all. Here any complete one-to-one pairing passes (Hopcroft
  and Karp's algorithm decides whether one exists, without recursion).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final

from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls._parse import is_tool_call

__all__ = [
    "BFCL_REASONS",
    "standardize_bfcl_string",
    "BfclGold",
    "BfclVerdict",
    "check_bfcl",
]

#: Why an example failed (the empty string when it passed).
BFCL_REASONS: Final = (
    "undecodable",
    "called_on_irrelevance",
    "wrong_count",
    "wrong_name",
    "missing_required",
    "unexpected_param",
    "type_mismatch",
    "value_mismatch",
    "missing_optional",
    "no_assignment",
)

# BFCL's type names and the Python (JSON-decoded) type a value must have.
_PY_TYPE: Final[dict[str, type]] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
#: Every valid ``bfcl_type`` of an answer key, as a tuple: ``(type,)`` or ``(type, item type)``.
_VALID_TYPES: Final = frozenset(
    {(outer,) for outer in _PY_TYPE} | {(outer, inner) for outer in _PY_TYPE for inner in _PY_TYPE}
)
_REMOVED: Final = " ,./-_*^"
_STANDARDIZE: Final = str.maketrans("", "", _REMOVED)
_REMOVED_BYTES: Final = _REMOVED.encode()


def _standardize(text: str) -> str:
    if text.isascii():
        return text.encode().translate(None, _REMOVED_BYTES).lower().decode().replace("'", '"')
    return text.translate(_STANDARDIZE).lower().replace("'", '"')


#: Short strings recur (a parallel answer checks each call's values against every
#: expected call; both arms answer the same questions), so theirs are remembered.
_standardize_short: Final = functools.lru_cache(maxsize=4096)(_standardize)
_SHORT: Final = 64


def standardize_bfcl_string(text: str) -> str:
    """A string as BFCL compares it: `` ,./-_*^`` removed, lower-cased, ``'`` read as ``"``.

    So ``"April 1, 2024"`` and ``"april 1 2024"`` compare equal, which BFCL
    intends: the model should not lose a point for punctuation or case.
    ASCII text, nearly every value, is done as bytes (the same deletions and
    ASCII lower-casing, about a third of the cost of ``str.translate``);
    other text keeps ``str.lower``'s Unicode rules. Strings of up to 64
    characters are remembered (4,096 of them): a thousand parallel calls
    check each value against every expected call.
    """
    if len(text) <= _SHORT:
        return _standardize_short(text)
    return _standardize(text)


def _std(value: Any) -> Any:
    return standardize_bfcl_string(value) if type(value) is str else value


def _std_sequence(option: Any) -> list[Any] | None:
    """A list (or, as BFCL iterates it, a string's characters) with its strings standardised."""
    if type(option) is list or type(option) is str:
        return [_std(item) for item in option]
    return None


def _hint(acceptable: Sequence[Any]) -> type | None:
    """The type of the first acceptable value that is not the optional marker ``""``.

    When it differs from the schema's type, the answer names a variable (say
    the string ``"x"`` for an integer parameter) and BFCL accepts a value of
    the answer's type, compared as it is.
    """
    for option in acceptable:
        if not (type(option) is str and option == ""):
            return type(option)
    return None


class _Acceptable:
    """One parameter's acceptable values, with what every comparison needs computed once."""

    __slots__ = ("_lists", "_strings", "hint", "optional", "values")

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        self.hint = _hint(values)
        self.optional = "" in values  # JSON values: only the empty string equals ""
        self._strings: frozenset[str] | None = None
        self._lists: list[list[Any]] | None = None

    @property
    def strings(self) -> frozenset[str]:
        if self._strings is None:
            self._strings = frozenset(_std(o) for o in self.values if type(o) is str)
        return self._strings

    @property
    def lists(self) -> list[list[Any]]:
        if self._lists is None:
            found = (_std_sequence(option) for option in self.values)
            self._lists = [option for option in found if option is not None]
        return self._lists


def _item_type_ok(item: Any, option: list[Any], inner: type) -> bool:
    if type(item) is inner:
        return True
    hint = _hint(option)
    return hint is not None and type(item) is hint


def _dict_matches(value: Mapping[str, Any], option: Mapping[str, Any]) -> bool:
    for key, item in value.items():
        if key not in option:
            return False
        candidates = _std_sequence(option[key])
        if candidates is None or _std(item) not in candidates:
            return False
    for key, accepted in option.items():
        if key not in value and not (
            (type(accepted) is list or type(accepted) is str) and "" in accepted
        ):
            return False
    return True


def _dict_ok(value: Mapping[str, Any], acceptable: Sequence[Any]) -> bool:
    return any(
        type(option) is dict and _dict_matches(value, option)
        for option in acceptable
        if not (type(option) is str and option == "")
    )


def _dict_list_ok(value: list[Any], acceptable: Sequence[Any]) -> bool:
    for option in acceptable:
        if (
            (type(option) is list or type(option) is str)
            and len(option) == len(value)
            and all(
                type(item) is dict and _dict_ok(item, [expected])
                for item, expected in zip(value, option, strict=True)
            )
        ):
            return True
    return False


# How a type-checked value is compared with the acceptable ones.
_EQUAL, _STRING, _LIST, _DICT, _DICT_LIST = range(5)

#: One given value's check: ``type_mismatch``, ``value_mismatch`` or ``None``.
_Rule = Callable[[Any], str | None]


def _string_rule(parameter: _Acceptable) -> _Rule:
    """The check of a string parameter whose answer is a literal (the commonest kind).

    A value spelled exactly as an acceptable one passes without being
    standardised (equal strings standardise equally); the acceptable values
    are standardised only when a value is not (most answer keys never are).
    """
    values = parameter.values
    try:
        verbatim = frozenset(values)  # a str value can only equal the str options
    except TypeError:  # an unhashable option (a list): keep the strings only
        verbatim = frozenset(option for option in values if type(option) is str)

    def rule(value: Any) -> str | None:
        if type(value) is not str:
            return "type_mismatch"
        if value in verbatim or standardize_bfcl_string(value) in parameter.strings:
            return None
        return "value_mismatch"

    return rule


def _scalar_rule(expected: type, values: list[Any], to_float: bool) -> _Rule:
    """The check of a number or boolean parameter whose answer is a literal."""

    def rule(value: Any) -> str | None:
        if to_float and type(value) is int:
            value = float(value)
        if type(value) is not expected:
            return "type_mismatch"
        return None if value in values else "value_mismatch"

    return rule


class _Parameter(_Acceptable):
    """One answer-key parameter, with its type rule and comparison chosen once.

    Attributes:
        types: BFCL's ``(type,)`` or ``(type, item type)``; ``None`` when the
            schema does not declare the parameter.
        required: Whether the schema requires it.
    """

    __slots__ = (
        "compare",
        "expected",
        "inner",
        "literal",
        "required",
        "to_float",
        "types",
        "variable",
    )

    def __init__(self, values: list[Any], types: tuple[str, ...] | None, required: bool) -> None:
        super().__init__(values)
        self.types = types
        self.required = required
        self.to_float, self.expected, self.inner, self.compare = _TYPE_RULES[types]
        # An answer of another type than the schema's names a variable: compared as it is.
        self.variable = self.hint is not None and self.hint is not self.expected
        # A literal string, number or boolean answer: one type test and one lookup.
        self.literal = not self.variable and self.compare in (_STRING, _EQUAL)

    def rule(self) -> _Rule:
        """:meth:`error`, or for a literal string, number or boolean the same check as a closure.

        Without a variable answer, a string, number or boolean parameter's
        check is one type test and one lookup (the second type branch of
        :meth:`error` can no longer be taken), so nothing is left to decide
        per value.
        """
        if self.literal:
            if self.compare == _STRING:
                return _string_rule(self)
            return _scalar_rule(self.expected, self.values, self.to_float)
        return self.error

    def error(self, value: Any) -> str | None:
        """``type_mismatch``, ``value_mismatch`` or ``None`` for one given value."""
        if self.to_float and type(value) is int:
            value = float(value)
        kind = type(value)  # compared as a name, so the checker keeps `value` as Any
        if kind is self.expected:
            variable = self.variable
            inner = self.inner
            if inner is not None and not any(
                type(option) is not list
                or all(_item_type_ok(item, option, inner) for item in value)
                for option in self.values
            ):
                return "type_mismatch"
        elif self.hint is not None and kind is self.hint:
            variable = True
        else:
            return "type_mismatch"
        compare = self.compare
        if variable or compare == _EQUAL:
            ok = value in self.values
        elif compare == _STRING:
            ok = _std(value) in self.strings
        elif compare == _LIST:
            ok = [_std(item) for item in value] in self.lists
        elif compare == _DICT:
            ok = _dict_ok(value, self.values)
        else:
            ok = _dict_list_ok(value, self.values)
        return None if ok else "value_mismatch"


_KEY_FIELDS: Final = frozenset({"acceptable", "bfcl_type", "required"})


def _key_error(name: str, param: str, problem: str) -> InputError:
    return InputError(f"answer key {name}.{param}{problem}")


def _type_rule(types: tuple[str, ...] | None) -> tuple[bool, type, type | None, int]:
    """``(int stands for float, expected type, item type, comparison)`` of a ``bfcl_type``."""
    bfcl_type = types[0] if types else "any"
    expected = _PY_TYPE[bfcl_type]
    inner = None
    if types is not None and len(types) > 1 and bfcl_type in ("array", "tuple"):
        inner = _PY_TYPE[types[1]]
    if expected is dict:
        compare = _DICT
    elif expected is list:
        compare = _DICT_LIST if inner is dict else _LIST
    else:
        compare = _STRING if expected is str else _EQUAL
    # Python would take an int where a float is asked.
    return bfcl_type == "float", expected, inner, compare


#: What every valid ``bfcl_type`` (and ``None``) implies, worked out once.
_TYPE_RULES: Final[dict[tuple[str, ...] | None, tuple[bool, type, type | None, int]]] = {
    types: _type_rule(types) for types in (*_VALID_TYPES, None)
}


def _parameter(name: str, param: str, key: object) -> _Parameter:
    # ``type(...) is dict`` first: the ABC check costs microseconds per parameter.
    if not (type(key) is dict or isinstance(key, Mapping)) or key.keys() != _KEY_FIELDS:
        raise _key_error(
            name,
            param,
            " must be {'acceptable': [...], 'bfcl_type': [...] or null, 'required': bool} "
            f"(as import-bfcl writes it), got {key!r}",
        )
    values, types, required = key["acceptable"], key["bfcl_type"], key["required"]
    if type(values) is not list:
        raise _key_error(name, param, ": 'acceptable' must be a list of acceptable values")
    if types is not None:
        try:
            types = tuple(types) if type(types) is list else None
            valid = types in _VALID_TYPES
        except TypeError:  # an unhashable type name
            valid = False
        if not valid:
            raise _key_error(
                name,
                param,
                ": 'bfcl_type' must be [type] or [type, item type] with BFCL's type names "
                f"({', '.join(_PY_TYPE)}), or null; got {key['bfcl_type']!r}",
            )
    if type(required) is not bool:
        raise _key_error(name, param, ": 'required' must be true or false")
    return _Parameter(values, types, required)


class _Expected:
    __slots__ = ("accepted", "name", "needed", "required", "rules")

    def __init__(self, call: object, index: int) -> None:
        if not is_tool_call(call):
            raise InputError(
                f"gold call {index} must be {{'name': str, 'arguments': {{...}}}}, got {call!r}"
            )
        self.name: str = call["name"]
        # The parameters a call may give (in the schema, typed, and in the answer), each
        # with its check; those the schema requires; and the answer parameters that may
        # not be left out ("" is not among their values).
        self.rules: dict[str, _Rule] = {}
        accepted: set[tuple[str, type, Any]] = set()
        required: list[str] = []
        needed: list[str] = []
        for param, key in call["arguments"].items():
            parameter = _parameter(self.name, param, key)
            if parameter.types is not None and parameter.values:
                self.rules[param] = parameter.rule()
                if parameter.literal:
                    # An unhashable option stops the update: its rule decides those values.
                    # (try/except, not contextlib.suppress: a context manager per parameter
                    # costs more than the update.)
                    try:  # noqa: SIM105
                        accepted.update(
                            zip(repeat(param), repeat(parameter.expected), parameter.values)
                        )
                    except TypeError:
                        pass
            if parameter.required:
                required.append(param)
            if not parameter.optional:
                needed.append(param)
        # ``(parameter, type, value)`` of every value a literal answer accepts as it is
        # spelled: such a value passes with one set lookup, without calling its rule. A
        # literal answer passes exactly the values of its own type equal to an option
        # (Python's equality, as the rule's ``in``), and equal values hash equally.
        self.accepted = frozenset(accepted)
        self.required = frozenset(required)
        self.needed = frozenset(needed)

    def mismatch(self, call: Mapping[str, Any]) -> str | None:
        """Why ``call`` does not match this expected call, or ``None`` when it does."""
        if call["name"] != self.name:
            return "wrong_name"
        arguments: Mapping[str, Any] = call["arguments"]
        given = arguments.keys()
        if not given >= self.required:
            return "missing_required"
        accepted = self.accepted
        rules = self.rules
        for param, value in arguments.items():
            kind = type(value)
            if kind is not list and kind is not dict and (param, kind, value) in accepted:
                continue
            rule = rules.get(param)
            if rule is None:  # not in the schema, or nothing acceptable in the answer
                return "unexpected_param"
            error = rule(value)
            if error is not None:
                return error
        if not given >= self.needed:
            return "missing_optional"
        return None


class BfclGold:
    """One BFCL question's answer key: its expected calls (none on ``irrelevance``).

    Built once per question and reused for every output scored against it
    (both arms, every re-score), so the acceptable values are standardised
    once.

    Args:
        gold_calls: The example's gold calls as ``import-bfcl`` writes them
            (see the module docstring).

    Attributes:
        expected: The expected calls, in the answer's order.
        irrelevance: Whether no call is the right answer.

    Raises:
        InputError: A gold call that is not such an answer key.
    """

    __slots__ = ("expected", "irrelevance")

    def __init__(self, gold_calls: Sequence[object]) -> None:
        self.expected: tuple[_Expected, ...] = tuple(
            _Expected(call, index) for index, call in enumerate(gold_calls)
        )
        self.irrelevance = not self.expected


@dataclass(frozen=True, slots=True)
class BfclVerdict:
    """One output judged by the AST rules.

    Attributes:
        passed: This mode's verdict.
        reason: Why it failed (one of :data:`BFCL_REASONS`), ``""`` when it passed.
        bfcl_passed: What BFCL's own checker concludes: the same, except that
            an undecodable output passes on ``irrelevance`` and a ``parallel``
            answer fails when BFCL's greedy pairing misses a complete pairing.
        passed_component: ``passed`` as a metric component, ``(0 or 1, 1)``.
        bfcl_passed_component: ``bfcl_passed`` as a metric component.
    """

    passed: bool
    reason: str
    bfcl_passed: bool
    # Built once per verdict (verdicts are shared), so that scoring reads an
    # example's components instead of computing them.
    passed_component: tuple[int, int] = field(init=False, repr=False, compare=False)
    bfcl_passed_component: tuple[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "passed_component", (int(self.passed), 1))
        object.__setattr__(self, "bfcl_passed_component", (int(self.bfcl_passed), 1))


# Verdicts are immutable, so each possible one is built once and shared.
_PASSED: Final = BfclVerdict(True, "", True)
_PASSED_UNLIKE_BFCL: Final = BfclVerdict(True, "", False)
_FAILED: Final = {reason: BfclVerdict(False, reason, False) for reason in BFCL_REASONS}
_UNDECODABLE: Final = {
    irrelevance: BfclVerdict(False, "undecodable", irrelevance) for irrelevance in (False, True)
}


class _Fits:
    """Whether expected call ``row`` accepts call ``column``; each pair is checked at most once.

    The answers live in one byte per pair (0 unknown, 1 fits, 2 does not):
    a thousand parallel calls need a megabyte, where a dict of pairs needed
    a hundred.
    """

    __slots__ = ("_calls", "_expected", "_known", "_size")

    def __init__(self, expected: Sequence[_Expected], calls: Sequence[Mapping[str, Any]]) -> None:
        self._expected = expected
        self._calls = calls
        self._size = len(calls)
        self._known = bytearray(self._size * len(expected))

    def __call__(self, row: int, column: int) -> bool:
        index = row * self._size + column
        state = self._known[index]
        if not state:
            fits = self._expected[row].mismatch(self._calls[column]) is None
            state = self._known[index] = 1 if fits else 2
        return state == 1

    def columns(self, row: int) -> list[int]:
        """Every column that ``row`` accepts, in order (``__call__`` inlined: the hot loop)."""
        known = self._known
        base = row * self._size
        mismatch = self._expected[row].mismatch
        found: list[int] = []
        for column, call in enumerate(self._calls):
            state = known[base + column]
            if not state:
                state = known[base + column] = 1 if mismatch(call) is None else 2
            if state == 1:
                found.append(column)
        return found


#: No column (of a row), no row (of a column), no distance yet.
_UNSET: Final = -1


def _complete_pairing(fits: _Fits, column_of: list[int], row_of: list[int]) -> bool:
    """Whether the pairing ``column_of`` (row to column, ``-1`` for none) can be made complete.

    Hopcroft and Karp's algorithm, without recursion: each phase finds, by a
    breadth-first search from every row without a column, the length of the
    shortest augmenting paths (alternating between a column a row accepts and
    that column's current row, ending at a free column), then walks as many
    disjoint such paths as it can with an explicit stack and switches every
    row on them to its next column. O(E sqrt(V)) pair look-ups at most (the
    recursive augmenting-path search it replaces was cubic, and a thousand
    calls overflowed Python's stack), and a row's pairs are checked only when
    the search reaches that row. ``row_of`` is the inverse of ``column_of``;
    both are updated in place.
    """
    size = len(column_of)
    adjacent: list[list[int] | None] = [None] * size

    def columns(row: int) -> list[int]:
        found = adjacent[row]
        if found is None:
            found = adjacent[row] = fits.columns(row)
        return found

    while True:
        free_rows = [row for row in range(size) if column_of[row] == _UNSET]
        if not free_rows:
            return True
        # Breadth first: each row's distance from a free row along alternating paths.
        distance = [_UNSET] * size
        for row in free_rows:
            if not columns(row):
                return False  # a row no call fits can never be paired
            distance[row] = 0
        shortest = size  # the distance of the rows next to a free column
        queue = deque(free_rows)
        while queue:
            row = queue.popleft()
            if distance[row] > shortest:
                break  # every shorter path has been found
            for column in columns(row):
                owner = row_of[column]
                if owner == _UNSET:
                    shortest = distance[row]
                elif distance[owner] == _UNSET:
                    distance[owner] = distance[row] + 1
                    queue.append(owner)
        if shortest == size:
            return False  # no free column can be reached: no complete pairing
        # Depth first along the layers, one explicit stack per free row.
        next_edge = [0] * size
        for root in free_rows:
            rows = [root]
            taken: list[int] = []
            while rows:
                row = rows[-1]
                edges = columns(row)
                while next_edge[row] < len(edges):
                    column = edges[next_edge[row]]
                    next_edge[row] += 1
                    owner = row_of[column]
                    if owner == _UNSET:  # a free column: switch every row on the path
                        for on_path, new_column in zip(rows, [*taken, column], strict=True):
                            column_of[on_path] = new_column
                            row_of[new_column] = on_path
                        rows = []
                        break
                    if distance[owner] == distance[row] + 1 and distance[row] < shortest:
                        taken.append(column)
                        rows.append(owner)
                        break
                else:  # a dead end for this phase
                    distance[row] = size + 1
                    rows.pop()
                    if taken:
                        taken.pop()


def _parallel(calls: Sequence[Mapping[str, Any]], expected: Sequence[_Expected]) -> BfclVerdict:
    size = len(calls)  # == len(expected)
    fits = _Fits(expected, calls)
    column_of = [_UNSET] * size
    row_of = [_UNSET] * size
    # BFCL's greedy pass: each expected call takes the first unused call that fits it.
    # When it pairs everything, BFCL passes the answer and a complete pairing exists.
    free = list(range(size))
    stuck = _UNSET
    for row in range(size):
        for column in free:
            if fits(row, column):
                free.remove(column)
                column_of[row], row_of[column] = column, row
                break
        else:
            if stuck == _UNSET:
                stuck = row
                if row == 0:  # it tried every call for the first expected one: none fits
                    return _FAILED["no_assignment"]
    if stuck == _UNSET:
        return _PASSED
    # BFCL stops at the first expected call left without a partner (the greedy
    # pass above went on, to give the search below fewer rows to place); a
    # complete pairing may still exist.
    if _complete_pairing(fits, column_of, row_of):
        return _PASSED_UNLIKE_BFCL
    return _FAILED["no_assignment"]


_CALLED_ON_IRRELEVANCE: Final = _FAILED["called_on_irrelevance"]
_WRONG_COUNT: Final = _FAILED["wrong_count"]


def check_bfcl(calls: Sequence[Mapping[str, Any]] | None, gold: BfclGold) -> BfclVerdict:
    """Judge one output by BFCL's AST rules (see the module docstring).

    Args:
        calls: The decoded calls (``{"name": str, "arguments": dict}``, possibly
            none), or ``None`` when the output failed to decode.
        gold: The question's answer key.

    Returns:
        The verdict, with BFCL's own conclusion beside it.
    """
    if calls is None:
        return _UNDECODABLE[gold.irrelevance]
    expected = gold.expected
    if not expected:
        return _CALLED_ON_IRRELEVANCE if calls else _PASSED
    if len(calls) != len(expected):
        return _WRONG_COUNT
    if len(calls) > 1:
        return _parallel(calls, expected)
    reason = expected[0].mismatch(calls[0])
    return _PASSED if reason is None else _FAILED[reason]
