"""The execution loop: BFCL's multi-turn questions played against their environments.

A multi-turn question (``TestExample.multi_turn``, written by ``import-bfcl
--category multi_turn_*``) is not one prompt with one answer. For each user
turn the model generates; the run's ``--output-format`` decodes the calls it
made; each call runs against the question's own instances of BFCL's classes
(one :class:`~sommelier_mlflow.toolcalls.BfclSandbox` for the run, one
environment per question); the results go back as ``tool`` messages and the
model goes on, until it answers without a call, then the next user turn
follows. Like BFCL's own runner:

- an output that makes no call, or fails to decode, ends the turn (BFCL
  "proceeds to the next turn" on both);
- a turn where the model made calls in more than ``BFCL_STEP_LIMIT`` steps is
  a forced quit: the conversation ends there and its trajectory stops with
  that turn (the checker fails the turns it never reached);
- at a turn listed in ``added_tools`` (``miss_func``) the held-back tools join
  the offered ones and the user message is ``BFCL_ADDED_TOOLS_PROMPT``.

Each step's prompt is the conversation so far (user turns, assistant turns
with their decoded ``tool_calls``, ``tool`` results) rendered by the split's
prompt format exactly as a conversation row is (``docs/conversations.md``),
with the tools offered at that point. A step whose prompt no longer fits the
model's context ends its conversation (``"end": "context"`` in the journal)
instead of stopping the run: its trajectory stops there, like a forced quit.

Steps are batched across conversations: every round, each conversation still
running takes one step, and the round's prompts go through the backend in the
runner's batches (``batch_size``, similar lengths together), one batched
``generate`` when they fit in one; the server backend then sends them
concurrently. Greedy decoding of a batch depends on its composition, so the
rounds are a pure function of the questions and the outputs: a resumed run
meets the very same batches.

Every round is appended to ``multi_turn_journal.jsonl`` (each step's prompt
digest, raw output, decoded calls, results and how the step ended) and made
durable before the next round. A run restarted after ``kill -9`` replays the
journal: it renders each step's prompt again, decodes each journaled output
again and re-executes its calls in fresh environments; the line it would
write must equal the stored line byte for byte (a different result means the
environment is not deterministic, and the run refuses), a round cut short by
the kill is dropped and generated again,
and the files end byte-identical to an uninterrupted run's.

Each generated batch's seconds go to ``generation_timing.jsonl`` with its
round (``_timing.py``), before the round is journaled, as the runner times its
batches before writing their records: a question's trace lasts its shares of
all its steps. A replayed round generates nothing and times nothing; a round
cut short is timed again when it is generated again, and that time counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any, Final

from sommelier_mlflow._json import (
    JSONDecodeError,
    atomic_write_bytes,
    dumps_line,
    loads,
    naming_path,
    sha256_text,
)
from sommelier_mlflow._progress import progress_bar
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    ModelKind,
    TestExample,
    is_multi_turn,
    schema_version,
)
from sommelier_mlflow.errors import (
    ConfigError,
    DataError,
    DependencyError,
    InvariantViolationError,
)
from sommelier_mlflow.generation._batching import (
    Prompted,
    batch_plan,
    generate_batch,
    make_record,
    skip_batch,
    valid_text,
)
from sommelier_mlflow.generation._context import check_context
from sommelier_mlflow.generation._protocol import Completion, TextGenerator
from sommelier_mlflow.generation._timing import TimingLog
from sommelier_mlflow.toolcalls import (
    BFCL_ADDED_TOOLS_PROMPT,
    BFCL_INSTALL_COMMAND,
    BFCL_MODE,
    BFCL_STEP_LIMIT,
    BfclSandbox,
    output_format,
    scoring_mode,
)

__all__ = [
    "MULTI_TURN_LOOP",
    "MULTI_TURN_JOURNAL_NAME",
    "MULTI_TURN_JOURNAL_SCHEMA",
    "TRAJECTORIES_NAME",
    "MultiTurnLoop",
    "execution_identity",
    "loop_decoding",
    "transcript",
    "trajectory_line",
    "run_conversations",
    "multi_turn_record",
    "write_trajectories",
]

#: The loop's name in ``decoding.execution``.
MULTI_TURN_LOOP: Final = "bfcl_multi_turn"
#: Every step of every conversation, appended round by round (resume and audit).
MULTI_TURN_JOURNAL_NAME: Final = "multi_turn_journal.jsonl"
MULTI_TURN_JOURNAL_SCHEMA: Final = schema_version("multi_turn_step")
#: ``{"example_id", "turns"}`` per question: what ``score --precomputed`` reads back.
TRAJECTORIES_NAME: Final = "trajectories.jsonl"
_FRESH_DIR: Final = "use a fresh output directory (or delete the existing one) to start over"

#: Renders step examples (``messages`` = the conversation so far) into formatted ones.
Render = Callable[[Sequence[TestExample]], Sequence[TestExample]]


def _bfcl_version() -> str:
    try:
        return version("bfcl-eval")
    except PackageNotFoundError as exc:
        raise DependencyError(
            "multi-turn questions run against BFCL's classes from the bfcl-eval package, which "
            f"is not installed; install it with: {BFCL_INSTALL_COMMAND}"
        ) from exc


def execution_identity(output_format_name: str) -> dict[str, Any]:
    """What the loop adds to the decoding (``decoding.execution``), which the gate compares.

    Raises:
        DependencyError: bfcl-eval is not installed (exit 3).
    """
    return {
        "loop": MULTI_TURN_LOOP,
        "step_limit": BFCL_STEP_LIMIT,
        "output_format": output_format_name,
        "bfcl_eval": _bfcl_version(),
    }


@dataclass(frozen=True)
class MultiTurnLoop:
    """How the loop renders each step's prompt and reads each step's calls.

    Attributes:
        render: Formats step examples (the pipeline passes the arm's prompt
            format, system prompt, template variables and template day, so a
            later step is rendered exactly as the first was).
        output_format: The ``--output-format`` decoding every step's calls.
        trajectories: Outputs made elsewhere (``score --precomputed`` with
            trajectory rows), by ``example_id``: the records are built from
            these step texts, and nothing is generated or executed.
    """

    render: Render
    output_format: str = "json"
    trajectories: Mapping[str, Sequence[Sequence[str]]] | None = None


def transcript(turns: Sequence[Sequence[str]]) -> str:
    """A multi-turn record's ``raw_text``: every step's text, in order, one per line."""
    return "\n".join(text for turn in turns for text in turn)


def trajectory_line(record: GenerationRecord) -> bytes:
    """One ``trajectories.jsonl`` line, ``{"example_id", "turns"}``, of a multi-turn record."""
    turns = [list(turn) for turn in record.turns or ()]
    return dumps_line({"example_id": record.example_id, "turns": turns})


@dataclass
class _Conversation:
    """One question being played: what was said, what is offered, where it stands."""

    item: Prompted
    spec: Mapping[str, Any]
    tools: list[Any]
    history: list[dict[str, Any]]
    turns: list[list[str]] = field(default_factory=lambda: [[]])
    turn: int = 0
    #: Steps of the current turn that made calls.
    calling_steps: int = 0
    #: Why the conversation stopped, ``None`` while it runs.
    ended: str | None = None
    #: The digest of the prompt its next step answers (journaled with the step).
    prompt_sha256: str = ""

    @property
    def example_id(self) -> str:
        return self.item.example.example_id

    def step_example(self) -> TestExample:
        """The conversation so far as an unformatted conversation row, for the renderer."""
        return replace(
            self.item.example,
            query="",
            messages=tuple(self.history),
            tools=list(self.tools),
            prompt_text=None,
            prompt_sha256=None,
            multi_turn=None,
        )

    def begin_turn(self, index: int) -> None:
        """Open user turn ``index``: its messages, or BFCL's message where tools arrive."""
        added = self.spec["added_tools"].get(str(index))
        messages = list(self.spec["user_turns"][index])
        if added is not None:
            self.tools.extend(added)
            messages = [{"role": "user", "content": BFCL_ADDED_TOOLS_PROMPT}]
        self.history.extend(messages)


def _start(item: Prompted) -> _Conversation:
    spec = item.example.multi_turn
    assert spec is not None  # the runner hands over multi-turn questions only
    return _Conversation(item, spec, list(item.example.tools), list(item.example.messages or ()))


def _decoded_calls(text: str, tools: Sequence[Any], decoder_name: str) -> list[dict[str, Any]]:
    """The calls one step made, read by the run's output format; none when it failed to decode."""
    parsed = scoring_mode(BFCL_MODE).parse(text, output_format(decoder_name), tools)
    calls = getattr(parsed, "calls", None)
    if parsed.status != "ok" or not calls:
        return []
    return [{"name": call["name"], "arguments": call["arguments"]} for call in calls]


def _take_step(
    conversation: _Conversation,
    text: str,
    sandbox: BfclSandbox,
    loop: MultiTurnLoop,
    round_number: int,
) -> dict[str, Any]:
    """Apply one generated step to ``conversation``; its journal entry."""
    turn, step = conversation.turn, len(conversation.turns[-1])
    conversation.turns[-1].append(text)
    calls = _decoded_calls(text, conversation.tools, loop.output_format)
    results: list[str] = []
    end: str | None = None
    if calls:
        results = list(sandbox.execute(conversation.example_id, calls))
        if len(results) != len(calls) or not all(isinstance(r, str) for r in results):
            raise InvariantViolationError(
                f"the BFCL sandbox answered {len(results)} results for {len(calls)} calls of "
                f"{conversation.example_id!r}; it must return one string per call"
            )
        conversation.history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"type": "function", "function": call} for call in calls],
            }
        )
        conversation.history.extend(
            {"role": "tool", "name": call["name"], "content": result}
            for call, result in zip(calls, results, strict=True)
        )
        conversation.calling_steps += 1
        if conversation.calling_steps > BFCL_STEP_LIMIT:
            end = conversation.ended = "step_limit"
    else:
        end = "turn"
        conversation.history.append({"role": "assistant", "content": text})
        conversation.turn += 1
        conversation.calling_steps = 0
        if conversation.turn == len(conversation.spec["user_turns"]):
            conversation.ended = "done"
        else:
            conversation.turns.append([])
            conversation.begin_turn(conversation.turn)
    return _entry(round_number, conversation, turn, step, text, calls, results, end)


def _entry(
    round_number: int,
    conversation: _Conversation,
    turn: int,
    step: int,
    text: str | None,
    calls: list[dict[str, Any]],
    results: list[str],
    end: str | None,
) -> dict[str, Any]:
    return {
        "schema_version": MULTI_TURN_JOURNAL_SCHEMA,
        "round": round_number,
        "example_id": conversation.example_id,
        "turn": turn,
        "step": step,
        "prompt_sha256": conversation.prompt_sha256,
        "raw_text": text,
        "calls": calls,
        "results": results,
        "end": end,
    }


@dataclass(frozen=True)
class _StoredRound:
    """One round of an earlier run's journal: where it starts, its lines by example."""

    start: int
    lines: dict[str, tuple[dict[str, Any], bytes]]


def _read_journal(path: Path) -> list[_StoredRound]:
    """The rounds an earlier run journaled; a torn last line (a killed write) is left out.

    Raises:
        DataError: A complete line that is not a journal entry of this schema.
    """
    if not path.is_file():
        return []
    with naming_path(path):
        data = path.read_bytes()
    rounds: list[_StoredRound] = []
    offset = 0
    for number, chunk in enumerate(data.split(b"\n")[:-1], start=1):
        line = chunk + b"\n"
        try:
            entry = loads(line)
        except JSONDecodeError as exc:
            raise DataError(
                f"not a JSON line ({exc}); {_FRESH_DIR}", path=str(path), line=number
            ) from exc
        if not isinstance(entry, dict) or entry.get("schema_version") != MULTI_TURN_JOURNAL_SCHEMA:
            raise DataError(
                f"not a {MULTI_TURN_JOURNAL_SCHEMA} entry; {_FRESH_DIR}",
                path=str(path),
                line=number,
            )
        number_of_round = entry.get("round")
        if not rounds or number_of_round != len(rounds) - 1:
            if number_of_round != len(rounds):
                raise DataError(
                    f"round {number_of_round!r} out of order; {_FRESH_DIR}",
                    path=str(path),
                    line=number,
                )
            rounds.append(_StoredRound(offset, {}))
        rounds[-1].lines[str(entry.get("example_id"))] = (entry, line)
        offset += len(line)
    return rounds


class _Journal:
    """The journal file: replays the stored rounds, then appends new ones durably."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stored = _read_journal(path)
        self._handle: IO[bytes] | None = None

    def replayed(self, round_number: int, ids: Sequence[str]) -> _StoredRound | None:
        """The stored round ``round_number`` if it holds every conversation's step, else ``None``.

        A round cut short by a kill is the last one: it is cut off the file
        (durably) and generated again.
        """
        if round_number >= len(self.stored):
            return None
        stored = self.stored[round_number]
        if set(stored.lines) - set(ids):
            raise ConfigError(
                f"{self.path}: round {round_number} names conversations that are not running "
                f"then in this run; the journal belongs to another run; {_FRESH_DIR}"
            )
        if len(stored.lines) == len(ids):
            return stored
        if round_number != len(self.stored) - 1:
            raise DataError(
                f"round {round_number} lacks steps of running conversations; {_FRESH_DIR}",
                path=str(self.path),
            )
        self.stored = self.stored[:round_number]
        self._cut(stored.start)
        return None

    def _cut(self, end: int) -> None:
        with naming_path(self.path), self.path.open("r+b") as handle:
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())

    def append(self, entries: Sequence[dict[str, Any]]) -> None:
        """Write one round and make it durable before the next round starts."""
        with naming_path(self.path):
            if self._handle is None:
                size = sum(len(line) for r in self.stored for _, line in r.lines.values())
                if self.path.is_file() and self.path.stat().st_size != size:
                    self._cut(size)  # a torn last line
                self._handle = self.path.open("ab")
            self._handle.write(b"".join(dumps_line(entry) for entry in entries))
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def finish(self) -> None:
        """Close the file; stored rounds left unreplayed mean it is another run's journal."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with naming_path(self.path):
                handle.close()

    def check_exhausted(self, rounds: int) -> None:
        if len(self.stored) > rounds:
            raise ConfigError(
                f"{self.path} holds {len(self.stored)} rounds but this run ends after {rounds}; "
                f"the journal belongs to another run; {_FRESH_DIR}"
            )


def _replay_step(
    conversation: _Conversation,
    stored: tuple[dict[str, Any], bytes],
    sandbox: BfclSandbox,
    loop: MultiTurnLoop,
    round_number: int,
) -> None:
    """Re-apply one journaled step; it must produce exactly the stored entry."""
    entry, line = stored
    text = entry.get("raw_text")
    if not isinstance(text, str):
        raise DataError(
            f"journaled step of {conversation.example_id!r} in round {round_number} has no "
            f"raw_text; {_FRESH_DIR}"
        )
    again = _take_step(conversation, text, sandbox, loop, round_number)
    if dumps_line(again) == line:
        return
    if again["calls"] == entry.get("calls") and again["results"] != entry.get("results"):
        raise InvariantViolationError(
            f"replaying the journal, the calls of {conversation.example_id!r} (turn "
            f"{again['turn']}, step {again['step']}) returned other results than when they "
            "first ran: the environment is not deterministic, so the run cannot resume; "
            f"{_FRESH_DIR}"
        )
    raise InvariantViolationError(
        f"the journaled step of {conversation.example_id!r} (turn {again['turn']}, step "
        f"{again['step']}) is not what this run makes of it (its prompt, its decoding or its "
        f"results differ); {_FRESH_DIR}"
    )


def _prompts(
    running: Sequence[_Conversation], loop: MultiTurnLoop, first_round: bool
) -> list[Prompted]:
    """Each running conversation's prompt for this round, rendered in one call."""
    if first_round:  # the split's own prompt, already rendered and digested
        return [conversation.item for conversation in running]
    rendered = list(loop.render([conversation.step_example() for conversation in running]))
    out = []
    for conversation, example in zip(running, rendered, strict=True):
        if example.prompt_text is None:
            raise InvariantViolationError(
                f"the step renderer returned no prompt for {conversation.example_id!r}"
            )
        out.append(Prompted(example, example.prompt_text, sha256_text(example.prompt_text)))
    return out


def _generate_round(
    round_number: int,
    prompted: Sequence[Prompted],
    generator: TextGenerator,
    decoding: Decoding,
    on_batch: Callable[[Sequence[Completion], float], None] | None,
    timing: TimingLog,
) -> list[str]:
    """One step of every fitting conversation, in the runner's batches; texts in order.

    Each batch's seconds go to ``timing`` under ``round_number``, naming the
    conversations whose steps it generated.
    """
    texts: list[str] = [""] * len(prompted)
    for batch in batch_plan(prompted, generator, decoding.batch_size):
        started = time.perf_counter()
        completions = generate_batch(
            generator, [prompted[i] for i in batch], decoding.max_new_tokens
        )
        seconds = time.perf_counter() - started
        if on_batch is not None:
            on_batch(completions, seconds)
        ids = [prompted[i].example.example_id for i in batch]
        timing.append(ids, seconds, round_number=round_number)
        for position, index in enumerate(batch):
            texts[index] = valid_text(completions[position].text)
    return texts


def _play_round(
    round_number: int,
    running: list[_Conversation],
    generator: TextGenerator,
    decoding: Decoding,
    loop: MultiTurnLoop,
    sandbox: BfclSandbox,
    journal: _Journal,
    on_batch: Callable[[Sequence[Completion], float], None] | None,
    timing: TimingLog,
) -> None:
    """Every running conversation takes one step (or ends, past the context)."""
    prompted = _prompts(running, loop, round_number == 0)
    for conversation, item in zip(running, prompted, strict=True):
        conversation.prompt_sha256 = item.prompt_sha256
    overlong = {
        example_id
        for example_id, _ in check_context(
            [item.example for item in prompted], generator, decoding.max_new_tokens
        ).overlong
    }
    stored = journal.replayed(round_number, [c.example_id for c in running])
    fitting = [i for i, c in enumerate(running) if c.example_id not in overlong]
    fitting_items = [prompted[i] for i in fitting]
    if stored is not None:  # the batches generating would have run go through a stateful backend
        for batch in batch_plan(fitting_items, generator, decoding.batch_size):
            skip_batch(generator, [fitting_items[i] for i in batch])
        for conversation in running:
            step = stored.lines[conversation.example_id]
            if conversation.example_id in overlong:
                _end_past_context(conversation, round_number, step[1])
            else:
                _replay_step(conversation, step, sandbox, loop, round_number)
        return
    texts = _generate_round(round_number, fitting_items, generator, decoding, on_batch, timing)
    by_index = dict(zip(fitting, texts, strict=True))
    entries = []
    for index, conversation in enumerate(running):
        if index in by_index:
            entries.append(_take_step(conversation, by_index[index], sandbox, loop, round_number))
        else:
            entries.append(_end_past_context(conversation, round_number, None))
    journal.append(entries)


def _end_past_context(
    conversation: _Conversation, round_number: int, stored: bytes | None
) -> dict[str, Any]:
    """End a conversation whose next prompt does not fit; its journal entry."""
    step = len(conversation.turns[-1])
    entry = _entry(round_number, conversation, conversation.turn, step, None, [], [], "context")
    conversation.ended = "context"
    if stored is not None and dumps_line(entry) != stored:
        raise InvariantViolationError(
            f"the journal says {conversation.example_id!r} went on in round {round_number}, "
            f"but its prompt no longer fits the model's context; {_FRESH_DIR}"
        )
    return entry


def run_conversations(
    items: Sequence[Prompted],
    generator: TextGenerator,
    *,
    decoding: Decoding,
    model_kind: ModelKind,
    loop: MultiTurnLoop,
    out_dir: Path,
    progress: bool,
    on_batch: Callable[[Sequence[Completion], float], None] | None = None,
) -> dict[str, GenerationRecord]:
    """Play every multi-turn question to its end; their records, by ``example_id``.

    Resumes from ``out_dir``'s journal (module docstring); ``run_generation``
    calls it for the split's multi-turn rows and writes the records with the
    others. ``trajectories.jsonl`` (split order) is written here, atomically;
    each generated batch's seconds are appended to ``generation_timing.jsonl``
    with its round.

    Raises:
        DependencyError: bfcl-eval is not installed (exit 3).
        ConfigError: The journal belongs to another run.
        DataError: A malformed journal line.
        InvariantViolationError: Replaying the journal gives other results
            (the environment is not deterministic).
    """
    journal = _Journal(out_dir / MULTI_TURN_JOURNAL_NAME)
    timing = TimingLog(out_dir)
    conversations = [_start(item) for item in items]
    rounds = 0
    try:
        with (
            BfclSandbox() as sandbox,
            progress_bar(
                len(conversations), f"play {model_kind}", enabled=progress, unit="conv"
            ) as bar,
        ):
            for conversation in conversations:
                sandbox.open(conversation.example_id, conversation.spec["environment"])
            running = list(conversations)
            steps = 0
            while running:
                _play_round(
                    rounds, running, generator, decoding, loop, sandbox, journal, on_batch, timing
                )
                rounds += 1
                steps += len(running)
                still = [c for c in running if c.ended is None]
                for conversation in running:
                    if conversation.ended is not None:
                        sandbox.discard(conversation.example_id)
                bar.update(len(running) - len(still))
                bar.set_postfix(steps=steps, running=len(still))
                running = still
        journal.check_exhausted(rounds)
    finally:
        timing.close()
        journal.finish()
    records = {
        c.example_id: multi_turn_record(c.item, c.turns, model_kind, decoding)
        for c in conversations
    }
    write_trajectories(out_dir, [records[item.example.example_id] for item in items])
    return records


def multi_turn_record(
    item: Prompted, turns: Sequence[Sequence[str]], model_kind: ModelKind, decoding: Decoding
) -> GenerationRecord:
    """The record of one played question: one list of step texts per user turn it reached.

    A conversation that ended early (a forced quit at the step limit, a prompt
    past the context) has fewer turns than its question, as BFCL's own result
    files have: the checker fails the turns it never reached. The journal says
    why it ended.
    """
    kept = tuple(tuple(valid_text(text) for text in turn) for turn in turns)
    return make_record(item, transcript(kept), model_kind, decoding, kept)


def write_trajectories(out_dir: Path, records: Sequence[GenerationRecord]) -> Path:
    """Write ``trajectories.jsonl`` (one line per multi-turn record, in the order given)."""
    path = out_dir / TRAJECTORIES_NAME
    atomic_write_bytes(path, b"".join(trajectory_line(record) for record in records))
    return path


def loop_decoding(
    decoding: Decoding, examples: Sequence[TestExample], output_format_name: str
) -> Decoding:
    """``decoding`` with the loop's identity when ``examples`` hold a multi-turn question.

    A split without one keeps its decoding (and its records their bytes).

    Raises:
        DependencyError: A multi-turn question, and bfcl-eval is not installed (exit 3).
    """
    if not any(is_multi_turn(example) for example in examples):
        return decoding
    return replace(decoding, execution=execution_identity(output_format_name))
