"""The frontier's towers from the ``real_weights`` records (issue 41): which score label is which query tower
(:func:`tower_of`), every tower's nDCG@10 per seed from the first record group holding it (:func:`collect`), the
groups (:data:`GROUPS`, the discovered ``test_frontier_<tag>_seedK``, ``--group TAG``), where each was trained,
the side-by-side latency by depth, and a tower's parameter count from e5's shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from care.bench.record import BenchmarkRecord
from care.bench.reports.paths import ROOT

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
E5_CONFIG = ROOT / "runs" / "e5" / "L12" / "config.json"
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
#: The same pattern as ``care.train.recipes.variants.NAME_PATTERN`` (a run's ``--tag``; not imported from there:
#: ``care.train`` imports ``care.bench``); a test keeps the two equal.
TAG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: Suffix of a real-weights summary's latency rows timed back to back (``bench_real_weights --summarise --latency``:
#: each tower answers half the queries in a row, as a service runs its one tower; instead of interleaved per query).
BACK_TO_BACK = ", back to back"
#: The latency row of BM25 in a real-weights summary (``--latency-bm25``): jieba words, searching the dev set's whole
#: corpus for its top :data:`care.bench.latency.LEXICAL_K`; its speed-up is over symmetric large's 12-layer int8 query
#: side.
BM25_LATENCY = "BM25 (jieba words), search of the corpus"
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
        if not TAG_PATTERN.fullmatch(tag):
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


def read_shapes(path: Path) -> dict[str, int] | None:
    """e5's shapes from its exported ``config.json`` (None when it is not there: the counts are left out)."""
    return {k: int(json.loads(path.read_text(encoding="utf-8"))[k]) for k in SHAPE_KEYS} if path.is_file() else None
