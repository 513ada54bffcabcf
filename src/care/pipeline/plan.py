"""``care run --check``: what a run of a config would do, checked, without doing it (the plan).

:func:`plan_run` checks the run folder as :func:`care.pipeline.run.run_pipeline` would (a folder holding something
else, a run with other settings, an input changed since a resumed run read it), reads every input with the
preflight (:func:`care.pipeline.preflight.check_inputs`) and lists the steps in order: what each reads and writes
and whether it runs, resumes a failed or interrupted attempt, runs again (``--redo``) or is already done. It trains
nothing and writes nothing: no run folder, no ``run.log``, no cache. :func:`format_plan` is the text
``care run --check`` prints.

Example::

    from care.pipeline.config import load_run_config
    from care.pipeline.plan import format_plan, plan_run

    print(format_plan(plan_run(load_run_config("my_run.yaml"), "runs/mine")))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.pipeline.config import STEPS, RunConfig
from care.pipeline.context import RunContext
from care.pipeline.manifest import DONE, FAILED, StepRecord
from care.pipeline.preflight import check_inputs, input_digests
from care.pipeline.run import check_redo, check_unchanged_inputs, earlier_run
from care.pipeline.served_vocabulary import SERVED_FOLDER, prune_enabled

#: What a planned step will do (:attr:`PlannedStep.status`).
RUNS, RESUMES, REDONE, SKIPPED = "runs", "resumes", "runs again (--redo)", "already done, skipped"
#: Where the steps' outputs land in the run folder (:mod:`care.pipeline.context`'s layout).
TRAIN_FILE = "label/train.jsonl"


@dataclass
class PlannedStep:
    """One step of the plan.

    Attributes:
        name: the step (:data:`care.pipeline.config.STEPS`).
        status: :data:`RUNS`, :data:`RESUMES` (an earlier attempt failed or was interrupted: ``note`` says which),
            :data:`REDONE` or :data:`SKIPPED`.
        reads / writes: what it reads (config keys with their values, run-folder paths) and writes (run-folder paths).
        note: why it resumes (the earlier attempt's error), else empty.
    """

    name: str
    status: str
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class RunPlan:
    """What :func:`plan_run` found: the run would do this.

    Attributes:
        output: the run folder.
        resumes: it holds an earlier run of the same settings that the run continues.
        fresh: ``--fresh``: an earlier run there would be deleted first.
        steps: the steps that would run or be skipped, in order.
        left_out: the pipeline's other steps, ``{step: why}`` (not asked for with ``steps`` / ``--step``, or no work).
        models: ``{role: model spec}`` the run names (CARE's towers, the teacher, the reference rows, baselines).
        seed / threads: the run's seed and torch threads (0: the library default).
        inputs: what the preflight read, counted (:func:`care.pipeline.preflight.check_inputs`).
    """

    output: Path
    resumes: bool
    fresh: bool
    steps: list[PlannedStep]
    left_out: dict[str, str]
    models: dict[str, str]
    seed: int
    threads: int
    inputs: dict[str, Any]


def _step_files(step: str, config: RunConfig) -> tuple[list[str], list[str]]:
    """``(reads, writes)`` of ``step`` under ``config``, for a person to read."""
    inputs, models = config.inputs, config.models
    tasks = ", ".join(inputs.tasks)
    corpus = f"inputs.corpus ({inputs.corpus})" if inputs.corpus else f"the main task's corpus ({inputs.tasks[0]})"
    if step == "curate":
        documents = (f"inputs.raw_documents ({inputs.raw_documents})" if inputs.raw_documents
                     else f"the positives of inputs.train_file ({inputs.train_file})")
        return ([f"inputs.raw_queries ({inputs.raw_queries})", documents, f"curate.encoder ({config.curate.encoder})"],
                ["curate/"])
    if step == "label":
        reads = ["curate/", f"curate.judges ({config.curate.judges})" if config.curate.judges
                 else f"the offline judge on curate.encoder ({config.curate.encoder})"] if inputs.raw_queries else []
        if inputs.train_file:
            reads.append(f"inputs.train_file ({inputs.train_file})")
        return reads, [TRAIN_FILE, "label/validation/"]
    if step == "train_care":
        reads = [TRAIN_FILE, f"models.query ({models.query})", f"models.document ({models.document})"]
        if config.recipes.care.config_dir:
            reads.append(f"recipes.care.config_dir ({config.recipes.care.config_dir})")
        if prune_enabled(config.recipes.care):  # the served query tower's vocabulary: the run's own texts
            cut = f"models/care/{SERVED_FOLDER}/ (query vocabulary cut, when validation keeps it)"
            return [*reads, corpus], ["models/care/", cut]
        return reads, ["models/care/"]
    if step == "train_student":
        return [TRAIN_FILE, f"models.teacher ({models.teacher})"], ["models/student/"]
    if step == "train_baselines":
        return [TRAIN_FILE], [f"models/baselines/{name}/" for name in config.recipes.baselines]
    if step == "evaluate":
        return ["models/", f"inputs.tasks ({tasks})", "label/validation/"], ["eval/"]
    if step == "latency":
        return ["models/", f"the main task's queries ({inputs.tasks[0]})"], ["eval/latency.json"]
    if step == "index":
        return ["eval/ (the best trained model)", corpus], ["index/"]
    return ["eval/"], ["results.md", "results.json", "quality_vs_qps.png"]


def _status(record: StepRecord | None, redo: bool) -> tuple[str, str]:
    """``(status, note)`` of a step whose record in the earlier run's manifest is ``record`` (``None``: none)."""
    if record is None:
        return RUNS, ""
    if redo:
        return REDONE, ""
    if record.status == DONE:
        return SKIPPED, ""
    return RESUMES, f"failed last time: {record.error}" if record.status == FAILED else "interrupted last time"


def _models(config: RunConfig) -> dict[str, str]:
    """``{role: spec}`` of the models the run names (only those of the recipes it trains)."""
    models: dict[str, str] = {}
    recipes = config.recipes
    if recipes.care.enabled or recipes.baselines:
        models.update({"models.query": config.models.query, "models.document": config.models.document})
        if recipes.care.query_speedup is not None:
            models["recipes.care.query_speedup"] = f"{recipes.care.query_speedup}x (picks the query tower's depth)"
    if recipes.student.enabled or recipes.student.symmetric:
        models["models.teacher"] = config.models.teacher
    if config.inputs.raw_queries:
        models["curate.encoder"] = config.curate.encoder
    models.update({f"models.references[{label}]": spec for label, spec in config.models.references.items()})
    models.update({f"recipes.baselines[{name}]": entry.label or name for name, entry in recipes.baselines.items()})
    return models


def plan_run(config: RunConfig, output: str | Path, *, fresh: bool = False, redo: Sequence[str] = ()) -> RunPlan:
    """Check a run of ``config`` into ``output`` as :func:`care.pipeline.run.run_pipeline` would, and say what it
    would do; nothing is trained or written.

    Args:
        config: the settings (:func:`care.pipeline.config.load_run_config`).
        output: the run folder (it may not exist yet).
        fresh / redo: as for :func:`care.pipeline.run.run_pipeline`.
    Returns:
        The plan (:class:`RunPlan`).
    Raises:
        CareError: what the run would refuse before its first step: a folder holding something else, a run with
            other settings, an input changed since the steps so far read it, an unknown ``--redo`` step, an input
            that cannot be found (naming its config key).
        DataFormatError: a bad input file, naming the config key, file, line and field.
    """
    root = Path(output)
    check_redo(redo)
    manifest = earlier_run(config, root, fresh)
    records = dict(manifest.steps) if manifest is not None else {}
    if manifest is not None:  # as the run forgets the --redo steps (in memory only: the plan never saves it)
        manifest.steps = {name: record for name, record in records.items() if name not in redo}
    ctx = RunContext(config, root, manifest)
    summary = check_inputs(ctx)
    selected = config.selected_steps
    if manifest is not None and not all(manifest.is_done(name) for name in selected):
        check_unchanged_inputs(manifest, input_digests(ctx))
    steps = []
    for name in selected:
        status, note = _status(records.get(name), name in redo)
        reads, writes = _step_files(name, config)
        steps.append(PlannedStep(name, status, reads, writes, note))
    applicable = config.applicable_steps()
    left_out = {name: "not asked for (steps / --step)" if name in applicable else "no work in this config"
                for name in STEPS if name not in selected}
    return RunPlan(root, manifest is not None, fresh, steps, left_out, _models(config), config.seed, config.threads,
                   summary)


def format_plan(plan: RunPlan) -> str:
    """The plan as the lines ``care run --check`` prints: the folder, the steps in order (status, reads, writes),
    the steps left out, the models, seed and threads, and what the inputs hold."""
    if plan.fresh:
        folder = f"{plan.output} (--fresh: an earlier run there is deleted first)"
    else:
        folder = f"{plan.output} ({'resumes the run there' if plan.resumes else 'a new run'})"
    lines = [f"checked: the config and every input; the run would write to {folder}", "", "steps:"]
    for number, step in enumerate(plan.steps, 1):
        note = f" ({step.note})" if step.note else ""
        lines.append(f"  {number}. {step.name}: {step.status}{note}")
        lines.append(f"       reads:  {'; '.join(step.reads) or '-'}")
        lines.append(f"       writes: {'; '.join(step.writes)}")
    if plan.left_out:
        lines.append("left out: " + ", ".join(f"{name} ({why})" for name, why in plan.left_out.items()))
    lines += ["", "models:"]
    lines += [f"  {role}: {spec}" for role, spec in plan.models.items()]
    threads = f"{plan.threads}" if plan.threads else "0 (the library default)"
    lines += ["", f"seed: {plan.seed}; threads: {threads}", f"inputs: {_counts(plan.inputs)}"]
    return "\n".join(lines)


def _counts(summary: dict[str, Any]) -> str:
    """The preflight's counts on one line (``train_rows 120; tasks: T (documents 50, queries 20, ...)``)."""
    parts = []
    for key, value in summary.items():
        if key == "tasks":
            parts += [f"task {name} ({', '.join(f'{k} {v}' for k, v in counts.items()) or 'fetched when evaluated'})"
                      for name, counts in value.items()]
        else:
            parts.append(f"{key} {value}")
    return "; ".join(parts)
