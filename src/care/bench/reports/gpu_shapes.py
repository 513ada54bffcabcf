"""The generated ``gpu-shapes-tables``: ``bench_gpu_shapes.py``'s records (document-tower encoding throughput, then
Stage II step time and memory); and one run's own report (:func:`report_lines`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from care.bench.record import read_records
from care.bench.reports.paths import RESULTS
from care.bench.tables import markdown_table

if TYPE_CHECKING:
    from care.bench.gpu_shapes import Setting


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


def report_lines(device: str, setting: Setting, encodings: list[dict], stages: list[dict], matmul: float,
                 peak: float | None, command: str) -> list[str]:
    """The markdown report of one run (a table row per encoding batch size, a line per Stage II chunk size)."""
    doc, query = setting.document_shape, setting.query_shape
    lines = [f"# Paper shapes on {device} (random weights)", "",
             f"Document tower: {doc.name} shape ({doc.num_hidden_layers} x {doc.hidden_size}, GQA "
             f"{doc.num_attention_heads}/{doc.num_key_value_heads}), {setting.dtype}, last-token pooling, through "
             f"`load_model` -> `encode_documents` (the code `care index build` runs). Query tower: {query.name} shape "
             f"({query.num_hidden_layers} x {query.hidden_size}). Character tokenizer: one token per character.", "",
             f"| batch | documents | tokens | seconds | documents/s | tokens/s | model TFLOP/s | of measured matmul "
             f"({matmul:.3g} TFLOP/s) | of datasheet peak | peak memory GiB |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in encodings:
        datasheet = f"{e['fraction_of_datasheet_peak']:.0%}" if e.get("fraction_of_datasheet_peak") else "n/a"
        memory = f"{e['peak_memory_gib']:.1f}" if e["peak_memory_gib"] is not None else "n/a"
        lines.append(f"| {e['batch_size']} | {e['documents']} | {e['tokens']} | {e['seconds']:.2f} | "
                     f"{e['documents_per_s']:.0f} | {e['tokens_per_s']:.0f} | {e['model_tflops']:.1f} | "
                     f"{e['fraction_of_measured_matmul']:.0%} | {datasheet} | {memory} |")
    for stage2 in stages:
        memory = (f"{stage2['peak_memory_gib']:.1f} GiB ({stage2['memory_at_start_gib']:.1f} held when it started)"
                  if stage2["peak_memory_gib"] is not None else "n/a (CPU)")
        steady = (f"{stage2['steady_step_seconds']:.2f} s per step (median of {stage2['steady_steps_timed']} after the "
                  "first)" if stage2["steady_step_seconds"] is not None else "no steady step timed (one step only)")
        lines += ["", f"Stage II with the real trainer (configs/care_paper/stage2.yaml: LoRA r={stage2['lora_r']} on the "
                  f"document tower, gradient checkpointing {'on' if stage2['gradient_checkpointing'] else 'off'}, batch "
                  f"{stage2['batch_size']} x (1 + {stage2['negatives']}) documents of up to "
                  f"{stage2['document_max_length']} tokens), **GradCache chunk {stage2['grad_cache_chunk_size']}** "
                  f"sequences: {stage2['steps']} steps, {steady}, {stage2['seconds_total']:.1f} s with model loading "
                  f"(the final checkpoint and model saves are not run); peak GPU memory {memory}; loss by step "
                  f"{', '.join(f'{v:.3f}' for v in stage2['losses'])}."]
    lines += ["", f"Command: `{command}`"]
    return lines
