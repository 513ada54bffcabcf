"""``baselines/reference_models.md``: ``bench_baselines.py``'s record as Markdown, one part per section (the demo,
the dev set, each harness-overhead run); and the report an invocation starts from (:func:`previous_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.bench.record import read_records
from care.bench.reference_baselines import LATENCY_QUERIES, SPEED_SAMPLE_DOCS

#: Where the record goes: ``benchmarks/results/baselines/reference_models.json`` (and ``.md``).
EXPERIMENT, NAME = "baselines", "reference_models"
#: The sections kept in the record's scores (the rest go to its extra).
SCORED_SECTIONS = ("demo", "toyhom")


def previous_report(results: Path) -> dict[str, Any]:
    """The report of the last invocation (its record's scores and extra merged, with its command, date and machine),
    so sections measured then are kept unless measured again; empty when there is no record."""
    previous = read_records(results, EXPERIMENT).get(NAME) if (results / EXPERIMENT).is_dir() else None
    report: dict[str, Any] = {**previous.scores, **previous.extra} if previous is not None else {}
    if previous is not None:  # the record keeps these at its top level, the Markdown names the last invocation
        for key, value in (("command", previous.command), ("created", previous.date), ("machine", previous.machine)):
            report.setdefault(key, value)
    return report


def to_markdown(report: dict[str, Any]) -> str:
    """The report (the record's scores and extra, merged) as Markdown."""
    lines = ["# Baselines measured with the care harness", "", (f"Last invocation: `{report['command']}` on {report['created']} "
             f"({report['machine']}). Sections a run skips are kept from earlier invocations of this script "
             "(`--skip-*` flags; each overhead section records its thread setting)."), ""]
    demo = report.get("demo", {})
    lines += ["## Embedded demo benchmark", ""]
    if "results" in demo:
        lines += ["| task | model | metric | score |", "|---|---|---|---|"]
        lines += [f"| {r['task']} | {r['model']} | {r['main_score']} | {r['scores'][r['main_score']]:.4f} |" for r in demo["results"]]
    else:
        lines.append(f"Skipped: {demo.get('skipped', 'not run')}")
    toy = report.get("toyhom", {})
    lines += ["", "## toyhom_neike_sample (test split, full corpus, exact search)", ""]
    if "models" in toy:
        lines += ["| model | nDCG@10 (ref) | Recall@100 (ref) | MRR@10 | rerank MAP@10 (ref) | docs/s | query latency (median) |",
                  "|---|---|---|---|---|---|---|"]
        for spec, e in toy["models"].items():
            vs, s = e["vs_reference"], e["retrieval"]["scores"]
            def cell(k: str, vs: dict = vs) -> str:
                return f"{vs[k]['ours']:.3f} ({vs[k]['reference']:.3f})" if k in vs else "–"
            speed = e.get("speed", {})
            lines.append(f"| {spec} ({e['name']}) | {cell('ndcg_at_10')} | {cell('recall_at_100')} | {s['mrr_at_10']:.3f} | "
                         f"{cell('rerank_map_at_10')} | {speed.get('docs_per_s', '–')} | "
                         f"{str(speed.get('query_latency_median_ms', '–')) + ' ms' if speed else '–'} |")
        for spec, e in toy["models"].items():
            if "cache_seed" in e:
                lines += ["", f"{spec}: {e['cache_seed']}."]
            if "rerank_map_at_10_corpus_idf" in e:
                lines += ["", (f"{spec}: rerank MAP@10 with candidates scored by a full-corpus BM25 index (corpus IDF) = "
                          f"{e['rerank_map_at_10_corpus_idf']:.3f}; the harness's `score()` takes IDF from each query's candidates.")]
        lines += ["", ("docs/s: documents of the corpus (first "
                  f"{SPEED_SAMPLE_DOCS}) encoded per second; latency: one query per call, median of {LATENCY_QUERIES}.")]
    else:
        lines.append(f"Skipped: {toy.get('skipped', 'not run')}")
    sections = sorted(k for k in report if k.startswith("overhead")) or ["overhead"]
    for section in sections:
        lines += overhead_markdown(report.get(section, {}))
    return "\n".join(lines) + "\n"


def overhead_markdown(ov: dict[str, Any]) -> list[str]:
    lines = ["", f"## Harness overhead at {ov.get('n_documents', 0):,} documents ({ov.get('faiss_threads', '?')} search thread(s))", ""]
    if "cold" in ov:
        c, w = ov["cold"], ov["cached_rerun"]["timings"]
        lines += [ov["what"] + ".", "",
                  "| run | encode docs (s) | encode queries (s) | load (s) | index (s) | search (s) | metrics (s) | total (s) | outside encoding |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for name, t in (("cold cache", c["timings"]), ("cached rerun", w)):
            lines.append(f"| {name} | {t['encode_documents_s']:.1f} | {t['encode_queries_s']:.1f} | {t['load_s']:.1f} | {t['index_s']:.1f} | "
                         f"{t['search_s']:.1f} | {t['metrics_s']:.1f} | {t['total_s']:.1f} | {t['outside_encoding_share']:.1%} |")
        lines += ["", (f"Known encode cost {ov['known_encode_cost_s']} s; harness overhead on the cold run {c['overhead_s']} s = "
                  f"{c['outside_encoding_share']:.1%} of wall time (target < 10%: {'met' if ov['meets_target'] else 'NOT met'}); "
                  f"counting also the content hashing and cache writes that happen inside the encode phases, the wall time beyond the "
                  f"known encode cost is {c['overhead_vs_known_cost_s']} s = {c['overhead_vs_known_cost_share']:.1%}. "
                  f"The cached rerun encoded {ov['cached_rerun']['texts_encoded']} texts.")]
    else:
        lines.append(f"Skipped: {ov.get('skipped', 'not run')}")
    return lines
