"""The generated ``gpu-shapes-tables``: ``bench_gpu_shapes.py``'s records (document-tower encoding throughput, then
Stage II step time and memory)."""

from __future__ import annotations

from pathlib import Path

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.tables import markdown_table


def gpu_shapes_tables(results: Path = RESULTS) -> str:
    """``bench_gpu_shapes.py``'s records: document-tower encoding throughput, then Stage II step time and memory."""
    encoding_rows, stage2_rows = [], []
    for name, rec in read_records(results, "gpu_shapes").items():
        gpu, link = rec.machine.get("gpu") or "CPU", f"[`{name}`](../benchmarks/results/gpu_shapes/{name}.json)"
        for i, e in enumerate(rec.latencies["encoding"]):
            # before memory_at_start_gib, a second batch size's peak also held the first one's encoder
            memory = f"{e['peak_memory_gib']:.1f}" if i == 0 or "memory_at_start_gib" in e else f"({e['peak_memory_gib']:.1f})²"
            encoding_rows.append([link, gpu, str(e["batch_size"]), f"{e['tokens'] / e['documents']:.0f}",
                                  f"{e['tokens_per_s']:,.0f}", f"{e['model_tflops']:.0f}",
                                  f"{e['fraction_of_measured_matmul']:.0%}", f"{e['fraction_of_datasheet_peak']:.0%}",
                                  memory])
        stages = rec.latencies["stage2"]
        for st in stages if isinstance(stages, list) else [stages]:
            # records before memory_at_start_gib freed nothing first: their peak holds the encoding phase's model too
            memory = (f"{st['peak_memory_gib']:.1f}" if "memory_at_start_gib" in st
                      else f"({st['peak_memory_gib']:.1f})²")
            tokens = st["batch_size"] * (1 + st["negatives"]) * st["document_max_length"]
            stage2_rows.append([link, gpu, str(st["grad_cache_chunk_size"]), f"{st['steady_step_seconds']:.2f}",
                                f"{tokens / st['steady_step_seconds']:,.0f}", memory])
    encoding = markdown_table(["record", "GPU", "batch", "tokens/document", "tokens/s", "model TFLOP/s",
                               "of bf16 matmul measured", "of datasheet peak", "peak GiB"], encoding_rows)
    stage2 = markdown_table(["record", "GPU", "GradCache chunk (texts)", "s/step (steady)", "document tokens/s",
                             "peak GiB"], stage2_rows)
    return f"{encoding}\n\n{stage2}"
