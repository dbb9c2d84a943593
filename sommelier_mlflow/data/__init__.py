"""Row schemas and the readers, preparation and formatting of data files.

The facade holds what a user (or another layer) works with: row types,
schema names, readers, the writer, ``prepare`` and formatting. The JSONL
plumbing under the readers stays in its private module.
"""

from __future__ import annotations

from sommelier_mlflow.data._bfcl import (
    BFCL_ACCEPTED_CATEGORIES,
    BFCL_DEFAULT_CATEGORIES,
    BFCL_DROP_REASONS,
    BFCL_DROP_SUMMARY_SCHEMA,
    BfclImportResult,
    import_bfcl,
)
from sommelier_mlflow.data._format import (
    SYSTEM_INSTRUCTION,
    ChatTemplateTokenizer,
    build_messages,
    format_examples,
    render_target,
)
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
from sommelier_mlflow.data._readers import (
    FORMATTED_EXAMPLE_V2_SCHEMA,
    PREPARED_EXAMPLE_V2_SCHEMA,
    TEST_SPLIT_SCHEMAS,
    PrecomputedGeneration,
    check_scoring_mode,
    read_generations,
    read_precomputed,
    read_test_split,
)
from sommelier_mlflow.data._schemas import (
    COMPARISON_REPORT_SCHEMA,
    DROP_SUMMARY_SCHEMA,
    EVALUATION_REPORT_SCHEMA,
    GENERATION_FIELDS,
    GENERATION_SCHEMA,
    OVERALL,
    RESERVED_SLICE_NAMES,
    TEST_EXAMPLE_SCHEMA,
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
    slice_name,
    slice_sections,
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
    "ChatTemplateTokenizer",
    "DROP_REASONS",
    "DROP_SUMMARY_SCHEMA",
    "Decoding",
    "EVALUATION_REPORT_SCHEMA",
    "FORMATTED_EXAMPLE_V2_SCHEMA",
    "GENERATION_FIELDS",
    "GENERATION_SCHEMA",
    "GenerationRecord",
    "MODEL_KINDS",
    "ModelIdentity",
    "ModelKind",
    "OVERALL",
    "PREPARED_EXAMPLE_V2_SCHEMA",
    "PrecomputedGeneration",
    "PrepareResult",
    "RESERVED_SLICE_NAMES",
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
    "read_generations",
    "read_precomputed",
    "read_test_split",
    "render_target",
    "schema_version",
    "slice_name",
    "slice_sections",
    "validate_language",
    "write_test_split",
]
