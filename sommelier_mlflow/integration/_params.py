"""The MLflow params of an arm run and of a comparison run, derived from their reports.

Params are what the MLflow UI filters and compares runs by, so they are taken
from the report (the single source of what was measured), never from the
command line, which may name the same model in several spellings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.errors import DataError

__all__ = ["report_field", "evaluation_params", "comparison_params"]


def report_field(mapping: Mapping[str, Any], *path: str) -> Any:
    """The value at ``path`` in a report, or a :class:`DataError` naming what is missing."""
    current: Any = mapping
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            raise DataError(f"report lacks {'.'.join(path)}; cannot derive the run's params")
        current = current[part]
    return current


def _identity_params(
    model_identity: Mapping[str, Any], decoding: Mapping[str, Any], parser_version: object
) -> dict[str, object]:
    return {
        "base_model": model_identity.get("base_model"),
        "base_revision": model_identity.get("base_revision"),
        "tokenizer": model_identity.get("tokenizer"),
        "tokenizer_revision": model_identity.get("tokenizer_revision"),
        "parser_version": parser_version,
        **{f"decoding.{key}": decoding[key] for key in sorted(decoding)},
    }


def _bootstrap_params(settings: object) -> dict[str, object]:
    if not isinstance(settings, Mapping):
        return {}
    return {
        f"bootstrap.{key}": settings[key]
        for key in ("seed", "resamples", "confidence", "method")
        if key in settings
    }


def evaluation_params(report: Mapping[str, Any]) -> dict[str, object]:
    """The params of an arm's run, derived from its evaluation report.

    Model and tokenizer ids and revisions, the adapter's source and digest
    (``None`` for base), the parser version, every decoding field (batch size
    included), the bootstrap seed and resamples, and the chat-template
    variables and fixed template day when the prompts were rendered with them,
    and on a conversation split the number of conversation turns
    (``conversation_turns``). Names avoid the MLproject parameter names
    (``model``, ``adapter``, ``batch_size``...), which MLflow logs itself and
    would refuse to see re-logged with a resolved value.
    """
    identity = report_field(report, "identity")
    adapter = identity.get("adapter")
    params = _identity_params(
        report_field(identity, "model_identity"),
        report_field(identity, "decoding"),
        identity.get("parser_version"),
    )
    params["adapter_source"] = adapter.get("source") if isinstance(adapter, Mapping) else None
    params["adapter_sha256"] = adapter.get("sha256") if isinstance(adapter, Mapping) else None
    params.update(_bootstrap_params(report.get("bootstrap")))
    if identity.get("chat_template_kwargs"):
        # Canonical, so under its own key: `mlflow run` logs the parameter as typed.
        params["chat_template_kwargs.resolved"] = canonical_json(identity["chat_template_kwargs"])
    if identity.get("template_date"):
        params["template_date.resolved"] = identity["template_date"]  # mlflow run logs the given
    params.update(_selection_params(identity))
    params.update(_conversation_params(report))
    return params


def _conversation_params(report: Mapping[str, Any]) -> dict[str, object]:
    """How many examples are conversation turns, for a split of conversation rows only.

    Read from the ``turn:`` slices every conversation split gets, so a
    single-turn run logs exactly the params it logged before.
    """
    field_slices = report.get("field_slices")
    if not isinstance(field_slices, Mapping):
        return {}
    turns = [
        result.get("examples", 0)
        for name, result in field_slices.items()
        if name.startswith("turn:") and isinstance(result, Mapping)
    ]
    return {"conversation_turns": sum(turns)} if turns else {}


def _selection_params(identity: Mapping[str, Any]) -> dict[str, object]:
    """How the evaluated rows were chosen: the sample's rule and seed, the prompts skipped.

    Only present when a sample was drawn or skipping allowed; the keys differ
    from the MLproject's ``max_examples``, ``seed`` and ``skip_overlong``,
    which ``mlflow run`` logs itself.
    """
    params: dict[str, object] = {}
    sample = identity.get("sample")
    if isinstance(sample, Mapping):
        params["sample.rule"] = sample.get("rule")
        params["sample.seed"] = sample.get("seed")
        params["sample.strata"] = ",".join(str(name) for name in sample.get("strata") or [])
        params["sample.roots"] = sample.get("roots")
    skipped = identity.get("skip_overlong")
    if isinstance(skipped, Mapping):
        params["overlong.context_length"] = skipped.get("context_length")
        params["overlong.skipped"] = len(skipped.get("example_ids") or [])
    return params


def comparison_params(report: Mapping[str, Any]) -> dict[str, object]:
    """The params of a comparison run: shared identity, the adapter, bootstrap settings."""
    identity = report_field(report, "identity")
    params = _identity_params(
        report_field(identity, "model_identity"),
        report_field(identity, "decoding"),
        identity.get("parser_version"),
    )
    runs = report.get("runs")
    adapter = report_field(runs, "adapter", "adapter") if isinstance(runs, Mapping) else None
    params["adapter_source"] = adapter.get("source") if isinstance(adapter, Mapping) else None
    params["adapter_sha256"] = adapter.get("sha256") if isinstance(adapter, Mapping) else None
    params.update(_bootstrap_params(report.get("bootstrap")))
    return params
