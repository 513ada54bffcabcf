"""The last step of a run: one results table (quality per task + query latency), the trained models
ranked on the main task, the quality-vs-QPS figure, and the ``care serve`` command for the index built
with the best of them (and, with ``recipes.care.query_speedup``, the query tower the budget picked and why)."""

from __future__ import annotations

import json
import logging
import shlex
from typing import Any

from care.bench.figure import speed_of
from care.bench.latency import LatencyReport, ModelLatency, format_latency, latency_notes
from care.bench.result import TaskResult
from care.data.io import atomic_write, write_json
from care.pipeline.context import RunContext
from care.pipeline.evaluate import INDEX_FOLDER, LATENCY_FILE, load_results, model_labels, selection_task
from care.pipeline.query_budget import OUTPUT_KEY as QUERY_BUDGET_KEY
from care.pipeline.query_budget import report_lines as query_budget_lines
from care.pipeline.sources import evaluated_tasks

logger = logging.getLogger(__name__)

RESULTS_MD, RESULTS_JSON, FIGURE_PNG = "results.md", "results.json", "quality_vs_qps.png"
SCORE_DIGITS = 4


def serve_command(ctx: RunContext) -> str:
    """The exact command that serves the run's index (its query side loads from the index's manifest)."""
    return f"care serve --index {shlex.quote(str(ctx.root / INDEX_FOLDER))}"


def task_names(ctx: RunContext) -> list[str]:
    """The evaluated tasks' names (as results record them), in config order, then ``validation`` when the
    label step carved a validation split."""
    return [task.name for task in evaluated_tasks(ctx).values()]


def results_rows(ctx: RunContext, results: list[TaskResult], report: LatencyReport | None) -> list[dict[str, Any]]:
    """One row per model: main score per task, query latency (p50 / p10 / p90 ms) and batch-1 queries/s
    (``None`` where the speed is not comparable: overhead-dominated, or the self-check failed)."""
    by_key = {(r.model, r.task): r for r in results}
    rows = []
    for label in model_labels(ctx):
        scores = {t: round(by_key[(label, t)].main_value, SCORE_DIGITS) for t in task_names(ctx) if (label, t) in by_key}
        timed = report.models.get(label) if report is not None else None
        qps = speed_of(report, label)
        rows.append({"model": label, "scores": scores, "query_latency_ms": timed.p50_ms if timed else None,
                     "query_latency": timed.to_dict() if timed else None,
                     "qps_batch1": round(qps, 1) if qps else None})
    return rows


def ranking(ctx: RunContext, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trained models, best first on the task the index step chooses on (validation when there is a
    validation split, else the main task): ``{"model", "score"}``."""
    main = selection_task(ctx)
    trained = ctx.trained_models()
    scored = [{"model": r["model"], "score": r["scores"][main]} for r in rows if r["model"] in trained and main in r["scores"]]
    return sorted(scored, key=lambda r: -r["score"])


def markdown_table(ctx: RunContext, rows: list[dict[str, Any]], results: list[TaskResult]) -> str:
    """``| model | <task> (<metric>) ... | query latency (ms) | queries/s |``."""
    metric = {r.task: r.main_score for r in results}
    names = task_names(ctx)
    header = [f"{t} ({metric.get(t, '?')})" for t in names]
    lines = ["| model | " + " | ".join(header) + " | query latency (ms, p50 (p10, p90), batch 1) | queries/s (batch 1) |",
             "|---|" + "---|" * len(header) + "---|---|"]
    for row in rows:
        cells = [f"{row['scores'][t]:.{SCORE_DIGITS}f}" if t in row["scores"] else "–" for t in names]
        timed = row.get("query_latency")
        ms = format_latency(ModelLatency(**timed)) if timed else "– (lexical)"
        qps = (f"{row['qps_batch1']:.0f}" if row["qps_batch1"] is not None
               else "– (not comparable)" if timed else "–")
        lines.append(f"| {row['model']} | " + " | ".join(cells) + f" | {ms} | {qps} |")
    return "\n".join(lines) + "\n"


def _figure(ctx: RunContext, rows: list[dict[str, Any]], results: list[TaskResult]) -> str | None:
    main = task_names(ctx)[0]
    # a model whose speed is not comparable (overhead-dominated, failed self-check) has qps None: the
    # figure keeps it off the speed axis, in its "not comparable" strip
    points = [(f"{r['model']} [{r['query_latency'].get('engine') or '?'}]" if r["qps_batch1"] else r["model"],
               r["scores"][main], r["qps_batch1"]) for r in rows if main in r["scores"] and r["query_latency"] is not None]
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
    data = json.loads(latency_path.read_text(encoding="utf-8")) if latency_path.is_file() else {}
    if data and "models" not in data:
        logger.warning("%s is from an older care; rerun with --redo latency to time the models again", latency_path)
    report = LatencyReport.from_dict(data) if "models" in data else None
    rows = results_rows(ctx, results, report)
    table = markdown_table(ctx, rows, results) + latency_notes(report)
    ranked = ranking(ctx, rows)
    index = ctx.step_outputs("index")
    command = serve_command(ctx)
    lines = [f"# care run results ({ctx.root})", "", table]
    if ranked:
        lines += [f"Trained models on {selection_task(ctx)}, best first: "
                  + ", ".join(f"{r['model']} ({r['score']:.{SCORE_DIGITS}f})" for r in ranked) + ".", ""]
    budget = ctx.step_outputs("train_care").get(QUERY_BUDGET_KEY)
    lines += query_budget_lines(budget)
    checks = ctx.step_outputs("train_care").get("validation")
    if checks:
        lines += ["CARE's stages on validation (each against the stage it started from):", ""]
        lines += [f"- {label}: {row['ndcg_at_10']:.{SCORE_DIGITS}f}"
                  + (f" ({row['delta']:+.{SCORE_DIGITS}f} vs {row['started_from']})" if row["delta"] is not None else "")
                  + (f", alignment fidelity {row['fidelity']:.3f}" if row["fidelity"] is not None else "")
                  + (" — **worse than the stage it started from**" if row["flagged"] else "")
                  for label, row in checks.items()]
        lines.append("")
    if index:
        chosen = f" ({index['chosen_by']})" if index.get("chosen_by") else ""
        lines += [f"Index: {index['documents']} documents with {index['label']}{chosen} ({index['model']}). "
                  f"Serve it: `{command}`", ""]
        lines += [f"**Warning:** {w}." for w in index.get("warnings", [])] + ([""] if index.get("warnings") else [])
        if index.get("care_alternative"):
            lines += [index["care_alternative"][0].upper() + index["care_alternative"][1:] + ".", ""]
    with atomic_write(ctx.root / RESULTS_MD) as fh:
        fh.write("\n".join(lines))
    summary = {"table": table, "rows": rows, "main_task": task_names(ctx)[0], "ranking": ranked,
               "ranked_on": selection_task(ctx), "warnings": (index or {}).get("warnings", []),
               "figure": _figure(ctx, rows, results),
               "index": index, "serve_command": command,
               **({QUERY_BUDGET_KEY: budget} if budget else {})}
    write_json(ctx.root / RESULTS_JSON, summary)
    return summary
