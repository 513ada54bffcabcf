"""GPU figures at the paper's shapes (random weights measure speed and memory as real ones do).

1. Corpus encoding with the document tower at Qwen3-4B shape in bf16, through the same code
   ``care index build`` and ``care bench`` use (``care.encoders.registry.load_model`` ->
   ``HFEncoder.encode_documents``: last-token pooling, EOS appended): documents per second, tokens per
   second, and the achieved model FLOP rate as a fraction of (a) the GPU's bf16 dense peak from its
   datasheet and (b) a bf16 matrix product measured in the same run.
2. A few Stage II steps at the paper's shapes with the real trainer (``care.train``): a
   gte-multilingual-base-shaped query tower and the Qwen3-4B-shaped document tower with LoRA r=32,
   bf16, gradient checkpointing, GradCache, 1 positive + 7 hard negatives, batch 16: step time and
   peak GPU memory, to show it fits one GPU.

Texts are the dev set's answers when ``--data`` holds a ``corpus.jsonl`` (else synthetic Chinese
text); the tokenizer is a character tokenizer trained on them (one token per character, so token counts
are about 1.4x what Qwen3's own tokenizer gives the same Chinese text: tokens/s is the comparable figure,
documents/s is not). Writes a record to ``<out>/gpu_shapes/<device>.json`` and a markdown table next to it.
Needs a CUDA GPU; ``--tiny`` runs the same code path with the tiny shapes on the CPU in seconds (a smoke
check of the script, no figure worth recording; it writes nothing unless ``--out`` is given).

The logic is the package's: :mod:`care.bench.gpu_shapes` (the setting, texts, towers, encoding through
``care.bench.encoding_throughput``), :mod:`care.train.recipes.stage2_timing` (the Stage II steps, timed by
``care.train.engine.step_timing``), :func:`care.bench.reports.gpu_shapes.report_lines` (the report); this page
reads the flags and writes the record.

Usage::

    python -m benchmarks.bench_gpu_shapes --data "$CARE_DEV_SET" --out benchmarks/results
    python -m benchmarks.bench_gpu_shapes --tiny --documents 32 --steps 2
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import tempfile
from pathlib import Path

from care.bench.encoding_throughput import MATMUL_SIZE, datasheet_peak_tflops, measured_matmul_tflops
from care.bench.gpu_shapes import (
    EXPERIMENT,
    bench_encoding,
    build_towers,
    paper_setting,
    record_name,
    shape_texts,
    tiny_setting,
)
from care.bench.locations import RESULTS, portable
from care.bench.record import COMMIT_ENV, BenchmarkRecord, invocation, write_record
from care.bench.reports.gpu_shapes import report_lines
from care.train.recipes.stage2_timing import bench_stage2

logger = logging.getLogger("bench_gpu_shapes")
#: Side of the matrix product timed on the CPU (the tiny smoke run).
CPU_MATMUL_SIZE = 256


def main() -> None:
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder with a corpus.jsonl whose texts are encoded")
    parser.add_argument("--out", type=Path, default=None,
                        help="results root (default: benchmarks/results on a GPU; nothing written with --tiny)")
    parser.add_argument("--documents", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[64], help="encoding batch sizes to time")
    parser.add_argument("--steps", type=int, default=3, help="Stage II optimiser steps (>= 2 for a steady step time)")
    parser.add_argument("--grad-cache-chunk", type=int, nargs="+", default=[None],
                        help="Stage II GradCache chunk sizes to time (sequences per chunk; default: the paper config's)")
    parser.add_argument("--name", default="", help="suffix of the record's file name (keeps runs of other settings apart)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU: a smoke check of this script")
    parser.add_argument("--commit", default="", help="the commit the code came from, where the copy has no .git "
                                                      "(sets $CARE_GIT_COMMIT; a git checkout's own commit wins)")
    args = parser.parse_args()
    if args.commit:  # only where git cannot answer (care.bench.record.git_commit): never a commit typed over git's
        os.environ.setdefault(COMMIT_ENV, args.commit)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    setting = tiny_setting() if args.tiny else paper_setting()
    if setting.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu_shapes needs a CUDA GPU (or --tiny for the CPU smoke check)")
    out = args.out if args.out is not None or args.tiny else RESULTS
    device = torch.cuda.get_device_name(0) if setting.device == "cuda" else f"CPU ({setting.document_shape.name})"
    peak = datasheet_peak_tflops(device) if setting.device == "cuda" else None
    texts = shape_texts(args.data, args.documents)
    matmul = measured_matmul_tflops(setting.device, setting.dtype, MATMUL_SIZE if setting.device == "cuda" else CPU_MATMUL_SIZE)
    with tempfile.TemporaryDirectory() as tmp:
        query_dir, document_dir, params = build_towers(texts, Path(tmp), setting)
        encodings = []
        for batch_size in args.batch_size:
            encoding = bench_encoding(document_dir, texts, batch_size, params, setting)
            encoding["fraction_of_datasheet_peak"] = encoding["model_tflops"] / peak if peak else None
            encoding["fraction_of_measured_matmul"] = encoding["model_tflops"] / matmul
            encodings.append(encoding)
            if setting.device == "cuda":
                torch.cuda.empty_cache()
        stages = []
        for chunk in args.grad_cache_chunk:
            overrides = () if chunk is None else (("optim.grad_cache_chunk_size", chunk),)
            run_setting = dataclasses.replace(setting, stage2_overrides=(*setting.stage2_overrides, *overrides))
            stages.append(bench_stage2(query_dir, document_dir, texts, Path(tmp) / f"chunk{chunk}", args.steps,
                                       run_setting))
    record = BenchmarkRecord(EXPERIMENT, record_name(device, args.name),
                             config=vars(args) | {"data": portable(args.data), "out": portable(out)},
                             scores={}, latencies={"encoding": encodings, "stage2": stages},
                             extra={"bf16_datasheet_peak_tflops": peak, "matmul_tflops_measured": matmul,
                                    "document_tower": dataclasses.asdict(setting.document_shape),
                                    "query_tower": dataclasses.asdict(setting.query_shape),
                                    "document_non_embedding_parameters": params, "dtype": setting.dtype,
                                    "transformers": transformers.__version__,
                                    "weights": "random (speed and memory only)"})
    if out is None:
        record.command = invocation()
    else:
        path = write_record(record, out)
    lines = report_lines(device, setting, encodings, stages, matmul, peak, record.command)
    if out is not None:
        path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))  # noqa: T201 - the script's report


if __name__ == "__main__":
    main()
