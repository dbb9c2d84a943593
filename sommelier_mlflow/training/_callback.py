"""``SommelierCallback``: tool-call metrics of the model being trained, on the loss's step axis.

Each evaluation generates greedily for the same seeded subset of the test
split with the very model the trainer holds (``no_grad``, left padding,
eval mode), writes the generations and an ``evaluation_report.json`` the way
``evaluate`` does (same runner, same :func:`~sommelier_mlflow.evaluation.score_run`,
same report writer), and logs the report's metric keys under ``tooleval/``
with ``step=state.global_step``. The base model is evaluated once, before the
first step, with the adapter disabled, so step 0 of every chart is the base.

Training must not notice: the RNG streams (Python, NumPy, torch CPU and
CUDA), the model's train/eval mode and the tokenizer's padding settings are
saved before an evaluation and restored after it, and nothing runs on any
process but the main one. Nor must it die of an evaluation: one that fails
(a full disk, an unreachable tracking server) is a warning naming the step,
and the trainer goes on to save that step's checkpoint, unless the user
asked for ``fail_on_error``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import random
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
from transformers import TrainerCallback

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import (
    DEFAULT_PROMPT_FORMAT,
    SAMPLE_RULE,
    Decoding,
    ModelIdentity,
    ModelKind,
    TestSplit,
    check_scoring_mode,
    format_examples,
    read_chat_template_kwargs,
    read_generations,
    read_template_date,
    read_test_split,
    sample_examples,
)
from sommelier_mlflow.errors import ConfigError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    EVALUATION_REPORT_FILENAME,
    EvaluationReport,
    score_run,
    write_evaluation_report,
)
from sommelier_mlflow.generation import (
    Completion,
    greedy_completions,
    greedy_generation_config,
    run_generation,
)
from sommelier_mlflow.toolcalls import DEFAULT_MODE, JSON_FORMAT
from sommelier_mlflow.toolcalls import output_format as find_output_format

__all__ = ["METRIC_PREFIX", "SommelierCallback"]

#: Every metric the callback logs starts with this section.
METRIC_PREFIX: Final = "tooleval/"
#: Artifact folder of one evaluation: ``sommelier/checkpoints/step-<n>/``.
ARTIFACT_ROOT: Final = "sommelier/checkpoints"


def trainable_digest(model: Any) -> str:
    """SHA-256 over the names and bytes of the trainable parameters (the adapter as trained)."""
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters(), key=lambda item: item[0]):
        if not parameter.requires_grad:
            continue
        data = parameter.detach().to("cpu").contiguous().numpy().tobytes()
        digest.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


class _PreservedState:
    """What an evaluation could change and training would notice; restored on exit."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        import torch

        self._model, self._tokenizer = model, tokenizer
        self._python = random.getstate()
        self._numpy = np.random.get_state()
        self._torch = torch.get_rng_state()
        self._cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        self._training = bool(model.training)
        self._padding_side = tokenizer.padding_side
        self._pad_token = tokenizer.pad_token

    def restore(self) -> None:
        import torch

        random.setstate(self._python)
        np.random.set_state(self._numpy)
        torch.set_rng_state(self._torch)
        if self._cuda is not None:
            torch.cuda.set_rng_state_all(self._cuda)
        self._model.train(self._training)
        self._tokenizer.padding_side = self._padding_side
        if self._tokenizer.pad_token != self._pad_token:
            self._tokenizer.pad_token = self._pad_token


@contextlib.contextmanager
def _evaluation_mode(model: Any, tokenizer: Any) -> Iterator[None]:
    """Eval mode, no gradients, left padding; everything put back afterwards."""
    import torch

    saved = _PreservedState(model, tokenizer)
    try:
        model.eval()
        tokenizer.padding_side = "left"  # decoder-only models continue from the last position
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        with torch.no_grad():
            yield
    finally:
        saved.restore()


class _TrainingModelGenerator:
    """The model being trained, as a text generator the shared runner can drive.

    It borrows the trainer's model and tokenizer for one evaluation: closing
    it (the backend lifecycle) only lets go of them, never frees or alters
    what the trainer goes on training, and a closed generator refuses to
    generate, so no later evaluation can run on a model it no longer sees.
    """

    def __init__(
        self, model: Any, tokenizer: Any, fingerprint: dict[str, Any], keep_special_tokens: bool
    ) -> None:
        self._model = model
        self._tokenizer = tokenizer
        self._keep_special_tokens = keep_special_tokens
        self._config = greedy_generation_config(model.generation_config, tokenizer)
        self._fingerprint = fingerprint

    def close(self) -> None:
        """Forget the borrowed model and tokenizer (the trainer keeps them). Idempotent."""
        self._model = self._tokenizer = None

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return [c.text for c in self.generate_details(prompts, max_new_tokens=max_new_tokens)]

    def generate_details(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[Completion]:
        if self._model is None:
            raise InvariantViolationError(
                "SommelierCallback generated with an evaluation's model after the evaluation ended"
            )
        return greedy_completions(
            self._model,
            self._tokenizer,
            prompts,
            max_new_tokens=max_new_tokens,
            generation_config=self._config,
            device=self._model.device,
            keep_special_tokens=self._keep_special_tokens,
        )

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        encoded = self._tokenizer(list(prompts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def fingerprint(self) -> dict[str, Any]:
        return self._fingerprint


@dataclass(frozen=True)
class _Prepared:
    """The subset, rendered once, and the run the metrics go to."""

    split: TestSplit
    subset_sha256: str
    run_id: str
    started_run: bool
    identity: ModelIdentity


def _name_or_path(obj: Any, fallback: str) -> str:
    name = getattr(obj, "name_or_path", None) or getattr(
        getattr(obj, "config", None), "_name_or_path", None
    )
    return str(name) if name else fallback


class SommelierCallback(TrainerCallback):
    """Evaluate tool calling while a model trains, and log it to MLflow per step.

    Works with any trainer built on transformers' ``Trainer`` (TRL's
    ``SFTTrainer`` included). Metrics are logged as
    ``tooleval/<slice>/<metric>`` (and ``tooleval/<slice>/counts/...``) with
    ``step=state.global_step`` into the run the trainer logs to
    (``MLflowCallback``'s, or the active run; a new run when there is none),
    and each evaluation's report as the artifact
    ``sommelier/checkpoints/step-<n>/evaluation_report.json``.

    Args:
        test_split: A test split file (formatted or not) or a read ``TestSplit``;
            unformatted rows are rendered once with ``tokenizer``'s chat template.
        tokenizer: The chat-template tokenizer (default: the trainer's
            ``processing_class``).
        max_examples: Roots in the fixed seeded subset (0 = all), drawn by the
            rule of ``--max-examples`` (stratified by language and the declared
            slices); translations of a chosen root come with it, and every turn
            of a chosen conversation.
        seed: Seed of the subset choice and of the bootstrap intervals.
        scoring: Scoring mode, as ``evaluate --scoring``.
        output_format: How completions are read, as ``evaluate --output-format``.
        prompt_format: How unformatted rows are rendered, as ``evaluate --prompt-format``.
        chat_template_kwargs: Extra chat-template variables (a mapping or its
            JSON text), as ``evaluate --chat-template-kwargs``: Qwen3's
            ``{"enable_thinking": False}``, Llama's ``{"date_string": ...}``.
        template_date: The day (``YYYY-MM-DD``) the chat template's clock says,
            as ``evaluate --template-date``, for templates that write today's
            date with no variable to pin it (gpt-oss).
        slice_by: Slice fields beyond language, as ``evaluate --slice-by``.
        max_new_tokens: Greedy generation budget per example.
        batch_size: Prompts per generation batch.
        every_n_steps: Also evaluate every N optimizer steps (None: never).
        on_evaluate: Evaluate whenever the trainer evaluates.
        at_end: Evaluate after the last step.
        evaluate_base: Evaluate the base (adapter disabled) once at step 0.
        resamples: Bootstrap resamples of the per-language gap intervals.
        output_dir: Local folder of the per-step files (default:
            ``<args.output_dir>/sommelier``).
        fail_on_error: Let a failing evaluation raise out of the trainer's
            event, which stops ``trainer.train()`` before that step's
            checkpoint is saved. By default the failure is a ``UserWarning``
            naming the step and the error, recorded in :attr:`failures`, and
            training goes on: hours of training are worth more than one point
            on the learning curve.
    """

    def __init__(
        self,
        test_split: str | os.PathLike[str] | TestSplit,
        *,
        tokenizer: Any = None,
        max_examples: int = 200,
        seed: int = 0,
        scoring: str = DEFAULT_MODE,
        output_format: str = JSON_FORMAT,
        prompt_format: str = DEFAULT_PROMPT_FORMAT,
        chat_template_kwargs: Mapping[str, Any] | str | None = None,
        template_date: str | None = None,
        slice_by: Sequence[str] = (),
        max_new_tokens: int = 96,
        batch_size: int = 8,
        every_n_steps: int | None = None,
        on_evaluate: bool = True,
        at_end: bool = True,
        evaluate_base: bool = True,
        resamples: int = 1000,
        output_dir: str | os.PathLike[str] | None = None,
        fail_on_error: bool = False,
    ) -> None:
        if every_n_steps is not None and (type(every_n_steps) is not int or every_n_steps <= 0):
            raise ConfigError(
                f"every_n_steps must be a positive integer or None, got {every_n_steps!r}"
            )
        if type(max_examples) is not int or max_examples < 0:
            raise ConfigError(f"max_examples must be an integer >= 0, got {max_examples!r}")
        self._source = test_split
        self._tokenizer = tokenizer
        self._max_examples = max_examples
        self._seed = seed
        self._scoring = scoring
        self._keep_special_tokens = find_output_format(output_format).special_tokens
        self._prompt_format = prompt_format
        self._chat_template_kwargs = read_chat_template_kwargs(chat_template_kwargs)
        self._template_date = read_template_date(template_date)
        self._slice_by = tuple(slice_by)
        self._decoding = Decoding(max_new_tokens, batch_size, backend="hf")
        # Every evaluation scores alike; only the arm and its generations change.
        self._score = functools.partial(
            score_run,
            decoding=self._decoding,
            seed=seed,
            resamples=resamples,
            scoring=scoring,
            output_format=output_format,
            slice_by=self._slice_by,
        )
        self._every = every_n_steps
        self._on_evaluate = on_evaluate
        self._at_end = at_end
        self._evaluate_base = evaluate_base
        self._output_dir = None if output_dir is None else Path(output_dir)
        self._fail_on_error = fail_on_error
        self._prepared: _Prepared | None = None
        self._evaluated: set[int] = set()
        #: Each evaluation's report, by step, in the order they ran.
        self.reports: dict[int, EvaluationReport] = {}
        #: Seconds of each evaluation: (generation, scoring + writing + logging).
        self.timings: dict[int, tuple[float, float]] = {}
        #: Each evaluation that failed (and was skipped), by step: its error.
        self.failures: dict[int, Exception] = {}

    # -- trainer events ------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Read and render the subset (bad rows fail here, before any step), then the base."""
        if not state.is_world_process_zero:
            return
        tokenizer = self._tokenizer or kwargs.get("processing_class") or kwargs.get("tokenizer")
        if tokenizer is None:
            raise ConfigError(
                "SommelierCallback needs the chat-template tokenizer: pass tokenizer=... or "
                "give the trainer a processing_class"
            )
        self._tokenizer = tokenizer
        if self._output_dir is None:
            self._output_dir = Path(args.output_dir) / "sommelier"
        self._prepared = self._prepare(kwargs["model"])
        if self._evaluate_base and state.global_step == 0:
            self._evaluate_guarded(kwargs["model"], 0, "base")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        every = self._every is not None and step % self._every == 0
        last = self._at_end and step >= state.max_steps
        if every or last:
            self._evaluate_step(state, kwargs["model"])

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._on_evaluate:
            self._evaluate_step(state, kwargs["model"])

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The final evaluation if training stopped early; end the run this callback started."""
        if self._at_end:
            self._evaluate_step(state, kwargs["model"])
        self._end_own_run("FINISHED")

    def _end_own_run(self, status: str) -> None:
        """End the run this callback started, if it is still the active one."""
        prepared = self._prepared
        if prepared is not None and prepared.started_run:
            import mlflow

            active = mlflow.active_run()
            if active is not None and active.info.run_id == prepared.run_id:
                mlflow.end_run(status)

    # -- evaluation ----------------------------------------------------------

    def _prepare(self, model: Any) -> _Prepared:
        source = self._source
        split = (
            source
            if isinstance(source, TestSplit)
            else read_test_split(source, slice_by=self._slice_by)
        )
        check_scoring_mode(split, self._scoring)  # names the first row the mode cannot read
        # The same seeded, stratified rule as `--max-examples` (data/_sample.py): every
        # evaluation of the run scores the very same rows, in every declared slice.
        sample = sample_examples(
            split.examples,
            self._max_examples,
            seed=self._seed,
            slice_by=self._slice_by,
            scoring=self._scoring,
        )
        subset = list(sample.examples)
        rendered = format_examples(
            subset,
            self._tokenizer,
            prompt_format=self._prompt_format,
            chat_template_kwargs=self._chat_template_kwargs,
            template_date=self._template_date,
        )
        formatted = TestSplit(split.path, split.sha256, tuple(rendered))
        digest = sha256_text(canonical_json(sorted(e.example_id for e in formatted.examples)))
        run_id, started = _resolve_run()
        from sommelier_mlflow.integration import log_params, set_sommelier_tags

        log_params(
            run_id,
            {
                "sommelier.callback.examples": len(formatted.examples),
                "sommelier.callback.max_examples": self._max_examples,
                "sommelier.callback.seed": self._seed,
                "sommelier.callback.sample_rule": SAMPLE_RULE,
                "sommelier.callback.scoring": self._scoring,
                "sommelier.callback.max_new_tokens": self._decoding.max_new_tokens,
            },
        )
        set_sommelier_tags(run_id, extra={"sommelier.callback.subset_sha256": digest})
        identity = ModelIdentity(
            base_model=_name_or_path(getattr(model, "base_model", model), "model"),
            base_revision=None,
            tokenizer=_name_or_path(self._tokenizer, "tokenizer"),
            tokenizer_revision=None,
        )
        return _Prepared(formatted, digest, run_id, started, identity)

    def _evaluate_step(self, state: Any, model: Any) -> None:
        if state.is_world_process_zero and state.global_step not in self._evaluated:
            self._evaluate_guarded(model, state.global_step, "adapter")

    def _evaluate_guarded(self, model: Any, step: int, kind: ModelKind) -> None:
        """One evaluation whose failure warns instead of stopping training (see ``fail_on_error``).

        The model, RNG and tokenizer are already put back by the time the error
        arrives here, so training goes on exactly as it would have.
        """
        try:
            self._evaluate(model, step, kind)
        except Exception as exc:  # any failure: the trainer must reach its checkpoint
            if self._fail_on_error:
                # Training stops here and on_train_end never comes: close our run ourselves.
                self._end_own_run("FAILED")
                raise
            self.failures[step] = exc
            warnings.warn(
                f"SommelierCallback: the {kind} evaluation at step {step} failed and is "
                f"skipped ({type(exc).__name__}: {exc}); training continues. Pass "
                "fail_on_error=True to stop training on such a failure instead.",
                UserWarning,
                stacklevel=2,
            )

    def _evaluate(self, model: Any, step: int, kind: ModelKind) -> EvaluationReport:
        """Generate, score, write and log one evaluation.

        ``base`` runs with the adapter disabled (a model without one is
        evaluated as it is, before its first step); ``adapter`` is the model as
        trained so far, identified by the digest of its trainable parameters.
        """
        prepared = self._prepared
        if prepared is None or self._output_dir is None:
            raise ConfigError("SommelierCallback evaluated before on_train_begin prepared it")
        self._evaluated.add(step)
        out = self._output_dir / f"step-{step}"
        shutil.rmtree(out, ignore_errors=True)  # a previous training run's files are stale
        adapter = None
        if kind == "adapter":
            adapter = {"source": f"training:step-{step}", "sha256": trainable_digest(model)}
        fingerprint = {
            "backend": "transformers-training",
            "model_identity": prepared.identity.to_dict(),
            "adapter": adapter,
        }
        adapter_off = (
            model.disable_adapter()
            if kind == "base" and hasattr(model, "disable_adapter")
            else contextlib.nullcontext()
        )
        started = time.perf_counter()
        with _evaluation_mode(model, self._tokenizer), adapter_off:
            # Built in evaluation mode (the pad token it reads may be set only there), and
            # closed when generation ends, however it ends: the trainer keeps its model.
            generator = _TrainingModelGenerator(
                model, self._tokenizer, fingerprint, self._keep_special_tokens
            )
            with contextlib.closing(generator):
                paths = run_generation(
                    prepared.split.examples,
                    generator,
                    decoding=self._decoding,
                    model_kind=kind,
                    out_dir=out,
                    progress=False,
                )
        generated = time.perf_counter()
        records = [record for path in paths.values() for record in read_generations(path)]
        scored = self._score(
            prepared.split,
            records,
            model_kind=kind,
            model_identity=prepared.identity,
            adapter=adapter,
        )
        report = EvaluationReport.from_run(scored)
        report_path = write_evaluation_report(out / EVALUATION_REPORT_FILENAME, report)
        self._log(prepared.run_id, step, report, report_path)
        self.reports[step] = report
        self.timings[step] = (generated - started, time.perf_counter() - generated)
        return report

    @staticmethod
    def _log(run_id: str, step: int, report: EvaluationReport, report_path: Path) -> None:
        from sommelier_mlflow.integration import (
            evaluation_metric_keys,
            log_artifact_files,
            log_checkpoint_model,
        )

        keys = {
            f"{METRIC_PREFIX}{key}": value for key, value in evaluation_metric_keys(report).items()
        }
        # The run's metrics on the loss's step axis, and the checkpoint's LoggedModel.
        log_checkpoint_model(report.identity, keys, run_id=run_id, step=step)
        log_artifact_files(
            [report_path], f"{ARTIFACT_ROOT}/step-{step}", root=report_path.parent, run_id=run_id
        )


def _resolve_run() -> tuple[str, bool]:
    """The run the trainer logs to (the active one), or a new run; and whether it is new."""
    import mlflow

    from sommelier_mlflow.integration import tracking_errors

    with tracking_errors("start the training run"):
        active = mlflow.active_run()
        if active is not None:
            return str(active.info.run_id), False
        return str(mlflow.start_run().info.run_id), True
