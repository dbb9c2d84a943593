from __future__ import annotations

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.integration import (
    AUTO_TRACE_LIMIT,
    ExampleTrace,
    arm_example_traces,
    log_example_traces,
    should_log_traces,
)
from sommelier_mlflow.integration._trace_entities import TRACE_TEXT_LIMIT
from sommelier_mlflow.toolcalls import METRIC_NAMES
from tests.integration.integration_helpers import GOLD, Arms, Store


def _traces(store: Store, run_id: str) -> dict[str, mlflow.entities.Trace]:
    found = mlflow.search_traces(locations=[store.experiment_id], run_id=run_id, return_type="list")
    return {trace.info.request_metadata["sommelier.example_id"]: trace for trace in found}


def _assessments(trace: mlflow.entities.Trace) -> dict[str, mlflow.entities.Assessment]:
    return {assessment.name: assessment for assessment in trace.info.assessments}


def test_log_traces_setting() -> None:
    assert should_log_traces("auto", AUTO_TRACE_LIMIT) is True
    assert should_log_traces("auto", AUTO_TRACE_LIMIT + 1) is False
    assert should_log_traces("TRUE", AUTO_TRACE_LIMIT + 1) is True
    assert should_log_traces("false", 1) is False
    with pytest.raises(ConfigError, match="log_traces must be one of"):
        should_log_traces("yes", 1)


def test_each_example_becomes_a_trace_with_its_assessments(store: Store, arms: Arms) -> None:
    client = MlflowClient()
    run_id = client.create_run(store.experiment_id).info.run_id
    examples = arm_example_traces(arms.base_typed, arms.base, arms.split)
    assert log_example_traces(run_id, examples) == len(GOLD)

    traces = _traces(store, run_id)
    assert set(traces) == set(GOLD)
    assert client.get_run(run_id).data.tags["mlflow.runType"] == "genai_evaluate"

    e2 = _assessments(traces["e2"])  # right name, wrong units: half the argument pairs
    assert e2["expected_call"].value == GOLD["e2"]
    assert e2["parse_status"].value == "ok"
    assert e2["function_name_accuracy"].value is True
    assert e2["argument_exact_match"].value is False
    assert e2["argument_f1"].value == 0.5
    assert e2["argument_f1"].metadata["numerator"] == "2"
    assert e2["argument_f1"].metadata["denominator"] == "4"
    assert e2["argument_f1"].rationale == "2/4"
    assert e2["raw_output"].value == arms.base.examples[1].raw_text
    assert set(METRIC_NAMES) <= set(e2)
    assert e2["full_call_exact_match"].metadata["mlflow.assessment.sourceRunId"] == run_id

    e4 = _assessments(traces["e4"])  # prose: no JSON, every metric fails
    assert e4["parse_status"].value == "no_json"
    assert e4["valid_json_rate"].value is False
    trace = mlflow.get_trace(traces["e4"].info.trace_id)
    assert trace is not None
    assert trace.info.state.value == "OK"
    assert trace.info.tags["mlflow.trace.spansLocation"] == "TRACKING_STORE"
    root = trace.data.spans[0]
    assert root.inputs["query"] == arms.split.by_id()["e4"].query
    assert root.outputs == {
        "raw_output": "The weather in Rome is sunny.",
        "characters": 29,
        "truncated": False,
    }

    # The per-example components add up to the logged aggregate, metric by metric.
    for name in METRIC_NAMES:
        numerator = sum(int(_assessments(t)[name].metadata["numerator"]) for t in traces.values())
        denominator = sum(
            int(_assessments(t)[name].metadata["denominator"]) for t in traces.values()
        )
        expected = arms.base_report["metrics"][name]
        assert (numerator, denominator) == (expected["numerator"], expected["denominator"])


def test_logging_again_updates_instead_of_duplicating(store: Store, arms: Arms) -> None:
    client = MlflowClient()
    run_id = client.create_run(store.experiment_id).info.run_id
    examples = arm_example_traces(arms.adapter_typed, arms.adapter, arms.split)
    log_example_traces(run_id, examples, workers=1)
    log_example_traces(run_id, examples, workers=3)
    traces = _traces(store, run_id)
    assert len(traces) == len(GOLD)
    assert all(_assessments(t)["full_call_exact_match"].value is True for t in traces.values())


def test_zero_over_zero_component_has_no_value(store: Store) -> None:
    run_id = MlflowClient().create_run(store.experiment_id).info.run_id
    example = ExampleTrace(
        example_id="x1",
        language="en",
        query="Do nothing",
        raw_output='{"name": "noop", "arguments": {}}',
        parse_status="ok",
        expected_call={"name": "noop", "arguments": {}},
        components={"argument_f1": (0, 0), "full_call_exact_match": (1, 1)},
        model_kind="base",
    )
    log_example_traces(run_id, [example])
    found = _assessments(_traces(store, run_id)["x1"])
    assert found["argument_f1"].value is None
    assert found["argument_f1"].rationale == "0/0"
    assert found["full_call_exact_match"].value is True


def test_secrets_in_outputs_are_redacted(store: Store) -> None:
    run_id = MlflowClient().create_run(store.experiment_id).info.run_id
    secret = "hf_FakeTokenForTestsOnly0123456789abcdef"
    example = ExampleTrace(
        example_id="s1",
        language="en",
        query=f"my token is {secret}",
        raw_output=f"echo {secret}",
        parse_status="no_json",
        expected_call={"name": "noop", "arguments": {}},
        components={"full_call_exact_match": (0, 1)},
        model_kind="base",
    )
    log_example_traces(run_id, [example])
    trace = _traces(store, run_id)["s1"]
    full = mlflow.get_trace(trace.info.trace_id)
    assert full is not None
    assert secret not in full.to_json()


def _hostile(example_id: str, raw_output: str) -> ExampleTrace:
    return ExampleTrace(
        example_id=example_id,
        language="en",
        query="What is the weather in Rome?",
        raw_output=raw_output,
        parse_status="invalid_json",
        expected_call={"name": "get_weather", "arguments": {"city": "Rome"}},
        components={"full_call_exact_match": (0, 1)},
        model_kind="base",
    )


#: Outputs MLflow's store used to decode as JSON: a degenerate generation
#: (100,000 nested arrays or objects) overflowed the recursion limit and failed
#: the run; a plain JSON document came back as an object, not the text produced.
HOSTILE_OUTPUTS = {
    "deep-array": "[" * 100_000,
    "deep-object": '{"a":' * 100_000,
    "closed-deep-array": "[" * 100_000 + "]" * 100_000,
    "json-text": '{"name": "get_weather", "arguments": {"city": "Rome"}}',
}


def check_hostile_outputs_are_kept_as_text(experiment_id: str) -> None:
    """Log every hostile output into a fresh run and read each back as the text it was."""
    client = MlflowClient()
    run_id = client.create_run(experiment_id).info.run_id
    examples = [_hostile(name, text) for name, text in HOSTILE_OUTPUTS.items()]
    assert log_example_traces(run_id, examples) == len(examples)
    client.set_terminated(run_id)
    assert client.get_run(run_id).info.status == "FINISHED"
    found = mlflow.search_traces(locations=[experiment_id], run_id=run_id, return_type="list")
    traces = {trace.info.request_metadata["sommelier.example_id"]: trace for trace in found}
    assert set(traces) == set(HOSTILE_OUTPUTS)
    for name, text in HOSTILE_OUTPUTS.items():
        trace = mlflow.get_trace(traces[name].info.trace_id)
        assert trace is not None
        shown = text[:TRACE_TEXT_LIMIT]
        outputs = trace.data.spans[0].outputs
        assert outputs == {
            "raw_output": shown,
            "characters": len(text),
            "truncated": len(text) > TRACE_TEXT_LIMIT,
        }
        raw = _assessments(trace)["raw_output"]
        assert raw.value == shown
        assert raw.metadata["characters"] == str(len(text))
        if len(text) > TRACE_TEXT_LIMIT:
            assert raw.rationale is not None
            assert "sommelier/generations" in raw.rationale


def test_hostile_outputs_are_logged_as_text_on_sqlite(store: Store) -> None:
    check_hostile_outputs_are_kept_as_text(store.experiment_id)


def _counted(index: int) -> ExampleTrace:
    """Example ``index`` decodes ``index % 3`` calls: none, one or two TOOL spans."""
    calls = tuple({"name": f"tool_{k}", "arguments": {"i": index}} for k in range(index % 3))
    gold = {"name": "tool_0", "arguments": {"i": index}}
    return ExampleTrace(
        example_id=f"c{index:02d}",
        language="en",
        query=f"Call tool_0 with {index}",
        raw_output=str(list(calls)),
        parse_status="ok" if calls else "no_json",
        expected_call=gold,
        components={name: (int(len(calls) == 1), 1) for name in METRIC_NAMES},
        model_kind="adapter",
        decoded_calls=calls,
        gold_calls=(gold,),
    )


def test_every_trace_keeps_each_tool_span_and_assessment_once(store: Store) -> None:
    """Counted, not sampled: the guard any faster logging path must keep passing.

    Per trace: one root span, one TOOL span per decoded call, and exactly the
    expected_call, expected_tool_calls, parse_status, one per metric and
    raw_output assessments, none twice.
    """
    run_id = MlflowClient().create_run(store.experiment_id).info.run_id
    examples = [_counted(index) for index in range(12)]
    assert log_example_traces(run_id, examples, workers=3) == len(examples)
    traces = _traces(store, run_id)
    assert sorted(traces) == [example.example_id for example in examples]
    names = ["expected_call", "expected_tool_calls", "parse_status", *METRIC_NAMES, "raw_output"]
    for example in examples:
        trace = traces[example.example_id]
        types = [span.span_type for span in trace.data.spans]
        assert types.count("TOOL") == len(example.decoded_calls)
        assert len(types) == 1 + len(example.decoded_calls)
        assert sorted(a.name for a in trace.info.assessments) == sorted(names)


def test_each_trace_names_its_arm_and_lasts_its_share_of_the_batch(
    store: Store, arms: Arms
) -> None:
    """MLflow's "Comparing 2 traces" shows no run name: the trace itself names its arm.

    And its duration is the example's share of its batch's generation time, so
    the Overview's latency chart has something to show.
    """
    client = MlflowClient()
    run_id = client.create_run(store.experiment_id).info.run_id
    seconds = {example_id: 0.25 * index for index, example_id in enumerate(sorted(GOLD))}
    examples = arm_example_traces(arms.adapter_typed, arms.adapter, arms.split, seconds)
    log_example_traces(run_id, examples)
    traces = _traces(store, run_id)
    assert set(traces) == set(GOLD)
    for example_id, found in traces.items():
        trace = mlflow.get_trace(found.info.trace_id)
        assert trace is not None
        root, *tools = trace.data.spans
        assert root.name == "adapter"
        assert root.inputs["arm"] == "adapter"
        assert trace.info.tags["mlflow.traceName"] == "adapter"
        assert trace.info.execution_duration == round(seconds[example_id] * 1000)
        assert root.end_time_ns - root.start_time_ns == round(seconds[example_id] * 1e9)
        assert tools  # every adapter output decodes to a call
        if seconds[example_id]:  # a TOOL span lies within its root
            assert all(root.start_time_ns < tool.start_time_ns < root.end_time_ns for tool in tools)
