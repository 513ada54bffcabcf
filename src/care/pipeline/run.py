"""``care run``: the whole CARE pipeline on the user's own data, from one config, resumable.

Steps (:data:`care.pipeline.config.STEPS`), each a function of the run context:

1. ``curate`` — anonymise + diversify the raw questions and documents (:mod:`care.pipeline.data`);
2. ``label`` — judge candidates (offline embedding judge, or LLM judges), add the rows to the ready
   training file, top up hard negatives, hold out the validation split (:mod:`care.train.recipes.validation`);
3. ``train_care`` / ``train_student`` / ``train_baselines`` — the configured recipes (:mod:`care.pipeline.train`);
4. ``evaluate`` / ``latency`` — every model on every task, median single-query latency side by side
   (:mod:`care.pipeline.evaluate`);
5. ``index`` — ``care index build`` with the best trained model on the validation split (else the main task);
6. ``report`` — one table, the ranking, the quality-vs-QPS figure, the ``care serve`` command
   (:mod:`care.pipeline.report`).

Before the first step every input file is read with the reader its step uses
(:mod:`care.pipeline.preflight`): a bad line fails the run in seconds, naming the file, line and field.
The manifest keeps each input file's SHA-256: a resumed run whose steps so far read a file that has changed
since is refused, naming the file (their outputs and checkpoints came from its earlier content).
Everything lands in one run folder with a ``manifest.json``; a rerun skips finished steps and a
killed or failed run continues where it stopped (:mod:`care.pipeline.manifest`). ``care demo`` is
this on the config shipped as ``care/pipeline/configs/demo.yaml``.

Example::

    from care.pipeline.config import load_run_config
    from care.pipeline.run import run_pipeline

    report = run_pipeline(load_run_config("my_run.yaml"), "runs/mine")
    print(report.table, report.serve_command)
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.pipeline.config import RunConfig
from care.pipeline.console import FILE_ONLY, LOG_FILE
from care.pipeline.context import RunContext
from care.pipeline.data import step_curate, step_label
from care.pipeline.evaluate import step_evaluate, step_index
from care.pipeline.latency import step_latency
from care.pipeline.manifest import DONE, MANIFEST_FILE, RunManifest
from care.pipeline.preflight import check_inputs, input_digests
from care.pipeline.query_budget import with_query_budget
from care.pipeline.report import serve_command, step_report
from care.pipeline.served_vocabulary import with_served_vocabulary
from care.pipeline.train import step_train_baselines, step_train_care, step_train_student

logger = logging.getLogger(__name__)

StepFunction = Callable[[RunContext], dict[str, Any]]

#: The function of every step (looked up at run time, so tests can replace one). The steps that take CARE's query
#: base run on the query tower ``recipes.care.query_speedup`` picks, when it is set (:mod:`care.pipeline.query_budget`);
#: CARE's served model then gets its query tower cut to the run's vocabulary (:mod:`care.pipeline.served_vocabulary`).
STEPS: dict[str, StepFunction] = {
    "curate": step_curate,
    "label": step_label,
    "train_care": with_query_budget(with_served_vocabulary(step_train_care)),
    "train_student": step_train_student,
    "train_baselines": with_query_budget(step_train_baselines),
    "evaluate": step_evaluate,
    "latency": step_latency,
    "index": step_index,
    "report": step_report,
}


class StepFailed(Exception):
    """A step of a run raised (``__cause__``: what it raised); the manifest marks it ``failed``, a rerun resumes it.

    Attributes:
        step: the step's name; number / total: its place in the run's steps.
        folder: the run folder; seconds: how long the step ran.
    """

    def __init__(self, step: str, number: int, total: int, folder: Path, seconds: float, cause: BaseException) -> None:
        self.step, self.number, self.total, self.folder, self.seconds = step, number, total, folder, seconds
        super().__init__(f"step {number}/{total} {step} failed after {seconds:.0f} s: {type(cause).__name__}: {cause}")


@dataclass
class RunReport:
    """What :func:`run_pipeline` returns.

    Attributes:
        output: the run folder.
        table: the markdown results table (empty when the report step did not run).
        ranking: the trained models, best first on ``ranked_on`` (the validation split when the run has one,
            else the main task, ``main_task``).
        warnings: why the indexed model should not be served as it is (it scores below e5 zero-shot or the
            symmetric small model on validation), as sentences.
        serve_command: the command that serves the index built by the run.
        figure: the quality-vs-QPS PNG, when written.
        steps_run / steps_skipped: steps executed now / found finished by an earlier run.
        seconds: wall time of this call.
        manifest: path of ``manifest.json``.
    """

    output: Path
    table: str = ""
    ranking: list[dict[str, Any]] = field(default_factory=list)
    main_task: str = ""
    ranked_on: str = ""
    warnings: list[str] = field(default_factory=list)
    serve_command: str = ""
    figure: str | None = None
    steps_run: list[str] = field(default_factory=list)
    steps_skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    manifest: Path | None = None


def earlier_run(config: RunConfig, root: Path, fresh: bool) -> RunManifest | None:
    """The manifest of the run in ``root`` that a run of ``config`` resumes (``None``: it starts a new run there),
    checked as :func:`run_pipeline` checks it; reads only, writes nothing (``care run --check``).

    Raises:
        CareError: ``root`` holds something else than a care run, or a run with other settings (unless ``fresh``:
            then that run would be deleted).
    """
    if fresh:
        if _contents(root) and not (root / MANIFEST_FILE).is_file():
            raise CareError(f"--fresh: {root} is not a care run folder (no {MANIFEST_FILE}); not deleting it. "
                            "Choose another output folder")
        return None
    manifest = RunManifest.load(root)
    if manifest is None:
        if _contents(root):
            raise CareError(f"{root} exists and is not a care run folder (no {MANIFEST_FILE}); "
                            "choose another output folder")
        return None
    previous = RunConfig.from_dict(manifest.config, source=str(manifest.path)).resume_key()
    changed = sorted(_changed(previous, config.resume_key()))
    if changed:
        raise CareError(f"{root} holds a run with other settings ({', '.join(changed)}); "
                        "rerun with --fresh to start over, or pick another output folder")
    return manifest


def check_redo(redo: Sequence[str]) -> None:
    """Refuse ``--redo`` steps that do not exist.

    Raises:
        CareError: naming them and the steps there are.
    """
    unknown = [s for s in redo if s not in STEPS]
    if unknown:
        raise CareError(f"--redo: unknown step(s) {unknown}; choose from {', '.join(STEPS)}")


def _prepare_folder(config: RunConfig, root: Path, fresh: bool) -> RunManifest:
    """Load (resume) or create the run folder's manifest; ``fresh`` deletes an earlier run first."""
    manifest = earlier_run(config, root, fresh)
    if fresh and root.exists():
        logger.info("--fresh: deleting the earlier run in %s", root)
        for path in _contents(root):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    if manifest is None:
        root.mkdir(parents=True, exist_ok=True)
        manifest = RunManifest(root, config.to_dict())
    else:
        manifest.config = config.to_dict()
    manifest.save()
    return manifest


def _contents(root: Path) -> list[Path]:
    """What a folder holds besides the log of the run being started."""
    return [p for p in root.iterdir() if p.name != LOG_FILE] if root.is_dir() else []


def _changed(before: dict[str, Any], after: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the fields that differ between two nested settings dicts."""
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and a and b:
            out += _changed(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}")
    return out


def run_pipeline(config: RunConfig, output: str | Path, *, fresh: bool = False,
                 redo: Sequence[str] = (), allow_dirty: bool = True) -> RunReport:
    """Run (or resume) the pipeline into ``output``; returns the table, the ranking and the serve command.

    Args:
        config: the settings.
        output: the run folder.
        fresh: delete an earlier run in ``output`` and start over.
        redo: steps to run again even when finished (e.g. ``["latency", "report"]`` to re-time the
            query sides on a quieter machine); later steps that read their outputs are not redone.
        allow_dirty: start from a checkout of care with uncommitted changes (``care run`` refuses one unless
            ``--allow-dirty``); either way the manifest's ``code`` keeps the commit, and the diff's SHA-256 when dirty.
    Raises:
        CareError: the output folder holds something else, or a run with other settings; care's checkout is dirty
            and ``allow_dirty`` is off.
        DataFormatError: a bad input file (:func:`care.pipeline.preflight.check_inputs`, before any step).
        StepFailed: a step raised (the step's exception is its ``__cause__``; the traceback is logged to
            ``run.log`` only, :data:`care.pipeline.console.FILE_ONLY`); the manifest marks that step ``failed``
            and a rerun resumes it. An interruption (``KeyboardInterrupt``) marks it too and propagates as is.
    """
    from care.bench.record import code_state, require_clean

    started = time.perf_counter()
    root = Path(output)
    check_redo(redo)
    code = require_clean(code_state(), allow_dirty=allow_dirty, where="care run")  # the code that runs, at its start
    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    manifest = _prepare_folder(config, root, fresh)
    manifest.threads = torch.get_num_threads()  # the threads in force (0 in the config: the library's choice)
    manifest.save()
    manifest.pin_code(code.to_dict())
    for name in redo:
        manifest.steps.pop(name, None)
    ctx = RunContext(config, root, manifest)
    report = RunReport(root, manifest=manifest.path)
    steps = config.selected_steps
    if not all(manifest.is_done(name) for name in steps):
        check_inputs(ctx)  # every input read now: a bad line fails in seconds, never after training
        _record_inputs(manifest, input_digests(ctx))
    for number, name in enumerate(steps, 1):
        if manifest.is_done(name):
            logger.info("step %d/%d %s: already done, skipped", number, len(steps), name)
            report.steps_skipped.append(name)
            continue
        logger.info("step %d/%d %s: running", number, len(steps), name)
        manifest.start(name)
        step_started = time.perf_counter()
        try:
            outputs = STEPS[name](ctx)
        except Exception as exc:
            seconds = time.perf_counter() - step_started
            manifest.fail(name, seconds, exc)
            logger.error("step %d/%d %s failed after %.0f s", number, len(steps), name, seconds, exc_info=True,
                         extra={FILE_ONLY: True})
            raise StepFailed(name, number, len(steps), root, seconds, exc) from exc
        except BaseException as exc:  # interrupted (Ctrl-C): not the step's fault; stop as asked
            manifest.fail(name, time.perf_counter() - step_started, exc)
            logger.warning("step %d/%d %s interrupted; rerun the same command to resume", number, len(steps), name)
            raise
        seconds = time.perf_counter() - step_started
        manifest.finish(name, seconds, outputs)
        report.steps_run.append(name)
        logger.info("step %d/%d %s: done in %.1f s%s", number, len(steps), name, seconds, _summary(name, outputs))
    record = manifest.steps.get("report")
    if record is not None and record.status == DONE:
        report.table = record.outputs.get("table", "")
        report.figure = record.outputs.get("figure")
        report.ranking = record.outputs.get("ranking", [])
        report.main_task = record.outputs.get("main_task", "")
        report.ranked_on = record.outputs.get("ranked_on", report.main_task)
        report.warnings = record.outputs.get("warnings", [])
    report.serve_command = serve_command(ctx)
    report.seconds = time.perf_counter() - started
    return report


def _record_inputs(manifest: RunManifest, digests: dict[str, str]) -> None:
    """Keep ``digests`` in the manifest; refuse them when a file has other content than when the run's steps so
    far (finished, failed or interrupted: their outputs and checkpoints) read it (:func:`check_unchanged_inputs`)."""
    check_unchanged_inputs(manifest, digests)
    manifest.inputs = {**manifest.inputs, **digests}
    manifest.save()


def check_unchanged_inputs(manifest: RunManifest, digests: dict[str, str]) -> None:
    """Refuse ``digests`` (:func:`care.pipeline.preflight.input_digests`) when a file has other content than when
    the run's steps so far read it; reads only.

    Raises:
        CareError: naming the changed file(s) and those steps, and how to go on.
    """
    changed = sorted(path for path, sha in digests.items() if manifest.inputs.get(path, sha) != sha)
    if changed and manifest.steps:
        steps = ", ".join(f"{name} {record.status}" for name, record in manifest.steps.items())
        raise CareError(f"{', '.join(changed)} changed since the run in {manifest.folder} read "
                        f"{'it' if len(changed) == 1 else 'them'}: its steps so far ({steps}) used the earlier "
                        "content. Restore the file, or rerun with --fresh to start over (or write the run to "
                        "another folder)")


def _summary(step: str, outputs: dict[str, Any]) -> str:
    """One short line of what a step produced, for the console."""
    if "models" in outputs:
        return f" ({len(outputs['models'])} model(s): {', '.join(outputs['models'])})"
    if step == "label":
        return f" ({outputs.get('train_rows')} training rows)"
    if step == "index":
        return f" ({outputs.get('documents')} documents, {outputs.get('label')})"
    if step == "curate":
        return "".join(f" ({k}: kept {v['kept']}, dropped {v['dropped']})" for k, v in outputs.items() if isinstance(v, dict))
    return ""
