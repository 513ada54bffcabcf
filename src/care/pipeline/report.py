"""The last step of a run: what the run found (:mod:`care.pipeline.findings`: CARE's share of symmetric large, its
query speed-up, the model the index serves and why, the budget's depth curve and pick), one results table (quality
per task, query latency in the latency step's one engine and the speed-up over symmetric large's query side), the
trained models ranked on the main task, the quality-vs-QPS figure (every timed dense row on the speed axis), and
the ``care serve`` command for the index built with the best of them (and, with ``recipes.care.query_speedup``,
the query tower the budget picked and why)."""

from __future__ import annotations

import json
import logging
import shlex
from typing import Any

from care.bench.latency import LatencyReport, ModelLatency, format_latency
from care.bench.result import TaskResult
from care.data.io import atomic_write, write_json
from care.encoders.registry import BM25_TOKENIZERS
from care.pipeline.context import RunContext
from care.pipeline.evaluate import INDEX_FOLDER, LATENCY_FILE, load_results, model_labels, selection_task
from care.pipeline.findings import findings_lines
from care.pipeline.query_budget import OUTPUT_KEY as QUERY_BUDGET_KEY
from care.pipeline.query_budget import report_lines as query_budget_lines
from care.pipeline.served_vocabulary import OUTPUT_KEY as QUERY_VOCABULARY_KEY
from care.pipeline.served_vocabulary import report_lines as query_vocabulary_lines
from care.pipeline.sources import evaluated_tasks

logger = logging.getLogger(__name__)

RESULTS_MD, RESULTS_JSON, FIGURE_PNG = "results.md", "results.json", "quality_vs_qps.png"
SCORE_DIGITS = 4
#: Column names of the engines timed beside the first (``evaluate.latency_engine: both``).
ENGINE_COLUMNS = {"pytorch": "PyTorch fp32", "onnx-int8": "ONNX int8"}


def serve_command(ctx: RunContext) -> str:
    """The exact command that serves the run's index (its query side loads from the index's manifest)."""
    return f"care serve --index {shlex.quote(str(ctx.root / INDEX_FOLDER))}"


def task_names(ctx: RunContext) -> list[str]:
    """The evaluated tasks' names (as results record them), in config order, then ``validation`` when the
    label step carved a validation split."""
    return [task.name for task in evaluated_tasks(ctx).values()]


def results_rows(ctx: RunContext, results: list[TaskResult], latency: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per model: main score per task, query latency (p50 / p10 / p90 ms, the engine it ran in), the
    speed-up over symmetric large's query side (``None`` where not given: another engine, a failed self-check, no
    symmetric large), batch-1 queries/s (``None`` where the self-check failed), and, with ``both`` engines, the
    PyTorch fp32 latency and speed-up."""
    by_key = {(r.model, r.task): r for r in results}
    report = LatencyReport.from_dict(latency) if latency else None
    others = latency.get("other_engines", {}) if latency else {}
    rows = []
    for label in model_labels(ctx):
        scores = {t: round(by_key[(label, t)].main_value, SCORE_DIGITS) for t in task_names(ctx) if (label, t) in by_key}
        timed = report.models.get(label) if report is not None else None
        qps = timed.qps if timed is not None and report.trusted else None
        row = {"model": label, "scores": scores, "query_latency_ms": timed.p50_ms if timed else None,
               "query_latency": timed.to_dict() if timed else None,
               "speedup": latency.get("speedups", {}).get(label) if latency else None,
               "qps_batch1": round(qps, 1) if qps else None}
        for engine, record in others.items():
            other = record["models"].get(label)
            row[engine] = {"p50_ms": other["p50_ms"] if other else None, "speedup": record["speedups"].get(label)}
        rows.append(row)
    return rows


def ranking(ctx: RunContext, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trained models, best first on the task the index step chooses on (validation when there is a
    validation split, else the main task): ``{"model", "score"}``."""
    main = selection_task(ctx)
    trained = ctx.trained_models()
    scored = [{"model": r["model"], "score": r["scores"][main]} for r in rows if r["model"] in trained and main in r["scores"]]
    return sorted(scored, key=lambda r: -r["score"])


def _speedup_cell(row: dict[str, Any], latency: dict[str, Any]) -> str:
    timed = row.get("query_latency")
    if not timed:
        return "–"
    if row["speedup"] is not None:
        cell = f"{row['speedup']:.2f}×" + (" (reference)" if row["model"] == latency.get("reference") else "")
        return cell + (" (at the engine's floor)" if timed.get("overhead_dominated") else "")
    if "engine" not in latency:
        return "– (an older record: --redo latency)"
    if not (latency.get("self_check") or {}).get("passed"):
        return "– (self-check failed)"
    if latency.get("reference") is None:
        return "– (no symmetric large timed)"
    return f"– ({timed.get('engine')}: another engine)"


def markdown_table(ctx: RunContext, rows: list[dict[str, Any]], results: list[TaskResult],
                   latency: dict[str, Any] | None = None) -> str:
    """``| model | <task> (<metric>) ... | of <symmetric large> | query latency (ms) | speed-up over <reference> |
    queries/s |`` (and a column per other engine timed). The share column is each row's main-task score over
    symmetric large's (``recipes.care.labels.init_document``), shown when that row was evaluated."""
    latency = latency or {}
    metric = {r.task: r.main_score for r in results}
    names = task_names(ctx)
    header = [f"{t} ({metric.get(t, '?')})" for t in names]
    large = ctx.config.recipes.care.labels.get("init_document")
    base = next((r["scores"].get(names[0]) for r in rows if r["model"] == large), None) if names else None
    if base:
        header.append(f"of {large}")
    engine = latency.get("engine_description") or "batch 1"
    reference = latency.get("reference") or "symmetric large"
    others = list(latency.get("other_engines", {}))
    extra = [f"{ENGINE_COLUMNS.get(e, e)} p50 ms (speed-up)" for e in others]
    lines = ["| model | " + " | ".join(header) + f" | query latency (ms, p50 (p10, p90), {engine}) | "
             f"query speed-up over {reference} | queries/s (batch 1) |" + "".join(f" {h} |" for h in extra),
             "|---|" + "---|" * len(header) + "---|---|---|" + "---|" * len(extra)]
    for row in rows:
        cells = [f"{row['scores'][t]:.{SCORE_DIGITS}f}" if t in row["scores"] else "–" for t in names]
        if base:
            cells.append(f"{row['scores'][names[0]] / base:.1%}" if names[0] in row["scores"] else "–")
        timed = row.get("query_latency")
        ms = format_latency(ModelLatency(**timed)).replace("; overhead-dominated", "") if timed else _untimed(ctx, row)
        qps = f"{row['qps_batch1']:.0f}" if row["qps_batch1"] is not None else "–"
        more = []
        for other in others:
            seen = row.get(other) or {}
            more.append("–" if seen.get("p50_ms") is None else f"{seen['p50_ms']:.2f}"
                        + (f" ({seen['speedup']:.2f}×)" if seen.get("speedup") is not None else ""))
        lines.append(f"| {row['model']} | " + " | ".join(cells) + f" | {ms} | {_speedup_cell(row, latency)} | {qps} |"
                     + "".join(f" {m} |" for m in more))
    return "\n".join(lines) + "\n"


def _untimed(ctx: RunContext, row: dict[str, Any]) -> str:
    spec = ctx.all_models().get(row["model"])
    lexical = isinstance(spec, str) and spec.split("?", 1)[0].lower() in BM25_TOKENIZERS
    return "– (lexical)" if lexical else "– (not timed)"


def latency_notes(latency: dict[str, Any] | None) -> str:
    """The lines under the table: the self-check, how and where the rows were timed, the engine's floor, which rows
    are at it and which ran in another engine."""
    if not latency:
        return ""
    report = LatencyReport.from_dict(latency)
    lines = ["", report.self_check.describe() + "." if report.self_check else
             "No latency self-check ran: no speed-up is given."]
    engine = latency.get("engine")
    if engine is None:
        lines.append("This latency record is from an older care (no engine, no speed-up): rerun with --redo latency.")
        return "\n".join(lines) + "\n"
    floor = f"; the engine's floor (a graph with no layer) {report.floor.p50_ms:.2f} ms" if report.floor else ""
    lines.append(f"Every dense query side timed in {latency['engine_description']}, side by side (model order "
                 f"randomised per query) on {report.queries} of the main task's queries{floor}; speed-ups are over "
                 f"{latency.get('reference') or 'symmetric large'}'s query side. BM25 has no query encoder.")
    at_floor = [label for label, m in report.models.items() if m.overhead_dominated and label in report.medians()]
    if at_floor:
        lines.append(f"At the engine's floor (timed within {report.settings.self_check_tolerance:.0%} of it: fixed "
                     f"per-call cost): {', '.join(at_floor)}; their speed-up is what this engine gives, bounded by "
                     "that cost.")
    elsewhere = {label: m.engine for label, m in report.models.items()
                 if label in report.medians() and m.engine != engine}
    if elsewhere:
        lines.append("Timed in another engine (no speed-up is given across engines): "
                     + "; ".join(f"{label}: {e}" for label, e in elsewhere.items()) + ".")
    return "\n".join(lines) + "\n"


def figure_points(rows: list[dict[str, Any]], main: str) -> list[dict[str, Any]]:
    """The figure's points: every timed row with a main score, at its queries/s (``None``: off the speed axis, only
    where the self-check failed), named with the engine it ran in."""
    points = []
    for r in rows:
        timed = r["query_latency"]
        if main not in r["scores"] or timed is None:
            continue
        name = f"{r['model']} [{timed.get('engine') or '?'}]" if r["qps_batch1"] else r["model"]
        points.append({"model": name, "score": r["scores"][main], "qps": r["qps_batch1"]})
    return points


def _figure(ctx: RunContext, points: list[dict[str, Any]], results: list[TaskResult]) -> str | None:
    if not points:
        return None
    from care.bench.figure import QualityPoint, quality_speed_figure

    main = task_names(ctx)[0]
    metric = next((r.main_score for r in results if r.task == main), "score")
    return str(quality_speed_figure([QualityPoint(p["model"], p["score"], p["qps"]) for p in points],
                                    ctx.root / FIGURE_PNG, ylabel=f"{metric} on {main}",
                                    xlabel="queries/s, one query at a time on one CPU thread (log)"))


def _dense_references(ctx: RunContext) -> list[str]:
    return [label for label, spec in ctx.config.models.references.items()
            if not (isinstance(spec, str) and spec.split("?", 1)[0].lower() in BM25_TOKENIZERS)]


def step_report(ctx: RunContext) -> dict[str, Any]:
    """Write ``results.md`` / ``results.json`` / ``quality_vs_qps.png`` in the run folder; returns them."""
    results = load_results(ctx)
    latency_path = ctx.root / "eval" / LATENCY_FILE
    latency = json.loads(latency_path.read_text(encoding="utf-8")) if latency_path.is_file() else {}
    if latency and "models" not in latency:
        logger.warning("%s is from an older care; rerun with --redo latency to time the models again", latency_path)
        latency = {}
    rows = results_rows(ctx, results, latency)
    index = ctx.step_outputs("index")
    budget = ctx.step_outputs("train_care").get(QUERY_BUDGET_KEY)
    labels = ctx.config.recipes.care.labels
    main = task_names(ctx)[0]
    found = findings_lines(rows, care=labels.get("stage2"), reference=labels.get("init_document"), task=main,
                           metric=next((r.main_score for r in results if r.task == main), "score"),
                           latency=latency or None, budget=budget, index=index, rivals=_dense_references(ctx))
    table = "\n".join(found) + ("\n" if found else "") + markdown_table(ctx, rows, results, latency) \
        + latency_notes(latency)
    ranked = ranking(ctx, rows)
    command = serve_command(ctx)
    lines = [f"# care run results ({ctx.root})", "", table]
    if ranked:
        lines += [f"Trained models on {selection_task(ctx)}, best first: "
                  + ", ".join(f"{r['model']} ({r['score']:.{SCORE_DIGITS}f})" for r in ranked) + ".", ""]
    lines += query_budget_lines(budget)
    vocabulary = ctx.step_outputs("train_care").get(QUERY_VOCABULARY_KEY)
    lines += query_vocabulary_lines(vocabulary)
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
    points = figure_points(rows, main)
    summary = {"table": table, "findings": found[0] if found else None, "rows": rows, "main_task": main,
               "ranking": ranked, "ranked_on": selection_task(ctx), "warnings": (index or {}).get("warnings", []),
               "figure": _figure(ctx, points, results), "figure_points": points,
               "index": index, "serve_command": command,
               **({QUERY_BUDGET_KEY: budget} if budget else {}),
               **({QUERY_VOCABULARY_KEY: vocabulary} if vocabulary else {})}
    write_json(ctx.root / RESULTS_JSON, summary)
    return summary
