"""The last step of a run: one results table (quality per task + query latency), the trained models
ranked on the main task, the quality-vs-QPS figure, and the ``care serve`` command for the index built
with the best of them."""

from __future__ import annotations

import json
import logging
import shlex
from typing import Any

from care.bench.result import TaskResult
from care.data.io import atomic_write, write_json
from care.pipeline.context import RunContext
from care.pipeline.evaluate import INDEX_FOLDER, LATENCY_FILE, load_results, model_labels
from care.pipeline.sources import tasks

logger = logging.getLogger(__name__)

RESULTS_MD, RESULTS_JSON, FIGURE_PNG = "results.md", "results.json", "quality_vs_qps.png"
SCORE_DIGITS = 4
MS_PER_S = 1000.0


def serve_command(ctx: RunContext) -> str:
    """The exact command that serves the run's index (its query side loads from the index's manifest)."""
    return f"care serve --index {shlex.quote(str(ctx.root / INDEX_FOLDER))}"


def task_names(ctx: RunContext) -> list[str]:
    """The evaluated tasks' names (as results record them), in config order."""
    return [task.name for task in tasks(ctx).values()]


def results_rows(ctx: RunContext, results: list[TaskResult], latency_ms: dict[str, float]) -> list[dict[str, Any]]:
    """One row per model: main score per task, median query latency (ms) and batch-1 queries/s."""
    by_key = {(r.model, r.task): r for r in results}
    rows = []
    for label in model_labels(ctx):
        scores = {t: round(by_key[(label, t)].main_value, SCORE_DIGITS) for t in task_names(ctx) if (label, t) in by_key}
        ms = latency_ms.get(label)
        rows.append({"model": label, "scores": scores, "query_latency_ms": ms,
                     "qps_batch1": round(MS_PER_S / ms, 1) if ms else None})
    return rows


def ranking(ctx: RunContext, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trained models, best first on the main task (``{"model", "score"}``)."""
    main = task_names(ctx)[0]
    trained = ctx.trained_models()
    scored = [{"model": r["model"], "score": r["scores"][main]} for r in rows if r["model"] in trained and main in r["scores"]]
    return sorted(scored, key=lambda r: -r["score"])


def markdown_table(ctx: RunContext, rows: list[dict[str, Any]], results: list[TaskResult]) -> str:
    """``| model | <task> (<metric>) ... | query latency (ms) | queries/s |``."""
    metric = {r.task: r.main_score for r in results}
    names = task_names(ctx)
    header = [f"{t} ({metric.get(t, '?')})" for t in names]
    lines = ["| model | " + " | ".join(header) + " | query latency (ms, median, batch 1) | queries/s (batch 1) |",
             "|---|" + "---|" * len(header) + "---|---|"]
    for row in rows:
        cells = [f"{row['scores'][t]:.{SCORE_DIGITS}f}" if t in row["scores"] else "–" for t in names]
        ms = f"{row['query_latency_ms']:.2f}" if row["query_latency_ms"] is not None else "– (lexical)"
        qps = f"{row['qps_batch1']:.0f}" if row["qps_batch1"] is not None else "–"
        lines.append(f"| {row['model']} | " + " | ".join(cells) + f" | {ms} | {qps} |")
    return "\n".join(lines) + "\n"


def _figure(ctx: RunContext, rows: list[dict[str, Any]], results: list[TaskResult]) -> str | None:
    main = task_names(ctx)[0]
    points = [(r["model"], r["scores"][main], r["qps_batch1"]) for r in rows if main in r["scores"] and r["qps_batch1"]]
    if not points:
        return None
    from care.bench.figure import QualityPoint, quality_speed_figure

    metric = next((r.main_score for r in results if r.task == main), "score")
    return str(quality_speed_figure([QualityPoint(*p) for p in points], ctx.root / FIGURE_PNG,
                                    ylabel=f"{metric} on {main}", xlabel="queries/s, one query at a time on CPU (log)"))


def step_report(ctx: RunContext) -> dict[str, Any]:
    """Write ``results.md`` / ``results.json`` / ``quality_vs_qps.png`` in the run folder; returns them."""
    results = load_results(ctx)
    latency_path = ctx.root / "eval" / LATENCY_FILE
    latency = json.loads(latency_path.read_text(encoding="utf-8"))["median_ms"] if latency_path.is_file() else {}
    rows = results_rows(ctx, results, latency)
    table = markdown_table(ctx, rows, results)
    ranked = ranking(ctx, rows)
    index = ctx.step_outputs("index")
    command = serve_command(ctx)
    lines = [f"# care run results ({ctx.root})", "", table]
    if ranked:
        main = task_names(ctx)[0]
        lines += [f"Trained models on {main}, best first: "
                  + ", ".join(f"{r['model']} ({r['score']:.{SCORE_DIGITS}f})" for r in ranked) + ".", ""]
    if index:
        lines += [f"Index: {index['documents']} documents with {index['label']} ({index['model']}). "
                  f"Serve it: `{command}`", ""]
    with atomic_write(ctx.root / RESULTS_MD) as fh:
        fh.write("\n".join(lines))
    summary = {"table": table, "rows": rows, "main_task": task_names(ctx)[0], "ranking": ranked,
               "figure": _figure(ctx, rows, results),
               "index": index, "serve_command": command}
    write_json(ctx.root / RESULTS_JSON, summary)
    return summary
