"""The frontier record for people: ``frontier/test.md`` (:func:`markdown`) and ``frontier.png`` (:func:`figure`:
nDCG@10 against int8 queries/s)."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import BenchmarkRecord
from care.bench.reports.frontier_build import display
from care.bench.reports.frontier_towers import BM25_ROW, CURVES, POINTS, WARM

#: The figure's file, beside the record.
FIGURE_NAME = "frontier.png"


def _cell(value: float | None, form: str) -> str:
    return "–" if value is None else format(value, form)


def markdown(record: BenchmarkRecord) -> str:
    """``test.md``: the frontier table."""
    machines = record.config.get("machines") or {}
    sources = ", ".join(f"`{prefix}K`" + (f" ({machines[group]})" if group in machines else "")
                        for group, prefix in record.config["groups"].items())
    about = (f"nDCG@10 from the records `real_weights/` {sources}, each tower's ratio against symmetric large of its "
             "own records (seeds trained on different machines are not pooled); speed-ups: e5's 12-layer query side "
             "/ this tower, same engine, ONNX, batch 1, one thread, measured side by side on the CPU "
             f"(`real_weights/{record.config['latency_record']}.json`); query shapes, not weights, set them. The "
             "towers are timed interleaved per query (every call follows another tower's, its weights cold: the "
             "conservative figure) and back to back (each answering consecutive queries, as a query service runs "
             "its one tower). Params: the query tower with e5's full vocabulary (transformer layers alone in "
             "brackets).")
    header = ("| tower | params (M) | nDCG@10 mean ± std | per seed | of symmetric large | int8 speed-up "
              "| fp32 speed-up | int8 p50 (ms) | int8 speed-up, back to back |")
    lines = ["# CARE's query tower on real weights: quality against query latency (dev set, test split)", "",
             about, "", header, "|---|---|---|---|---|---|---|---|---|"]
    for e in record.extra["frontier"]:
        params = "–" if e["params"] is None else f"{e['params'] / 1e6:.1f} ({e['params_transformer'] / 1e6:.2f})"
        per_seed = ", ".join(f"{v:.4f} (seed {s})" for s, v in zip(e["seeds"], e["ndcg_at_10_per_seed"], strict=True)) \
            or "– (deterministic)"
        ratio = "–" if e["ratio_to_symmetric_large"] is None else f"{e['ratio_to_symmetric_large']:.1%}"
        lines.append(f"| {display(e['row'], e['layers'])} | {params} | {e['ndcg_at_10_mean']:.4f} ± "
                     f"{e['ndcg_at_10_std']:.4f} | {per_seed} | {ratio} | {_cell(e['speedup_int8'], '.2f')}× | "
                     f"{_cell(e['speedup_fp32'], '.2f')}× | {_cell(e['int8_p50_ms'], '.2f')} | "
                     f"{_cell(e.get('speedup_int8' + WARM), '.2f')}× |")
    bm25 = next((e for e in record.extra["frontier"] if e["row"] == BM25_ROW), None)
    if bm25 is not None and bm25.get("latency_record"):
        lines += ["", f"BM25 (scored in {', '.join(f'`{name}`' for name in bm25['records'])}) has no "
                  "query encoder: its time is a whole search (tokenising, scoring every document of the test split's "
                  f"corpus, the top 10; {bm25['p50_ms']:.2f} ms), timed beside the 12-layer int8 graph in "
                  f"`real_weights/{bm25['latency_record']}.json`, where a tower's time stops at its query vector."]
    latency = record.config.get("latency") or {}
    for key, name in (("self_check", "Latency, interleaved per query"), (f"self_check{WARM}", "Back to back")):
        if (latency.get(key) or {}).get("description"):
            lines += ["", f"{name}: {latency[key]['description']}."]
    return "\n".join(lines) + "\n"


def figure(record: BenchmarkRecord, png: Path) -> Path:
    """nDCG@10 (± std over seeds) against int8 queries/s: one curve per row of :data:`CURVES`, the rest points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    placed = [e for e in record.extra["frontier"] if e["int8_qps"] is not None]
    machines = record.config.get("machines") or {}
    reference = next((machines.get(e.get("group")) for e in placed if e["row"] == POINTS[1]), None)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row, style in zip(CURVES, ("o-", "s--"), strict=True):
        curve = sorted((e for e in placed if e["row"] == row), key=lambda e: e["int8_qps"])
        if curve:
            ax.errorbar([e["int8_qps"] for e in curve], [e["ndcg_at_10_mean"] for e in curve], capsize=3,
                        yerr=[e["ndcg_at_10_std"] for e in curve], fmt=style, label=row)
            for e in curve:
                ax.annotate(f"{e['layers']}L", (e["int8_qps"], e["ndcg_at_10_mean"]), textcoords="offset points",
                            xytext=(5, 4), fontsize=8)
    for e in (e for e in placed if e["row"] not in CURVES):
        label, machine = display(e["row"], e["layers"]), machines.get(e.get("group"))
        if machine and reference and machine != reference:  # trained apart from the references: not poolable
            label += f", trained on {machine}"
        if e["row"] == BM25_ROW:  # no query encoder: a whole search, at its speed-up over the 12-layer int8 graph
            label += " (a whole search of the corpus)"
        ax.errorbar([e["int8_qps"]], [e["ndcg_at_10_mean"]], yerr=[e["ndcg_at_10_std"]], capsize=3,
                    fmt={POINTS[0]: "*", BM25_ROW: "X"}.get(e["row"], "D"), markersize=9, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("query side, ONNX int8 queries/s (batch 1, one CPU thread; log)")
    ax.set_ylabel("nDCG@10 (dev set, test split)")
    ax.set_title("CARE on multilingual-e5-small: quality against query speed")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=150)
    plt.close(fig)
    return png
