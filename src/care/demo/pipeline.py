"""``care demo``: the whole CARE pipeline end to end on the embedded demo data, resumable.

Steps (:data:`care.demo.pipeline_config.DEMO_STEPS`), each a function of the run context:

1. ``curate`` — anonymise + diversify the raw demo questions and training answers (:mod:`care.demo.pipeline_data`);
2. ``label`` — judge candidates (offline embedding judge, or LLM judges from ``--judges``), merge with
   the shipped training file;
3. ``train_care`` / ``train_student`` — tiny symmetric small / large, CARE (init -> Stage I -> Stage II),
   and a student query encoder against frozen multilingual-e5-small (:mod:`care.demo.pipeline_train`);
4. ``evaluate`` / ``latency`` — every model plus BM25 and e5 on the demo tasks, median single-query
   latency side by side (:mod:`care.demo.pipeline_eval`);
5. ``index`` — ``care index build`` with the CARE document tower;
6. ``report`` — one table, the quality-vs-QPS figure, the ``care serve`` command (:mod:`care.demo.pipeline_report`).

Everything lands in one run folder with a ``manifest.json``; a rerun skips finished steps and a
killed or failed run continues where it stopped (see :mod:`care.demo.pipeline_manifest`).

Example::

    from care.demo.pipeline import run_demo
    from care.demo.pipeline_config import DemoRunConfig

    report = run_demo(DemoRunConfig(output="runs/demo"))
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

from care.demo.pipeline_config import DemoRunConfig
from care.demo.pipeline_context import DemoContext
from care.demo.pipeline_data import step_curate, step_label
from care.demo.pipeline_eval import step_evaluate, step_index, step_latency
from care.demo.pipeline_manifest import DONE, MANIFEST_FILE, RunManifest
from care.demo.pipeline_report import serve_command, step_report
from care.demo.pipeline_train import step_train_care, step_train_student
from care.errors import CareError

logger = logging.getLogger(__name__)

StepFunction = Callable[[DemoContext], dict[str, Any]]

#: The function of every step (looked up at run time, so tests can replace one).
STEPS: dict[str, StepFunction] = {
    "curate": step_curate,
    "label": step_label,
    "train_care": step_train_care,
    "train_student": step_train_student,
    "evaluate": step_evaluate,
    "latency": step_latency,
    "index": step_index,
    "report": step_report,
}


@dataclass
class DemoReport:
    """What :func:`run_demo` returns.

    Attributes:
        output: the run folder.
        table: the markdown results table (empty when the report step did not run).
        serve_command: the command that serves the index built by the run.
        figure: the quality-vs-QPS PNG, when written.
        steps_run / steps_skipped: steps executed now / found finished by an earlier run.
        seconds: wall time of this call.
        manifest: path of ``manifest.json``.
    """

    output: Path
    table: str = ""
    serve_command: str = ""
    figure: str | None = None
    steps_run: list[str] = field(default_factory=list)
    steps_skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    manifest: Path | None = None


def _prepare_folder(config: DemoRunConfig, fresh: bool) -> RunManifest:
    """Load (resume) or create the run folder's manifest; ``fresh`` deletes an earlier demo run first."""
    root = Path(config.output)
    if fresh and root.exists():
        if any(root.iterdir()) and not (root / MANIFEST_FILE).is_file():
            raise CareError(f"--fresh: {root} is not a care demo run folder (no {MANIFEST_FILE}); not deleting it. "
                            "Choose another --output")
        logger.info("--fresh: deleting %s", root)
        shutil.rmtree(root)
    manifest = RunManifest.load(root)
    if manifest is None:
        if root.exists() and any(root.iterdir()):
            raise CareError(f"{root} exists and is not a care demo run folder (no {MANIFEST_FILE}); "
                            "choose another --output")
        root.mkdir(parents=True, exist_ok=True)
        manifest = RunManifest(root, config.to_dict())
    else:
        previous = DemoRunConfig.from_dict(manifest.config).resume_key()
        changed = sorted(k for k, v in config.resume_key().items() if previous.get(k) != v)
        if changed:
            raise CareError(f"{root} holds a demo run with other settings ({', '.join(changed)}); "
                            "rerun with --fresh to start over, or pick another --output")
        manifest.config = config.to_dict()
    manifest.save()
    return manifest


def run_demo(config: DemoRunConfig | None = None, *, fresh: bool = False, redo: Sequence[str] = ()) -> DemoReport:
    """Run (or resume) the demo pipeline; returns the table, the figure and the serve command.

    Args:
        config: the settings (defaults: the full demo into ``runs/demo``).
        fresh: delete an earlier run in ``config.output`` and start over.
        redo: steps to run again even when finished (e.g. ``["latency", "report"]`` to re-time the
            query sides on a quieter machine); later steps that read their outputs are not redone.
    Raises:
        CareError: the output folder holds something else, or a demo run with other settings.
        Exception: whatever a step raised; the manifest marks that step ``failed`` and a rerun resumes it.
    """
    config = config or DemoRunConfig()
    started = time.perf_counter()
    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    manifest = _prepare_folder(config, fresh)
    unknown = [s for s in redo if s not in STEPS]
    if unknown:
        raise CareError(f"--redo: unknown step(s) {unknown}; choose from {', '.join(STEPS)}")
    for name in redo:
        manifest.steps.pop(name, None)
    ctx = DemoContext(config, Path(config.output))
    report = DemoReport(Path(config.output), manifest=manifest.path)
    steps = config.selected_steps
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
        except BaseException as exc:
            manifest.fail(name, time.perf_counter() - step_started, exc)
            logger.error("step %d/%d %s failed after %.0f s: %s; rerun the same command to resume", number,
                         len(steps), name, time.perf_counter() - step_started, exc)
            raise
        seconds = time.perf_counter() - step_started
        manifest.finish(name, seconds, outputs)
        report.steps_run.append(name)
        logger.info("step %d/%d %s: done in %.1f s", number, len(steps), name, seconds)
    record = manifest.steps.get("report")
    if record is not None and record.status == DONE:
        report.table = record.outputs.get("table", "")
        report.figure = record.outputs.get("figure")
    report.serve_command = serve_command(ctx)
    report.seconds = time.perf_counter() - started
    return report
