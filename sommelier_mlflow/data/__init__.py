"""Row schemas and the readers, preparation and formatting of data files.

The facade holds what a user (or another layer) works with: row types,
schema names, readers, the writer, ``prepare`` and formatting. The JSONL
plumbing under the readers stays in its private module.
"""

from __future__ import annotations

from sommelier_mlflow.data import (  # noqa: F401  (importing registers each input format)
    _import_glaive,
    _import_hermes_fc,
    _import_openai,
    _import_sharegpt,
    _import_toolace,
    _import_xlam,
)
from sommelier_mlflow.data._bfcl import (
    BFCL_ACCEPTED_CATEGORIES,
    BFCL_DEFAULT_CATEGORIES,
    BFCL_DROP_REASONS,
    BFCL_DROP_SUMMARY_SCHEMA,
    BfclImportResult,
    import_bfcl,
)
from sommelier_mlflow.data._conversation_import import (
    CONVERSATION_DROP_REASONS,
    ConversationProblem,
    SourceConversation,
    conversation_format,
)
from sommelier_mlflow.data._dataset_records import (
    DATASET_RECORD_TAGS,
    dataset_records,
    read_dataset_records,
)
from sommelier_mlflow.data._format import (
    MAX_PROMPT_CHARS,
    NATIVE_PROMPT_FORMAT,
    SYSTEM_INSTRUCTION,
    ChatTemplateTokenizer,
    PromptFormat,
    build_messages,
    check_prompt_formats,
    format_examples,
    prompt_format,
    prompt_format_names,
    read_chat_template_kwargs,
    register_prompt_format,
    render_target,
    tool_schemas,
)
from sommelier_mlflow.data._generation_reader import (
    GenerationPrefix,
    read_generation_prefix,
    read_generations,
)
from sommelier_mlflow.data._input_formats import (
    DEFAULT_INPUT_FORMAT,
    InputFormat,
    input_format,
    input_format_names,
    register_input_format,
)
from sommelier_mlflow.data._precomputed_reader import PrecomputedGeneration, read_precomputed
from sommelier_mlflow.data._prepare import (
    DROP_REASONS,
    SPLIT_NAMES,
    PrepareResult,
    prepare,
)
from sommelier_mlflow.data._provenance import (
    MODEL_KINDS,
    Decoding,
    ModelIdentity,
    ModelKind,
    check_model_kind,
)
from sommelier_mlflow.data._sample import SAMPLE_RULE, ExampleSample, sample_examples
from sommelier_mlflow.data._schemas import (
    COMPARISON_REPORT_SCHEMA,
    DEFAULT_PROMPT_FORMAT,
    DROP_SUMMARY_SCHEMA,
    EVALUATION_REPORT_SCHEMA,
    GENERATION_FIELDS,
    GENERATION_SCHEMA,
    OVERALL,
    RESERVED_SLICE_NAMES,
    TEST_EXAMPLE_SCHEMA,
    DatasetRef,
    GenerationRecord,
    TestExample,
    TestSplit,
    schema_version,
    validate_language,
)
from sommelier_mlflow.data._slices import (
    CALLS_SLICE_FIELD,
    call_count_value,
    check_slice_fields,
    encode_slice_value,
    slice_field_names,
    slice_name,
    slice_sections,
)
from sommelier_mlflow.data._split_reader import (
    FORMATTED_EXAMPLE_V2_SCHEMA,
    PREPARED_EXAMPLE_V2_SCHEMA,
    TEST_SPLIT_SCHEMAS,
    check_scoring_mode,
    read_test_split,
)
from sommelier_mlflow.data._writers import write_test_split

__all__ = [
    "BFCL_ACCEPTED_CATEGORIES",
    "BFCL_DEFAULT_CATEGORIES",
    "BFCL_DROP_REASONS",
    "BFCL_DROP_SUMMARY_SCHEMA",
    "BfclImportResult",
    "CALLS_SLICE_FIELD",
    "COMPARISON_REPORT_SCHEMA",
    "CONVERSATION_DROP_REASONS",
    "ChatTemplateTokenizer",
    "ConversationProblem",
    "DATASET_RECORD_TAGS",
    "DEFAULT_INPUT_FORMAT",
    "DEFAULT_PROMPT_FORMAT",
    "DROP_REASONS",
    "DROP_SUMMARY_SCHEMA",
    "DatasetRef",
    "Decoding",
    "EVALUATION_REPORT_SCHEMA",
    "ExampleSample",
    "FORMATTED_EXAMPLE_V2_SCHEMA",
    "GENERATION_FIELDS",
    "GENERATION_SCHEMA",
    "GenerationPrefix",
    "GenerationRecord",
    "InputFormat",
    "MAX_PROMPT_CHARS",
    "MODEL_KINDS",
    "ModelIdentity",
    "ModelKind",
    "NATIVE_PROMPT_FORMAT",
    "OVERALL",
    "PREPARED_EXAMPLE_V2_SCHEMA",
    "PrecomputedGeneration",
    "PrepareResult",
    "PromptFormat",
    "RESERVED_SLICE_NAMES",
    "SAMPLE_RULE",
    "SPLIT_NAMES",
    "SYSTEM_INSTRUCTION",
    "SourceConversation",
    "TEST_EXAMPLE_SCHEMA",
    "TEST_SPLIT_SCHEMAS",
    "TestExample",
    "TestSplit",
    "build_messages",
    "call_count_value",
    "check_model_kind",
    "check_prompt_formats",
    "check_scoring_mode",
    "check_slice_fields",
    "conversation_format",
    "dataset_records",
    "encode_slice_value",
    "format_examples",
    "import_bfcl",
    "input_format",
    "input_format_names",
    "prepare",
    "prompt_format",
    "prompt_format_names",
    "read_chat_template_kwargs",
    "read_dataset_records",
    "read_generation_prefix",
    "read_generations",
    "read_precomputed",
    "read_test_split",
    "register_input_format",
    "register_prompt_format",
    "render_target",
    "sample_examples",
    "schema_version",
    "slice_field_names",
    "slice_name",
    "slice_sections",
    "tool_schemas",
    "validate_language",
    "write_test_split",
]
