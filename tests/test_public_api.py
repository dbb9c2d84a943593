"""The curated public surface: what users may import, and nothing by accident."""

from __future__ import annotations

import importlib

import pytest

import sommelier_mlflow

EXPECTED_TOP_LEVEL = {
    "METRIC_NAMES",
    "PARSER_VERSION",
    "BaseMeasure",
    "CallMatch",
    "ComparisonRefusedError",
    "CompositeMeasure",
    "ConfigError",
    "CountsMeasure",
    "DataError",
    "DependencyError",
    "MeasureResults",
    "InputError",
    "InvariantViolationError",
    "JsonFormatMeasure",
    "MeasureSpec",
    "MetricValue",
    "ParseResult",
    "ScoringMetric",
    "SommelierError",
    "TrackingError",
    "UnknownMetricError",
    "compute_metrics",
    "count_characters",
    "count_encodings",
    "count_tokens",
    "flatten_arguments",
    "get_measure",
    "parse_tool_call",
    "register_measure",
    "register_scoring_metric",
    "scoring_metrics",
    "unregister_scoring_metric",
}

PACKAGES = [
    "sommelier_mlflow",
    "sommelier_mlflow.data",
    "sommelier_mlflow.toolcalls",
    "sommelier_mlflow.metrics",
    "sommelier_mlflow.evaluation",
    "sommelier_mlflow.generation",
    "sommelier_mlflow.integration",
    "sommelier_mlflow.scorers",
    "sommelier_mlflow.training",
    "sommelier_mlflow.cli",
]


# Curated subpackage surfaces: what a user (or another layer) imports from them.
# Adding or removing a name here is a deliberate API change.
CURATED = {
    "sommelier_mlflow.cli": {"build_parser", "error_line", "main"},
    "sommelier_mlflow.training": {"SommelierCallback"},
    "sommelier_mlflow.generation": {
        "BackendFactory",
        "BackendOption",
        "BackendOptions",
        "BackendRequest",
        "BackendSpec",
        "Completion",
        "ContextCheck",
        "DTYPES",
        "EngineLease",
        "GENERATIONS_DIR",
        "GenerationBackend",
        "HFGenerator",
        "MANIFEST_NAME",
        "MANIFEST_SCHEMA",
        "MULTI_TURN_JOURNAL_NAME",
        "MULTI_TURN_LOOP",
        "MultiTurnLoop",
        "NoOptions",
        "RecordedIdentity",
        "ReplayGenerator",
        "ReplayOptions",
        "ServedModel",
        "ServerGenerator",
        "ServerOptions",
        "ServerTransport",
        "SupportsClose",
        "SupportsCompletionDetails",
        "SupportsContextLength",
        "SupportsExampleKeys",
        "SupportsFingerprint",
        "SupportsPromptLengths",
        "SupportsRunRecord",
        "TIMING_NAME",
        "TRAJECTORIES_NAME",
        "TextGenerator",
        "VllmGenerator",
        "VllmOptions",
        "adapter_digest",
        "backend_names",
        "backend_spec",
        "check_context",
        "close_backend",
        "create_backend",
        "declared_adapter",
        "declared_identity",
        "load_tokenizer",
        "loop_decoding",
        "find_recorded_identity",
        "greedy_completions",
        "greedy_generation_config",
        "keep_engines",
        "open_engines",
        "physical_cores",
        "read_example_seconds",
        "register_backend",
        "run_generation",
        "shared_engine",
    },
    "sommelier_mlflow.metrics": {
        "BaseMeasure",
        "CompositeMeasure",
        "CountsConfig",
        "CountsMeasure",
        "MeasureResults",
        "JSONValue",
        "JsonFormatConfig",
        "JsonFormatMeasure",
        "MeasureConfig",
        "MeasureSpec",
        "NoConfig",
        "config_schema",
        "count_characters",
        "count_encodings",
        "count_tokens",
        "evaluate_measures",
        "get_measure",
        "list_measures",
        "register_measure",
        "unregister_measure",
    },
    "sommelier_mlflow.data": {
        "BFCL_ACCEPTED_CATEGORIES",
        "BFCL_DEFAULT_CATEGORIES",
        "BFCL_DROP_REASONS",
        "BFCL_DROP_SUMMARY_SCHEMA",
        "BfclImportResult",
        "BFCL_EXECUTION_DROP_REASONS",
        "BFCL_MULTI_TURN_CATEGORIES",
        "BFCL_MULTI_TURN_DROP_REASONS",
        "BFCL_MULTI_TURN_FUNC_DOCS",
        "MultiTurnCheck",
        "MultiTurnProblem",
        "Trajectory",
        "read_trajectories",
        "PrecomputedOutputs",
        "read_precomputed_outputs",
        "execution_check",
        "is_multi_turn",
        "CALLS_SLICE_FIELD",
        "COMPARISON_REPORT_SCHEMA",
        "ChatTemplateTokenizer",
        "DATASET_RECORD_TAGS",
        "DEFAULT_PROMPT_FORMAT",
        "DatasetRef",
        "dataset_records",
        "read_dataset_records",
        "NATIVE_PROMPT_FORMAT",
        "PromptFormat",
        "check_prompt_formats",
        "prompt_format",
        "prompt_format_names",
        "register_prompt_format",
        "tool_schemas",
        "read_chat_template_kwargs",
        "read_template_date",
        "MAX_PROMPT_CHARS",
        "CONVERSATION_DROP_REASONS",
        "ConversationProblem",
        "DEFAULT_INPUT_FORMAT",
        "InputFormat",
        "SourceConversation",
        "conversation_format",
        "input_format",
        "input_format_names",
        "register_input_format",
        "DROP_REASONS",
        "DROP_SUMMARY_SCHEMA",
        "Decoding",
        "EVALUATION_REPORT_SCHEMA",
        "FORMATTED_EXAMPLE_V2_SCHEMA",
        "GENERATION_FIELDS",
        "GENERATION_OPTIONAL_FIELDS",
        "GENERATION_SCHEMA",
        "GenerationPrefix",
        "GenerationRecord",
        "MODEL_KINDS",
        "ModelIdentity",
        "OVERALL",
        "ModelKind",
        "PREPARED_EXAMPLE_V2_SCHEMA",
        "PrecomputedGeneration",
        "PrepareResult",
        "RESERVED_SLICE_NAMES",
        "SAMPLE_RULE",
        "CONVERSATION_SAMPLE_RULE",
        "ExampleSample",
        "sample_examples",
        "SPLIT_NAMES",
        "SYSTEM_INSTRUCTION",
        "TEST_EXAMPLE_SCHEMA",
        "TEST_SPLIT_SCHEMAS",
        "TestExample",
        "TestSplit",
        "build_messages",
        "call_count_value",
        "check_model_kind",
        "check_scoring_mode",
        "check_slice_fields",
        "encode_slice_value",
        "format_examples",
        "import_bfcl",
        "prepare",
        "read_generation_prefix",
        "read_generations",
        "read_precomputed",
        "read_test_split",
        "render_target",
        "schema_version",
        "slice_field_names",
        "slice_name",
        "slice_sections",
        "validate_language",
        "write_test_split",
        # conversation rows (issue 32)
        "AFTER_SLICE_FIELD",
        "CONVERSATION_SLICE_FIELDS",
        "TURN_SLICE_FIELD",
        "conversation_slice_values",
        "conversation_text",
        "messages_problem",
        "with_conversation_slices",
    },
}


@pytest.mark.parametrize("name", sorted(CURATED))
def test_curated_subpackage_surfaces_change_only_deliberately(name: str) -> None:
    assert set(importlib.import_module(name).__all__) == CURATED[name]


def test_top_level_surface_is_exactly_the_curated_one() -> None:
    assert set(sommelier_mlflow.__all__) == EXPECTED_TOP_LEVEL
    assert sommelier_mlflow.PARSER_VERSION == "sommelier.parser.v1"
    assert len(sommelier_mlflow.METRIC_NAMES) == 5


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_exports_a_sorted_resolvable_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    assert len(exported) == len(set(exported))
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"
        assert not symbol.startswith("_")


def test_error_tree_has_one_root_and_stable_exit_codes() -> None:
    from sommelier_mlflow import errors

    for symbol in errors.__all__:
        assert issubclass(getattr(errors, symbol), sommelier_mlflow.SommelierError)
    assert sommelier_mlflow.InputError.exit_code == 2
    assert sommelier_mlflow.DependencyError.exit_code == 3
    assert sommelier_mlflow.ComparisonRefusedError.exit_code == 4
    assert sommelier_mlflow.InvariantViolationError.exit_code == 5
    assert errors.ClaimNotSupportedError.exit_code == 6
    assert issubclass(sommelier_mlflow.UnknownMetricError, KeyError)
