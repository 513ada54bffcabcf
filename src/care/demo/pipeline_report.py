"""Demo step 6: one results table (quality per task + query latency), the quality-vs-QPS figure, and
the ``care serve`` command for what was just built."""

from __future__ import annotations

import logging
import shlex
from typing import Any

from care.bench.figure import speed_of
from care.bench.latency import LatencyReport, ModelLatency, format_latency, latency_notes
from care.bench.result import TaskResult
from care.data.io import atomic_write, write_json
from care.demo.pipeline_context import DemoContext
from care.demo.pipeline_eval import INDEX_FOLDER, LATENCY_FILE, load_results, model_labels
from care.demo.tasks import RETRIEVAL_TASK

logger = logging.getLogger(__name__)

RESULTS_MD, RESULTS_JSON, FIGURE_PNG = "results.md", "results.json", "quality_vs_qps.png"
SCORE_DIGITS = 4


def serve_command(ctx: DemoContext) -> str:
    """The exact command that serves the CARE index built by the demo (its query tower loads from the index)."""
    return f"care serve --index {shlex.quote(str(ctx.root / INDEX_FOLDER))}"


def results_rows(ctx: DemoContext, results: list[TaskResult], report: LatencyReport | None) -> list[dict[str, Any]]:
    """One row per model: main score per task, query latency (p50 / p10 / p90 ms) and batch-1 queries/s
    (``None`` where the speed is not comparable: overhead-dominated, or the self-check failed)."""
    by_key = {(r.model, r.task): r for r in results}
    rows = []
    for label in model_labels(ctx):
        scores = {t: round(by_key[(label, t)].main_value, SCORE_DIGITS) for t in ctx.config.tasks if (label, t) in by_key}
        timed = report.models.get(label) if report is not None else None
        qps = speed_of(report, label)
        rows.append({"model": label, "scores": scores, "query_latency_ms": timed.p50_ms if timed else None,
                     "query_latency": timed.to_dict() if timed else None,
                     "qps_batch1": round(qps, 1) if qps else None})
    return rows


def markdown_table(ctx: DemoContext, rows: list[dict[str, Any]], results: list[TaskResult]) -> str:
    """``| model | <task> (<metric>) ... | query latency (ms) | queries/s |``."""
    metric = {r.task: r.main_score for r in results}
    header = [f"{t} ({metric.get(t, '?')})" for t in ctx.config.tasks]
    lines = ["| model | " + " | ".join(header) + " | query latency (ms, p50 (p10, p90), batch 1) | queries/s (batch 1) |",
             "|---|" + "---|" * len(header) + "---|---|"]
    for row in rows:
        cells = [f"{row['scores'][t]:.{SCORE_DIGITS}f}" if t in row["scores"] else "–" for t in ctx.config.tasks]
        timed = row.get("query_latency")
        ms = format_latency(ModelLatency(**timed)) if timed else "– (lexical)"
        qps = (f"{row['qps_batch1']:.0f}" if row["qps_batch1"] is not None
               else "– (not comparable)" if timed else "–")
        lines.append(f"| {row['model']} | " + " | ".join(cells) + f" | {ms} | {qps} |")
    return "\n".join(lines) + "\n"


def step_report(ctx: DemoContext) -> dict[str, Any]:
    """Write ``results.md`` / ``results.json`` / ``quality_vs_qps.png`` in the run folder; returns them."""
    import json

    results = load_results(ctx)
    latency_path = ctx.root / "eval" / LATENCY_FILE
    data = json.loads(latency_path.read_text(encoding="utf-8")) if latency_path.is_file() else {}
    if data and "models" not in data:
        logger.warning("%s is from an older care; rerun with --redo latency to time the models again", latency_path)
    report = LatencyReport.from_dict(data) if "models" in data else None
    rows = results_rows(ctx, results, report)
    table = markdown_table(ctx, rows, results) + latency_notes(report)
    command = serve_command(ctx)
    figure = None
    task = RETRIEVAL_TASK if RETRIEVAL_TASK in ctx.config.tasks else ctx.config.tasks[0]
    points = [(f"{r['model']} [{r['query_latency'].get('engine') or '?'}]" if r["qps_batch1"] else r["model"],
               r["scores"][task], r["qps_batch1"]) for r in rows if task in r["scores"] and r["query_latency"] is not None]
    if points:
        from care.bench.figure import QualityPoint, quality_speed_figure

        metric = next((r.main_score for r in results if r.task == task), "score")
        figure = str(quality_speed_figure([QualityPoint(*p) for p in points], ctx.root / FIGURE_PNG,
                                          ylabel=f"{metric} on {task}",
                                          xlabel="queries/s, one query at a time on CPU (log)"))
    with atomic_write(ctx.root / RESULTS_MD) as fh:
        fh.write(f"# care demo results ({ctx.root})\n\n{table}\nServe the CARE index: `{command}`\n")
    summary = {"table": table, "rows": rows, "figure": figure, "serve_command": command}
    write_json(ctx.root / RESULTS_JSON, summary)
    return summary
