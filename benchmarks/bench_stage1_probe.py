"""Stage I probes: which Stage I setting moves CARE's query tower on real weights (issue 15).

Each probe is one Stage I run (the e5 preset's ``stage1.yaml`` plus the probe's overrides) from a
finished ``bench_real_weights.py`` seed: the 6-layer query tower starts from that seed's
``init_query`` (or, with ``start=cut``, from the fine-tuned document tower cut to 6 strided layers;
with ``start=stage1``, from that seed's finished Stage I query tower: more epochs on top of the recipe's;
``ffn=W`` also narrows the starting tower's feed-forward blocks to W neurons, ranked on the training queries,
``care.models.ffn_prune``) and aligns to that seed's frozen, fine-tuned ``init_document`` tower. A probe is scored two ways:

- nDCG@10 of the Stage I CARE model (probe query tower + the frozen document tower), and
- the mean cosine between the probe's and the document tower's *query* vectors (``query: `` + text)
  of the first test queries: how closely the cut reproduces the tower it is aligned to.

The record also scores the frozen document tower on both sides (that seed's symmetric large): each probe's ratio to it.

Probes choose settings, so they score the **validation** split (``--split validation``, the default: the held-out
training queries of ``bench_real_weights.py --validation``, whose seed must have finished ``init_document``); the
record keeps the choice in the selection protocol's block (``extra.selection``, :mod:`care.bench.selection`: every
probe's score, the best, the split). ``--split test`` is refused unless ``--select-on-test`` is given too, and then the
record and its table mark the choice (the issue-15 and issue-41 probes were run so, before this rule).

Probes run one epoch by default (``optim.epochs=1``, a quarter of the preset's Stage I) so several
fit in an hour of two CPU cores; they rank settings, the full recipe confirms the winner. Finished
probes are skipped on rerun (resumable like every stage). The record goes to
``benchmarks/results/real_weights/stage1_probe_<split>_seed<N>.json`` (``stage1_probe_<split>_<tag>_seed<N>`` with
``--tag``) with a markdown table beside it.

Usage::

    python -m benchmarks.bench_real_weights --validation --seeds 0 --max-length 128   # the seed's validation towers
    python -m benchmarks.bench_stage1_probe --seed 0 --max-length 128 \\
        --probe "tau 0.1=loss.temperature=0.1" --probe "tau 0.02=loss.temperature=0.02" \\
        --probe "tau 0.1 + mse x10=loss.temperature=0.1;loss.lambda_mse=10"

Name every setting a probe depends on (``NAME=`` means "the preset as it is now", which changes
with the preset); a probe folder refuses to be rerun under the same name with other settings.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

from benchmarks._common import RESULTS, RUNS, add_allow_dirty, dev_set, pin_code, portable
from benchmarks.real_weights_setup import (
    CONFIGS,
    EXPERIMENT,
    PROBE_FOLDER,
    e5_spec,
    finished,
    model_spec,
    narrowed,
    prepare,
    score_rows,
)
from care.bench.record import BenchmarkRecord, write_record
from care.bench.selection import SELECT_ON_TEST_FLAG, TEST, TEST_FOOTNOTE, VALIDATION, Selection, selection_split
from care.data.io import atomic_write, iter_jsonl
from care.models.e5_export import QUERY_PREFIX
from care.train.engine.config import TrainConfig, apply_overrides, load_config
from care.train.engine.trainer import read_result, train
from care.train.recipes.recipe import record_run_settings

logger = logging.getLogger("bench_stage1_probe")

#: Settings every probe shares unless it overrides them: a quarter of the preset's Stage I.
PROBE_DEFAULTS = ["optim.epochs=1"]
#: Scored queries (of the probed split) whose query-vector cosine to the document tower is reported.
COSINE_QUERIES = 400
#: The row of the seed's frozen document tower on both sides: the probes' reference.
REFERENCE = "symmetric large (the document tower, both sides)"
#: ``start=`` values: the seed's init_query tower, the fine-tuned document tower cut to the query depth,
#: or the seed's finished Stage I query tower (a probe of more Stage I epochs).
STARTS = ("init_query", "cut", "stage1")


def parse_probe(text: str) -> tuple[str, list[str]]:
    """``NAME=KEY=VALUE;KEY=VALUE`` -> ``(NAME, [KEY=VALUE, ...])``; ``NAME=`` is the preset unchanged."""
    name, _, rest = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"--probe {text!r}: expected NAME=KEY=VALUE;... (NAME= for the preset)")
    return name, [item for item in rest.split(";") if item]


def query_vectors(tower: Path, queries: list[str]):
    """The tower's normalised vectors of ``query: `` + each query (numpy, one row per query)."""
    from sentence_transformers import SentenceTransformer

    texts = [QUERY_PREFIX + q for q in queries]
    return SentenceTransformer(str(tower), device="cpu").encode(texts, normalize_embeddings=True, batch_size=64)


def mean_pairwise_cosine(vectors) -> float:
    """Mean cosine between two *different* rows: how much of every vector is one shared direction
    (e5's vectors are anisotropic: unrelated queries score far above 0)."""
    n = len(vectors)
    total = float((vectors.sum(axis=0) ** 2).sum())  # sum over all pairs i, j of <v_i, v_j>, diagonal included
    return (total - n) / (n * (n - 1))


def run_probe(name: str, settings: list[str], recipe: Path, work: Path, alignment: Path,
              length: list[str], layers: int, seed: int, queries_file: Path) -> tuple[Path, float | None]:
    """Train one probe (skipped when finished with the same settings; refused when its folder holds
    other settings); returns its folder and its recorded training wall time."""
    from care.models.prune import prune_layers

    folder = work / name.replace(" ", "_")
    document = recipe / "init_document" / "document"
    start = next((s.split("=", 1)[1] for s in settings if s.startswith("start=")), "init_query")
    if start not in STARTS:
        raise SystemExit(f"--probe {name}: start={start!r}; choose from {', '.join(STARTS)}")
    width = next((s.split("=", 1)[1] for s in settings if s.startswith("ffn=")), None)
    if width is not None and not (width.isdigit() and int(width) > 0):
        raise SystemExit(f"--probe {name}: ffn={width!r}; give the feed-forward width as a positive whole number")
    overrides = [s for s in settings if not s.startswith(("start=", "ffn="))]
    query = recipe / start / "query"
    if start == "stage1" and not finished(recipe / "stage1"):
        raise SystemExit(f"--probe {name}: start=stage1 needs {recipe / 'stage1'} finished (bench_real_weights.py)")
    if start == "cut":
        query = work / f"document-L{layers}-strided"
        if not query.is_dir():
            prune_layers(document, layers, query, keep="strided")
    if width is not None:
        query = narrowed(query, int(width), work / f"{start}-L{layers}-ffn{width}", queries_file)
    record_run_settings(folder / "probe.json", {"settings": settings, "length": length, "seed": seed,
                                                "layers": layers, "defaults": PROBE_DEFAULTS}, "Stage I probe",
                        "give the probe another name")
    if not finished(folder):
        _train_probe(folder, query, document, alignment, [f"seed={seed}", *length, *PROBE_DEFAULTS, *overrides], recipe)
    return folder, read_result(folder).train_seconds


def _train_probe(folder: Path, query: Path, document: Path, alignment: Path, overrides: list[str], recipe: Path) -> None:
    cache = recipe / "stage1" / "teacher_cache"  # the same frozen tower's targets: computed once per seed
    if cache.is_dir() and not (folder / "teacher_cache").exists():
        shutil.copytree(cache, folder / "teacher_cache")
    data = apply_overrides(load_config(CONFIGS / "stage1.yaml").to_dict(),
                           ["runtime.progress_bar=false", f"output_dir={folder}", f"model.query_model={query}",
                            f"model.document_model={document}", f"data.train_file={alignment}", *overrides])
    train(TrainConfig.from_dict(data), resume=True)


def probe_selection(scores: dict[str, dict], split: str) -> Selection:
    """The probes' choice in the selection protocol: every probe's nDCG@10 on ``split``, the best (a tie: the probe
    given first)."""
    candidates = {name: row["ndcg_at_10"] for name, row in scores.items()}
    return Selection("Stage I probe", split, max(candidates, key=lambda n: candidates[n]), candidates,
                     metric="ndcg_at_10", rows=list(candidates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--e5", type=Path, default=RUNS / "e5" / "L12")
    parser.add_argument("--work", type=Path, default=RUNS / "real_weights",
                        help="bench_real_weights.py's --work (the seed's recipe must have finished init_document)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--probe", action="append", type=parse_probe, required=True, metavar="NAME=KEY=VALUE;...",
                        help="a Stage I setting to probe (repeatable); start=cut starts from the cut document tower, "
                             "start=stage1 from the seed's finished Stage I query tower")
    parser.add_argument("--split", choices=(VALIDATION, TEST), default=VALIDATION,
                        help="the split the probes are scored on (test only with --select-on-test)")
    parser.add_argument(SELECT_ON_TEST_FLAG, action="store_true",
                        help="allow --split test: the record and its table then mark the choice as made on test")
    parser.add_argument("--tag", default="", help="name the record stage1_probe_<split>_<tag>_seed<K> (keeps other "
                                                   "probe records)")
    args = add_allow_dirty(parser).parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    split = selection_split(args.split, select_on_test=args.select_on_test, where="bench_stage1_probe --split")
    args.data = args.data or dev_set()
    pin_code(args.out, args)  # the code that trains, not the checkout's when the record is written
    prep = prepare(args.data, args.work, split == VALIDATION, e5_spec(args.e5, "float32"), None)
    seed_dir = args.work / prep.name / f"seed{args.seed}"
    recipe = seed_dir / "care" / "recipe"
    if not finished(recipe / "init_document"):
        flag = " --validation" if split == VALIDATION else ""
        raise SystemExit(f"{recipe / 'init_document'} is not finished: run "
                         f"python -m benchmarks.bench_real_weights{flag} --seeds {args.seed} first")
    length = ([f"model.query_max_seq_length={args.max_length}", f"model.document_max_seq_length={args.max_length}"]
              if args.max_length else [])
    queries_file = prep.task_dir / "queries.jsonl" if split == VALIDATION else args.data / "test_queries.jsonl"
    queries = [r["text"] for _, r in iter_jsonl(queries_file)][:COSINE_QUERIES]
    target = query_vectors(recipe / "init_document" / "document", queries)
    scores, seconds = {}, {}
    for name, settings in args.probe:
        folder, seconds[name] = run_probe(name, settings, recipe, seed_dir / PROBE_FOLDER, prep.alignment_file,
                                          length, args.layers, args.seed, prep.train_file)
        row = score_rows({name: model_spec(folder / "model")}, prep, seed_dir / PROBE_FOLDER,
                         args.work / "embedding_cache")[name]
        row["query_cosine_to_document_tower"] = float((query_vectors(folder / "query", queries) * target).sum(axis=1).mean())
        scores[name] = row
        logger.info("probe %s %s: nDCG@10 %.4f, cosine %.4f", name, settings, row["ndcg_at_10"],
                    row["query_cosine_to_document_tower"])
    reference = score_rows({REFERENCE: model_spec(recipe / "init_document" / "document")}, prep,
                           seed_dir / PROBE_FOLDER, args.work / "embedding_cache")[REFERENCE]
    key = f"stage1_probe_{prep.name}{'_' + args.tag if args.tag else ''}_seed{args.seed}"
    record = BenchmarkRecord(EXPERIMENT, key, config={"probes": dict(args.probe), "defaults": PROBE_DEFAULTS,
                                                      "length_overrides": length, "layers": args.layers,
                                                      "cosine_queries": COSINE_QUERIES, "split": split,
                                                      "stage1": portable(CONFIGS / "stage1.yaml")},
                             seeds=[args.seed], scores={**scores, REFERENCE: reference},
                             extra={"train_seconds": seconds,  # the trainer's, summed over resumes
                                    "document_tower_mean_pairwise_query_cosine": mean_pairwise_cosine(target),
                                    "selection": [probe_selection(scores, split).to_dict()]})
    write_record(record, args.out)
    lines = [f"# Stage I probes — dev set, {prep.name} split, seed {args.seed}, {args.layers}-layer query tower "
             f"({' '.join(PROBE_DEFAULTS)} unless set)", "",
             "| probe | settings | nDCG@10 (Stage I model) | of symmetric large | query cosine to the document tower |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {'; '.join(settings) or 'preset'} | {scores[name]['ndcg_at_10']:.4f} | "
              f"{scores[name]['ndcg_at_10'] / reference['ndcg_at_10']:.1%} | "
              f"{scores[name]['query_cosine_to_document_tower']:.4f} |" for name, settings in args.probe]
    if split == TEST:
        lines += ["", TEST_FOOTNOTE.replace("this row", "these probes")]
    lines += ["", f"{REFERENCE}: nDCG@10 {reference['ndcg_at_10']:.4f} (the seed's fine-tuned 12-layer tower every probe "
              "aligns to, on both sides)."]
    lines += ["", f"Two *different* test queries' vectors from the document tower have mean cosine "
              f"{record.extra['document_tower_mean_pairwise_query_cosine']:.3f}: a cosine near 1 between the cut's and "
              "the tower's vector of the same query can still leave the small differences that rank documents wrong."]
    with atomic_write(args.out / EXPERIMENT / f"{key}.md") as fh:
        fh.write("\n".join(lines) + "\n")
    print(json.dumps(scores, indent=1))  # noqa: T201 - the script's report


if __name__ == "__main__":
    main()
