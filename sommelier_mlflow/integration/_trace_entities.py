r"""One example's trace as MLflow entities, built without a request: spans, info, assessments.

:mod:`sommelier_mlflow.integration._traces` decides which examples get a trace
and sends what this module builds, in bulk. Here a trace is only data: the
root ``LLM`` span (request and raw output), one ``TOOL`` span per decoded call,
the expectations and feedback, and the trace info that carries them. Every
text is redacted before it is put anywhere, then escaped where no store could
hold it (:func:`~sommelier_mlflow.integration._store_text.store_value`: NUL and
lone surrogates as ``\uXXXX``), and capped at :data:`TRACE_TEXT_LIMIT` characters.

MLflow is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from sommelier_mlflow._redact import redact_value
from sommelier_mlflow.integration._store_text import store_value

__all__ = [
    "TRACE_TEXT_LIMIT",
    "ExampleTrace",
    "trace_ids",
    "PreparedTrace",
    "prepare_trace",
]

#: The most characters of one text (request, output) a trace carries. A
#: degenerate generation runs to ``max_new_tokens``; the full text stays in the
#: run's generations artifact, the trace shows its start and its length.
TRACE_TEXT_LIMIT: Final = 20_000
#: Trace metadata and assessment metadata naming the run that scored them.
_SOURCE_RUN: Final = "mlflow.sourceRun"
_ASSESSMENT_SOURCE_RUN: Final = "mlflow.assessment.sourceRunId"
#: What the UI lists a trace by (its request and response previews) and a
#: ``TOOL`` span's name are shorter.
_PREVIEW_CHARS: Final = 1000
_SPAN_NAME_CHARS: Final = 250


@dataclass(frozen=True)
class ExampleTrace:
    """What one example's trace shows: request, response, expectation and feedback.

    Attributes:
        example_id: The test example; it also names the trace.
        language: Its language slice.
        query: The user request (the trace's input).
        raw_output: The completion exactly as produced (the trace's output).
        parse_status: The parser's status for ``raw_output``.
        expected_call: The gold call (an expectation).
        components: Per metric, the example's exact ``(numerator, denominator)``.
        model_kind: ``base`` or ``adapter``.
        parsed_call: The call decoded in ``single`` scoring (``None`` otherwise).
        decoded_calls: Every call decoded from the output, in output order:
            one ``TOOL`` span each.
        gold_calls: The gold calls, logged also as MLflow's ``expected_tool_calls``.
        seconds: The example's share of its batch's generation time (the
            batch's seconds over its prompts): the trace's duration. ``0.0``
            when unknown (generations made elsewhere).
    """

    example_id: str
    language: str
    query: str
    raw_output: str
    parse_status: str
    expected_call: Mapping[str, Any]
    components: Mapping[str, tuple[int, int]]
    model_kind: str
    parsed_call: Mapping[str, Any] | None = field(default=None)
    decoded_calls: tuple[Mapping[str, Any], ...] = ()
    gold_calls: tuple[Mapping[str, Any], ...] = ()
    seconds: float = 0.0


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call in MLflow's shape for ``expected_tool_calls``: ``{name, arguments}``."""
    return {"name": call.get("name"), "arguments": call.get("arguments")}


class _TraceIds(NamedTuple):
    """An example's ids in one run, all derived from one digest (see :func:`trace_ids`)."""

    trace_id: str
    otel_trace: str
    span_id: str


def trace_ids(run_id: str, example_id: str) -> _TraceIds:
    """MLflow trace id, OTel trace id and root span id (base64), all from one digest."""
    # surrogatepass: an id no store can hold still names exactly one trace.
    key = f"{run_id}\x00{example_id}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(key).digest()
    trace_id = "tr-" + digest[:16].hex()
    otel_trace = base64.b64encode(digest[:16]).decode("ascii")
    span = base64.b64encode(digest[16:24]).decode("ascii")
    return _TraceIds(trace_id, otel_trace, span)


def _span(
    otel_trace: str,
    span_id: str,
    parent: str | None,
    name: str,
    start_ns: int,
    attributes: Mapping[str, str],
    end_ns: int | None = None,
) -> Any:
    """A span that succeeded, from ``start_ns`` to ``end_ns`` (default: it took no time)."""
    from mlflow.entities.span import Span

    return Span.from_dict(
        {
            "trace_id": otel_trace,
            "span_id": span_id,
            "parent_span_id": parent,
            "name": name,
            "start_time_unix_nano": start_ns,
            "end_time_unix_nano": start_ns if end_ns is None else end_ns,
            "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""},
            "attributes": dict(attributes),
            "links": [],
        }
    )


def _tool_span(
    call: Mapping[str, Any],
    index: int,
    ids: _TraceIds,
    seed: bytes,
    start_ns: int,
    common: Mapping[str, str],
) -> Any:
    """One ``TOOL`` span per decoded call: the tool's name, its arguments as inputs.

    MLflow's ``ToolCallCorrectness`` reads a trace's calls from exactly these
    spans (name from the span name, arguments from its inputs, order from the
    start times, which follow the output's order).
    """
    span_id = hashlib.sha256(seed + index.to_bytes(4, "big")).digest()[:8]
    arguments = call.get("arguments")
    text = json.dumps(arguments, ensure_ascii=False)
    # Inputs stay a JSON object (never a bare string MLflow would decode again),
    # and as long as any other text a trace carries.
    if isinstance(arguments, dict) and len(text) <= TRACE_TEXT_LIMIT:
        inputs: Any = arguments
    else:
        inputs = {"arguments": text[:TRACE_TEXT_LIMIT], "characters": len(text)}
    attributes = {
        **common,
        "mlflow.spanType": json.dumps("TOOL"),
        "mlflow.spanInputs": json.dumps(inputs, ensure_ascii=False),
    }
    return _span(
        ids.otel_trace,
        base64.b64encode(span_id).decode("ascii"),
        ids.span_id,
        str(call.get("name"))[:_SPAN_NAME_CHARS],
        start_ns + index + 1,
        attributes,
    )


def _feedback_value(numerator: int, denominator: int) -> bool | float | None:
    """A component as the UI shows it: pass/fail for 0/1 outcomes, else the ratio.

    ``0/0`` (no argument pairs on either side) has no value; the exact
    numerator and denominator are in the assessment's metadata either way.
    """
    if denominator == 1 and numerator in (0, 1):
        return numerator == 1
    if denominator == 0:
        return None
    return numerator / denominator


def _capped(text: str) -> tuple[str, int]:
    """``text`` cut to :data:`TRACE_TEXT_LIMIT` characters, and its full length."""
    return text[:TRACE_TEXT_LIMIT], len(text)


def _length_note(shown: str, characters: int) -> str | None:
    """Say when a trace shows only the start of a text, and where the rest is."""
    if characters == len(shown):
        return None
    return (
        f"first {len(shown):,} of {characters:,} characters; "
        "the full text is in the run's sommelier/generations artifact"
    )


@dataclass(frozen=True)
class _Texts:
    """What a trace may carry of an example: every text redacted and store-safe, some capped.

    Attributes:
        example_id: The example id, as the trace shows it.
        language: The language, as the trace shows it.
        query: The request, redacted and cut to :data:`TRACE_TEXT_LIMIT`.
        query_chars: The redacted request's full length.
        output: The raw output, redacted and cut to :data:`TRACE_TEXT_LIMIT`.
        output_chars: The redacted output's full length.
        expected: The gold call (or ``{"calls": [...]}``), redacted.
        expected_tool_calls: The gold calls in MLflow's ``{name, arguments}`` shape.
        decoded: The decoded calls, redacted: one ``TOOL`` span each.
    """

    example_id: str
    language: str
    query: str
    query_chars: int
    output: str
    output_chars: int
    expected: Any
    expected_tool_calls: Any
    decoded: list[Any]

    @classmethod
    def of(cls, example: ExampleTrace) -> _Texts:
        """Redact and escape an example's texts in one pass, then cap the request and output.

        Escaping comes after redaction (secrets are found in the text as it
        is) and before the cap (so the cap counts what is shown).
        """
        scrubbed = store_value(
            redact_value(
                {
                    "example_id": example.example_id,
                    "language": example.language,
                    "query": example.query,
                    "output": example.raw_output,
                    "expected": dict(example.expected_call),
                    "expected_tool_calls": [_tool_call(call) for call in example.gold_calls],
                    "decoded": [dict(call) for call in example.decoded_calls],
                }
            )
        )
        query, query_chars = _capped(scrubbed["query"])
        output, output_chars = _capped(scrubbed["output"])
        return cls(
            scrubbed["example_id"],
            scrubbed["language"],
            query,
            query_chars,
            output,
            output_chars,
            scrubbed["expected"],
            scrubbed["expected_tool_calls"],
            scrubbed["decoded"],
        )


def _root_span(
    example: ExampleTrace,
    texts: _Texts,
    ids: _TraceIds,
    span: tuple[int, int],
    common: Mapping[str, str],
) -> Any:
    """The trace's ``LLM`` root span: the request as its inputs, the raw output as its outputs.

    It is named after the arm (``base``, ``adapter``) and its last input is
    ``arm``: MLflow's "Comparing 2 traces" view heads nothing with the run's
    name, but shows the root span's name (details) and the *last three* of
    its inputs (summary; the rest behind "Show 1 more"). ``span`` is its
    start and end, in nanoseconds.
    """
    inputs: dict[str, Any] = {
        "example_id": texts.example_id,
        "language": texts.language,
        "query": texts.query,
    }
    if texts.query_chars > len(texts.query):
        inputs["query_characters"] = texts.query_chars
    inputs["arm"] = example.model_kind
    # The output is a JSON object, never a bare JSON string: MLflow's store
    # decodes a string attribute a second time when its content parses as JSON,
    # which turned an output such as '{"name": ...}' into an object and a
    # 100,000-deep '[[[[...' into a RecursionError that failed the whole run.
    outputs = {
        "raw_output": texts.output,
        "characters": texts.output_chars,
        "truncated": texts.output_chars > len(texts.output),
    }
    attributes = {
        **common,
        "mlflow.spanType": json.dumps("LLM"),
        "mlflow.spanInputs": json.dumps(inputs, ensure_ascii=False),
        "mlflow.spanOutputs": json.dumps(outputs, ensure_ascii=False),
    }
    start_ns, end_ns = span
    return _span(
        ids.otel_trace, ids.span_id, None, example.model_kind, start_ns, attributes, end_ns
    )


def _assessments(example: ExampleTrace, texts: _Texts, run_id: str, source_id: str) -> list[Any]:
    """The trace's expectations (the gold call(s)) and feedback (status, components, output).

    Each carries the run that scored it, and each metric's feedback its exact
    numerator and denominator, so nothing the UI rounds is lost.
    """
    from mlflow.entities import AssessmentSource, Expectation, Feedback

    source = AssessmentSource(source_type="CODE", source_id=source_id)
    provenance = {_ASSESSMENT_SOURCE_RUN: run_id}
    assessments: list[Any] = [
        Expectation(
            name="expected_call",
            value=texts.expected,
            source=source,
            metadata=provenance,
        ),
        Expectation(
            name="expected_tool_calls",
            value=texts.expected_tool_calls,
            source=source,
            metadata=provenance,
        ),
        Feedback(
            name="parse_status",
            value=example.parse_status,
            source=source,
            metadata=provenance,
        ),
    ]
    for name, (numerator, denominator) in example.components.items():
        assessments.append(
            Feedback(
                name=name,
                value=_feedback_value(numerator, denominator),
                rationale=f"{numerator}/{denominator}",
                source=source,
                metadata={
                    **provenance,
                    "numerator": str(numerator),
                    "denominator": str(denominator),
                },
            )
        )
    assessments.append(
        Feedback(
            name="raw_output",
            value=texts.output,
            rationale=_length_note(texts.output, texts.output_chars),
            source=source,
            metadata={**provenance, "characters": str(texts.output_chars)},
        )
    )
    return assessments


def _trace_info(
    example: ExampleTrace,
    texts: _Texts,
    trace_id: str,
    run_id: str,
    experiment_id: str,
    now_ms: int,
    assessments: list[Any],
) -> Any:
    """The trace's info: where it lives, what it previews, its duration, its tags.

    The trace is named after the arm (``mlflow.traceName``), as its root span is.
    """
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    return TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=now_ms,
        state=TraceState.OK,
        request_preview=texts.query[:_PREVIEW_CHARS],
        response_preview=texts.output[:_PREVIEW_CHARS],
        execution_duration=round(max(0.0, example.seconds) * 1000),
        client_request_id=texts.example_id,
        trace_metadata={
            _SOURCE_RUN: run_id,
            "mlflow.trace_schema.version": "3",
            "sommelier.example_id": texts.example_id,
            "sommelier.language": texts.language,
            "sommelier.model_kind": example.model_kind,
        },
        tags={
            "mlflow.traceName": example.model_kind,
            "sommelier.example_id": texts.example_id,
            "sommelier.language": texts.language,
            "sommelier.model_kind": example.model_kind,
        },
        assessments=assessments,
    )


@dataclass(frozen=True)
class PreparedTrace:
    """One example's trace, ready to send: its id, its spans, its info with the assessments."""

    trace_id: str
    spans: list[Any]
    info: Any


def prepare_trace(
    example: ExampleTrace, run_id: str, experiment_id: str, now_ms: int, source_id: str
) -> PreparedTrace:
    """One example's trace, built without a request: its spans, and its info with assessments.

    Every text is redacted before it goes anywhere; every assessment is
    attached to the root span, as ``mlflow.genai.evaluate`` attaches them.
    The root span lasts the example's :attr:`~ExampleTrace.seconds`, the
    ``TOOL`` spans sit at its start.
    """
    ids = trace_ids(run_id, example.example_id)
    texts = _Texts.of(example)
    start_ns = now_ms * 1_000_000
    end_ns = start_ns + round(max(0.0, example.seconds) * 1_000_000_000)
    common = {
        "mlflow.traceRequestId": json.dumps(ids.trace_id),
        "mlflow.experimentId": json.dumps(experiment_id),
    }
    root = _root_span(example, texts, ids, (start_ns, end_ns), common)
    seed = f"{run_id}\x00{example.example_id}\x00tool".encode("utf-8", "surrogatepass")
    spans = [root] + [
        _tool_span(call, index, ids, seed, start_ns, common)
        for index, call in enumerate(texts.decoded)
    ]
    assessments = _assessments(example, texts, run_id, source_id)
    for assessment in assessments:
        assessment.trace_id = ids.trace_id
        assessment.span_id = root.span_id
    info = _trace_info(example, texts, ids.trace_id, run_id, experiment_id, now_ms, assessments)
    return PreparedTrace(ids.trace_id, spans, info)
