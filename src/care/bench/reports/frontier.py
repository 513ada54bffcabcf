"""The generated ``frontier-table``: the query tower's quality against its latency on real weights, from
``frontier.py``'s record ``frontier/test.json`` (one row per tower on the curve)."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.selection import TEST_FOOTNOTE, chosen_on_test, with_test_mark
from care.bench.tables import markdown_table

#: The record ``python -m benchmarks.frontier`` writes.
FRONTIER_EXPERIMENT, FRONTIER_RECORD = "frontier", "test"
#: Row names in the record: the curves and the 12-layer references (shown in one row, in this order).
CARE, SMALL, REFERENCES, FULL_DEPTH = "CARE", "symmetric small", ("symmetric large", "e5 zero-shot"), 12
#: BM25's row (no query tower: its speed-ups are of a whole search over the 12-layer int8 graph; deterministic).
BM25 = "BM25"


def _score(tower: dict | None, extra: dict | None = None) -> str | None:
    """``0.285 ± 0.001 (97.6%; 98.2, 98.2, 96.4)``: mean ± std, the ratio of means to symmetric large and each seed's
    against its own symmetric large; marked where a setting of the tower was chosen on test."""
    if tower is None:
        return None
    per_seed = tower.get("ratio_to_symmetric_large_per_seed") or []
    shown = len(per_seed) > 1 and tower["row"] != REFERENCES[0]  # symmetric large against itself: 100 % each
    seeds = f"; {', '.join(f'{100 * r:.1f}' for r in per_seed)}" if shown else ""
    text = (f"{tower['ndcg_at_10_mean']:.3f} ± {tower['ndcg_at_10_std']:.3f} "
            f"({tower['ratio_to_symmetric_large']:.1%}{seeds})")
    return with_test_mark(text, extra, score_row(tower))


def score_row(tower: dict) -> str:
    """The tower's row in the frontier record's ``scores`` (``CARE [rich] (1 layer)``), which selections name."""
    layers = tower["layers"]
    return tower["row"] if layers is None else f"{tower['row']} ({layers} layer{'s' if layers != 1 else ''})"


def frontier_table(results: Path = RESULTS) -> str:
    """One row per query-tower depth (and per CARE variant): its query speed-up over the 12-layer query side in
    ONNX int8 (interleaved per query and back to back) and fp32 (one thread, batch 1), CARE's and symmetric small's
    nDCG@10 mean ± std over the seeds (with the share of symmetric large of the same records); the seeds name their
    machine where it is not the references' (seeds of different machines are different trainings); then the
    12-layer references, and BM25 where the record times it (a whole search against the 12-layer int8 query side,
    timed beside it)."""
    record = read_records(results, FRONTIER_EXPERIMENT).get(FRONTIER_RECORD) if (
        results / FRONTIER_EXPERIMENT).is_dir() else None
    if record is None:
        return "No frontier record yet: run `python -m benchmarks.frontier`."
    towers = record.extra["frontier"]
    by = {(t["row"], t["layers"]): t for t in towers}
    machines = record.config.get("machines") or {}
    reference = machines.get((by.get((REFERENCES[0], FULL_DEPTH)) or {}).get("group"))
    rows = []
    for tower in sorted((t for t in towers if t["layers"] is not None), key=lambda t: (t["layers"], t["row"])):
        if tower["row"].startswith(SMALL) or tower["row"] in REFERENCES:  # (BM25, no tower, has no depth)
            continue
        depth = f"{tower['layers']} layer{'s' if tower['layers'] != 1 else ''}"
        variant = tower["row"].removeprefix(CARE).strip()
        width = tower.get("ffn_width")
        plain = variant == (f"[FFN {width}]" if width else "")  # no variant but the narrowing: paired with small's
        small = by.get((f"{SMALL} [FFN {width}]" if width else SMALL, tower["layers"])) if plain else None
        seeds = ", ".join(map(str, sorted(set(tower["seeds"]) | set(small["seeds"] if small else []))))
        trained_on = machines.get(tower.get("group"))
        if trained_on and reference and trained_on != reference:  # not poolable with the references' seeds
            seeds += f" ({trained_on})"
        rows.append([f"{depth} {variant}".strip(), _speedup(tower, "speedup_int8"),
                     _speedup(tower, "speedup_int8_back_to_back"), _speedup(tower, "speedup_fp32"),
                     _score(tower, record.extra), _score(small, record.extra), seeds])
    refs = [by.get((name, FULL_DEPTH)) for name in REFERENCES]
    if all(refs):
        rows.append([f"{FULL_DEPTH} layers: {' / '.join(REFERENCES)}", "1.00×", "1.00×", "1.00×", _score(refs[0]),
                     _score(refs[1]), ", ".join(map(str, refs[0]["seeds"]))])
    bm25 = by.get((BM25, None))
    if bm25 is not None and bm25.get("speedup_int8") is not None:
        rows.append([f"{BM25} (no query tower: a whole search)", _speedup(bm25, "speedup_int8"),
                     _speedup(bm25, "speedup_int8_back_to_back"), "–", _score(bm25), "–", "deterministic"])
    if chosen_on_test(record.extra):
        rows.append([TEST_FOOTNOTE, "", "", "", "", "", ""])
    return markdown_table(["query tower", "int8 speed-up", "int8, back to back", "fp32 speed-up",
                           "CARE (of symmetric large; per seed, %)", "symmetric small", "seeds"], rows)


def _speedup(tower: dict, key: str) -> str:
    """``5.68×``, or ``–`` where the record has no such timing (older records were timed interleaved only)."""
    return "–" if tower.get(key) is None else f"{tower[key]:.2f}×"
