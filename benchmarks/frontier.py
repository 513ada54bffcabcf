"""The quality-latency frontier of CARE's query tower on real weights (issue 41): ``python -m benchmarks.frontier``.

Reads the ``real_weights`` records trained on one H200 (dev set, test split; ``--group TAG`` adds a run's own, e.g.
the CPU's ``cpu_rich_lr2.4e-3_L1``): ``test_gpu_seedK`` (CARE with e5 cut
to 6 layers, symmetric small / large, e5 zero-shot), ``test_frontier_seedK`` (CARE and symmetric small with e5 cut to
1 and 3 layers), ``test_frontier_rich_seedK`` (``CARE [rich]``: the 1-layer tower's Stage I on every corpus sentence,
more epochs); and the query latency measured on the CPU side by side in ``test_frontier`` (``bench_real_weights
--summarise --latency --latency-layers 6 4 3 2 1 --tag frontier --threads 1``: ONNX int8 and fp32, batch 1, one
thread; shapes, not weights, set it). BM25 is a point: its nDCG@10 from the harness's ``baselines/reference_models``
record (same split and corpus), its speed from a summary timed with ``--latency-bm25`` (BM25 searching the corpus
beside the 12-layer int8 graph; :func:`bm25_timing`). Writes ``frontier/test.json`` (``extra.frontier``: one entry
per query tower, then BM25), ``test.md`` and ``frontier.png`` (nDCG@10 against int8 queries/s).

A tower scored in several record groups takes its figures from the first group that has it (:data:`GROUPS`, then
the discovered ``test_frontier_<tag>_seedK`` groups, then those named with ``--group TAG``, e.g. a CPU run's
``cpu_rich_lr2.4e-3_L1``); its seeds are the seeds of those records. ``ratio_to_symmetric_large`` pairs each
tower with symmetric large of the same records (same seeds); speed-ups are over e5's 12-layer query side in the same engine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, RUNS
from benchmarks.real_weights_summary import BACK_TO_BACK, BM25_LATENCY
from care.bench.record import BenchmarkRecord, read_records, write_record
from care.data.io import atomic_write
from care.train.recipes.variants import NAME_PATTERN

EXPERIMENT = "frontier"
SOURCE = "real_weights"
#: Record groups (name -> record-name prefix before the seed), in priority order.
GROUPS = {"gpu": "test_gpu_seed", "frontier": "test_frontier_seed", "frontier_rich": "test_frontier_rich_seed"}
#: Records of other frontier runs (``test_frontier_<tag>_seedK``), found by :func:`with_discovered_groups`.
DISCOVERED_GROUP = re.compile(r"test_(frontier_[A-Za-z0-9_.-]+?)_seed\d+")
#: The summary record whose ``latencies`` hold the side-by-side CPU latency of e5's cuts.
LATENCY_RECORD = "test_frontier"
#: ``CARE [NAME]`` rows that are frontier towers (other variants in the records are screens of one seed):
#: the richer Stage I, and the same with unlabelled questions (frontier_gpu.sh ``RICH_FILE=alignment_rich_queries.jsonl``).
VARIANTS = ("rich", "rich-questions")
FULL_DEPTH = 12
#: e5's configuration (``care model export-e5``): the parameter counts are computed from its shapes.
E5_CONFIG = RUNS / "e5" / "L12" / "config.json"
SHAPE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "max_position_embeddings", "type_vocab_size")
DEPTH_LABEL = re.compile(r"^(CARE|symmetric small) \((\d+) layers?\)$")
VARIANT_LABEL = re.compile(r"^CARE \[(.+)\]$")
LATENCY_KEY = re.compile(r"^(\d+) layers(?:, FFN (\d+))?(?: \(symmetric large's query side\))?, ONNX (int8|fp32)"
                         r"(, back to back)?$")
#: A narrowed tower's row: ``CARE [FFN 768]``, ``CARE [rich, FFN 768]`` (records whose config has ``ffn_width``).
FFN_SUFFIX = re.compile(r"FFN (\d+)\]$")
#: Suffix of a timing measured back to back (each tower answering consecutive queries, as a service runs it).
WARM = "_back_to_back"
#: Figure: the curves (towers of one row at several depths) and the single points.
CURVES = ("CARE", "symmetric small")
POINTS = ("e5 zero-shot", "symmetric large")
#: BM25's point: its nDCG@10 on the same split and corpus from the harness's reference-model record
#: (``python -m benchmarks.bench_baselines``: ``care bench`` on the dev set), its speed from a real-weights summary
#: timed with ``--latency-bm25`` (BM25 searching the corpus beside the 12-layer int8 graph).
BM25_ROW, BM25_SOURCE, BM25_RECORD, BM25_MODEL, BM25_DATASET = "BM25", "baselines", "reference_models", "bm25", "toyhom"


def tower_of(label: str, layers: int | None, variants: tuple[str, ...] = VARIANTS) -> tuple[str, int | None] | None:
    """``(row, query layers)`` of a record's score label (``layers``: the record's CARE query depth), or None
    for a row that is no frontier tower (peer, ablations, students, other variants)."""
    if label in ("CARE", "symmetric small"):
        return label, layers
    if match := DEPTH_LABEL.match(label):
        return match[1], int(match[2])
    if (match := VARIANT_LABEL.match(label)) and match[1] in variants:
        return label, layers
    if label in POINTS:
        return label, FULL_DEPTH
    if "bm25" in label.lower():
        return "BM25", None
    return None


def collect(records: dict[str, BenchmarkRecord], groups: dict[str, str] = GROUPS,
            variants: tuple[str, ...] = VARIANTS) -> dict[tuple[str, int | None], dict[str, Any]]:
    """Every tower's nDCG@10 per seed (and symmetric large's of the same records), from the first group holding it."""
    towers: dict[tuple[str, int | None], dict[str, Any]] = {}
    for group, prefix in groups.items():
        found: dict[tuple[str, int | None], dict[str, Any]] = {}
        for name, record in sorted(records.items()):
            if not re.fullmatch(re.escape(prefix) + r"\d+", name) or len(record.seeds) != 1:
                continue
            seed, large = record.seeds[0], record.scores.get("symmetric large", {}).get("ndcg_at_10")
            width = record.config.get("ffn_width")
            for label, scores in record.scores.items():
                tower = tower_of(label, record.config.get("layers"), variants)
                if tower is not None and width and not DEPTH_LABEL.match(label) and tower[0] not in POINTS \
                        and tower[0] != "BM25":  # the run's own query tower was narrowed (not its extra depths)
                    tower = (narrowed(tower[0], width), tower[1])
                if tower is None or tower in towers or "ndcg_at_10" not in scores:
                    continue
                entry = found.setdefault(tower, {"group": group, "per_seed": {}, "large": {}, "records": []})
                entry["per_seed"][seed] = scores["ndcg_at_10"]
                if large is not None:
                    entry["large"][seed] = large
                entry["records"].append(name)
        towers.update(found)
    return towers


def named_groups(tags: list[str] | None) -> dict[str, str]:
    """The record groups ``--group TAG`` names (``TAG`` -> ``test_<TAG>_seed``), checked as a run's ``--tag`` is."""
    groups = {}
    for tag in tags or ():
        if not NAME_PATTERN.fullmatch(tag):
            raise SystemExit(f"--group {tag!r}: a record tag is letters, digits, '_', '.' and '-' "
                             "(bench_real_weights.py --tag; its records are test_<TAG>_seedK.json)")
        groups[tag] = f"test_{tag}_seed"
    return groups


def group_machines(records: dict[str, BenchmarkRecord], groups: dict[str, str]) -> dict[str, str]:
    """Where each group's records were trained (``NVIDIA H200``, ``CPU, 2 cores``), for the table's text; a group
    whose records name no machine is left out."""
    machines: dict[str, str] = {}
    for group, prefix in groups.items():
        found = {r.machine.get("gpu") or f"CPU, {r.machine.get('cores', '?')} cores"
                 for name, r in records.items() if r.machine and re.fullmatch(re.escape(prefix) + r"\d+", name)}
        if found:
            machines[group] = " / ".join(sorted(found))
    return machines


def with_discovered_groups(records: dict[str, BenchmarkRecord], groups: dict[str, str] = GROUPS) -> dict[str, str]:
    """``groups`` followed by every other ``test_frontier_<tag>_seedK`` group among ``records`` (tag order): the
    records of a later run (``TAG=frontier_L0 bash benchmarks/frontier_gpu.sh``) join the frontier without a change
    here, behind the groups named first."""
    known = set(groups.values())
    found = {}
    for name in sorted(records):
        if (match := DISCOVERED_GROUP.fullmatch(name)) and f"test_{match[1]}_seed" not in known:
            found.setdefault(match[1], f"test_{match[1]}_seed")
    return {**groups, **found}


def latency_by_depth(latencies: dict[str, Any]) -> dict[tuple[int, int | None, str], dict[str, Any]]:
    """``{(layers, feed-forward width or None, "int8" | "fp32" | "int8_back_to_back" | "fp32_back_to_back"): timing}``
    from a ``--summarise --latency`` record's latencies (interleaved per query, and back to back where measured)."""
    return {(int(m[1]), int(m[2]) if m[2] else None, m[3] + (WARM if m[4] else "")): value
            for key, value in latencies.items() if (m := LATENCY_KEY.match(key))}


def narrowed(row: str, width: int | None) -> str:
    """The row of a tower whose feed-forward blocks are narrowed to ``width``: ``CARE [FFN 768]``,
    ``CARE [rich, FFN 768]`` (``row`` itself for ``None``)."""
    if width is None:
        return row
    if match := VARIANT_LABEL.match(row):
        return f"CARE [{match[1]}, FFN {width}]"
    return f"{row} [FFN {width}]"


def ffn_width(row: str) -> int | None:
    """The feed-forward width a row names (:func:`narrowed`), or None."""
    match = FFN_SUFFIX.search(row)
    return int(match[1]) if match else None


def query_params(shapes: dict[str, int] | None, layers: int | None, width: int | None = None) -> dict[str, int | None]:
    """Parameters of a BERT query tower of ``layers`` layers (embeddings + layers, no pooler: mean pooling),
    and of its transformer layers alone, from e5's shapes (the feed-forward blocks ``width`` wide if given)."""
    if not shapes or layers is None:
        return {"params": None, "params_transformer": None}
    h, i = shapes["hidden_size"], width or shapes["intermediate_size"]
    embeddings = (shapes["vocab_size"] + shapes["max_position_embeddings"] + shapes["type_vocab_size"]) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return {"params": embeddings + layers * layer, "params_transformer": layers * layer}


def _row_order(row: str) -> tuple[int, str]:
    """CARE, its variants, symmetric small, symmetric large, e5 zero-shot, BM25."""
    order = ("CARE", "CARE [", "symmetric small", "symmetric large", "e5 zero-shot")
    return next((i for i, name in enumerate(order) if row == name or (name.endswith("[") and row.startswith(name))),
                len(order)), row


def display(row: str, layers: int | None) -> str:
    return row if layers is None else f"{row} ({layers} layer{'' if layers == 1 else 's'})"


def build(records: dict[str, BenchmarkRecord], shapes: dict[str, int] | None = None,
          groups: dict[str, str] = GROUPS, variants: tuple[str, ...] = VARIANTS,
          extra_groups: dict[str, str] | None = None, baselines: BenchmarkRecord | None = None) -> BenchmarkRecord:
    """The frontier record (not written): ``extra.frontier`` one entry per tower, deepest rows last, then BM25
    (:func:`bm25_point`) where ``baselines`` scores it and a summary record times it.
    ``extra_groups`` (:func:`named_groups`) are read after ``groups`` and the discovered ones."""
    groups = {**with_discovered_groups(records, groups), **(extra_groups or {})}
    towers = collect(records, groups, variants)
    if not towers:
        raise SystemExit(f"no records named {', '.join(p + 'K' for p in groups.values())} to build the frontier from")
    latency_record = records.get(LATENCY_RECORD)
    timings = latency_by_depth(latency_record.latencies) if latency_record else {}
    entries = []
    for (row, layers), found in sorted(towers.items(), key=lambda t: (_row_order(t[0][0]), t[0][1] or 0)):
        seeds = sorted(found["per_seed"])
        values = [found["per_seed"][s] for s in seeds]
        mean = statistics.mean(values)
        paired = all(s in found["large"] for s in seeds)
        width = ffn_width(row)
        int8, fp32 = timings.get((layers, width, "int8")), timings.get((layers, width, "fp32"))
        warm = {kind: timings.get((layers, width, kind + WARM)) for kind in ("int8", "fp32")}
        entries.append({
            "row": row, "layers": layers, "ffn_width": width, **query_params(shapes, layers, width),
            "speedup_int8": int8.get("large_over_this") if int8 else None,
            "speedup_fp32": fp32.get("large_over_this") if fp32 else None,
            **{f"speedup_{kind}{WARM}": t.get("large_over_this") if t else None for kind, t in warm.items()},
            f"int8_p50_ms{WARM}": warm["int8"]["p50_ms"] if warm["int8"] else None,
            "int8_p50_ms": int8["p50_ms"] if int8 else None, "fp32_p50_ms": fp32["p50_ms"] if fp32 else None,
            "int8_qps": 1000.0 / int8["p50_ms"] if int8 else None,
            "ndcg_at_10_mean": mean, "ndcg_at_10_std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "ndcg_at_10_per_seed": values, "seeds": seeds,
            "ratio_to_symmetric_large": mean / statistics.mean(found["large"][s] for s in seeds) if paired else None,
            "ratio_to_symmetric_large_per_seed": [found["per_seed"][s] / found["large"][s] for s in seeds]
            if paired else None,  # each seed against its own symmetric large, beside the ratio of means
            "group": found["group"], "records": found["records"]})
    bm25 = next((e for e in entries if e["row"] == BM25_ROW), None) or bm25_point(baselines, entries)
    if bm25 is not None and bm25 not in entries:
        entries.append(bm25)
    timing = bm25_timing(records, [LATENCY_RECORD, *(f"test_{tag}" for tag in (extra_groups or {}))], entries)
    if bm25 is not None and timing is not None:
        bm25.update(timing)
    config = {"source": SOURCE, "groups": groups, "machines": group_machines(records, groups),
              "variants": list(variants), "latency_record": LATENCY_RECORD,
              "e5_shapes": shapes, "speedup": "p50 of e5's 12-layer query side / p50 of this tower, same engine; "
              f"interleaved per query, and back to back ({WARM[1:]}: each tower answering consecutive queries)",
              "latency": {"machine": latency_record.machine, "date": latency_record.date,
                          "self_check": latency_record.latencies.get("_self_check"),
                          f"self_check{WARM}": latency_record.latencies.get(f"_self_check{WARM}")}
              if latency_record else None,
              "bm25": {"score": ", ".join(bm25["records"]), "latency": bm25.get("latency_record")} if bm25 else None}
    return BenchmarkRecord(
        EXPERIMENT, "test", config=config, seeds=sorted({s for e in entries for s in e["seeds"]}),
        scores={display(e["row"], e["layers"]): {"ndcg_at_10": e["ndcg_at_10_mean"], "std": e["ndcg_at_10_std"]}
                for e in entries},
        latencies={display(e["row"], e["layers"]): {"int8_p50_ms": e["int8_p50_ms"], "fp32_p50_ms": e["fp32_p50_ms"]}
                   for e in entries if e["int8_p50_ms"] is not None},
        extra={"frontier": entries})


def bm25_timing(records: dict[str, BenchmarkRecord], latency_records: list[str],
                towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """BM25's speed fields of a frontier entry, or None where no record times it.

    Its speed-ups are over the 12-layer int8 graph timed beside it in the first of ``latency_records`` whose
    latencies hold :data:`BM25_LATENCY`; it is placed on the int8 queries/s axis at that speed-up times symmetric
    large's queries/s in ``towers`` (the towers' clock, :data:`LATENCY_RECORD`).
    """
    timed = next((name for name in latency_records if name in records and BM25_LATENCY in records[name].latencies),
                 None)
    if timed is None:
        return None
    latencies = records[timed].latencies
    speedup = latencies[BM25_LATENCY]["large_over_this"]
    large = _symmetric_large(towers)
    large_qps = large["int8_qps"] if large else None
    return {"speedup_int8": speedup, f"speedup_int8{WARM}":
            (latencies.get(BM25_LATENCY + BACK_TO_BACK) or {}).get("large_over_this"),
            "p50_ms": latencies[BM25_LATENCY]["p50_ms"], "engine": latencies[BM25_LATENCY].get("engine"),
            "int8_qps": large_qps * speedup if large_qps and speedup else None, "latency_record": timed}


def bm25_point(baselines: BenchmarkRecord | None, towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """BM25's frontier entry from the harness's reference-model record (BM25 is deterministic: one value, no
    seeds), its ratio against symmetric large's entry in ``towers``; None where ``baselines`` does not score it."""
    models = baselines.scores.get(BM25_DATASET, {}).get("models", {}) if baselines else {}
    score = models.get(BM25_MODEL, {}).get("retrieval", {}).get("scores", {}).get("ndcg_at_10")
    if score is None:
        return None
    large = _symmetric_large(towers)
    return {"row": BM25_ROW, "layers": None, "ffn_width": None, "params": None, "params_transformer": None,
            "speedup_int8": None, "speedup_fp32": None, f"speedup_int8{WARM}": None, f"speedup_fp32{WARM}": None,
            f"int8_p50_ms{WARM}": None, "int8_p50_ms": None, "fp32_p50_ms": None, "int8_qps": None,
            "ndcg_at_10_mean": score, "ndcg_at_10_std": 0.0, "ndcg_at_10_per_seed": [], "seeds": [],
            "ratio_to_symmetric_large": score / large["ndcg_at_10_mean"] if large else None,
            "group": None, "records": [f"{BM25_SOURCE}/{BM25_RECORD}"]}


def _symmetric_large(towers: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in towers if e["row"] == POINTS[1] and e["layers"] == FULL_DEPTH), None)


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


def read_shapes(path: Path) -> dict[str, int] | None:
    """e5's shapes from its exported ``config.json`` (None when it is not there: the counts are left out)."""
    return {k: int(json.loads(path.read_text(encoding="utf-8"))[k]) for k in SHAPE_KEYS} if path.is_file() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="results root holding real_weights/")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results root the frontier/ record goes to")
    parser.add_argument("--e5-config", type=Path, default=E5_CONFIG, help="e5's config.json (parameter counts)")
    parser.add_argument("--variant", action="append", default=None, help=f"CARE [NAME] rows to include {VARIANTS}")
    parser.add_argument("--group", action="append", default=None, metavar="TAG",
                        help="also read the records test_<TAG>_seedK (a run's --tag, e.g. cpu_rich_lr2.4e-3_L1)")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args()
    shapes = read_shapes(args.e5_config)
    if shapes is None:
        shapes = next((r.config["e5_shapes"] for r in read_records(args.out, EXPERIMENT).values()
                       if r.config.get("e5_shapes")), None)  # the shapes a previous run recorded
    baselines = (read_records(args.results, BM25_SOURCE).get(BM25_RECORD) if (args.results / BM25_SOURCE).is_dir()
                 else None)
    record = build(read_records(args.results, SOURCE), shapes, variants=tuple(args.variant or VARIANTS),
                   extra_groups=named_groups(args.group), baselines=baselines)
    path = write_record(record, args.out)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(markdown(record))
    if not args.no_figure:
        figure(record, path.parent / "frontier.png")
    print(markdown(record))


if __name__ == "__main__":
    main()
