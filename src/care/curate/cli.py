"""``care curate ...``: the data-curation and benchmark-construction pipeline as commands.

Each command is a thin wrapper over a Python function of :mod:`care.curate`; heavy imports stay
inside the command functions so ``care --help`` stays fast.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import typer

logger = logging.getLogger(__name__)

curate_app = typer.Typer(
    name="curate",
    help="Curate training data and build CMedTEB-style benchmarks (anonymise, diversify, LLM judges, builders, audit).",
    no_args_is_help=True,
)


def _print(obj: object) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, indent=2))


def _load_judges(path: Path):
    from care.curate.judges.cache import JudgmentCache
    from care.curate.judges.config import JudgesConfig
    from care.curate.judges.factory import build_judges

    config = JudgesConfig.load(path)
    return config, build_judges(config), JudgmentCache(config.cache)


def _load_retrievers(specs: list[str], batch_size: int | None = None):
    from care.encoders.registry import load_model

    return [load_model(s, batch_size=batch_size) for s in specs]


@curate_app.command("anonymise")
def anonymise_cmd(
    input: Path = typer.Argument(..., help="JSONL file to anonymise."),
    output: Path = typer.Argument(..., help="Anonymised JSONL (same rows, texts with [TYPE] placeholders)."),
    field: list[str] | None = typer.Option(None, "--field", "-f", help="Text field(s) to clean; repeatable. Default: text, title, query, pos, neg, positive, negative."),
    types: list[str] | None = typer.Option(None, "--type", help="PII types to remove (PHONE ID EMAIL URL BANK_CARD MRN PASSPORT WECHAT QQ PLATE BIRTH_DATE NAME ADDRESS); repeatable. Default: all."),
    no_old_ids: bool = typer.Option(False, "--no-old-ids", help="Do not remove 15-digit pre-1999 resident IDs."),
    tagger: str = typer.Option("lac", "--tagger", help="Lexical tagger for names and places: lac (best, default), jieba (about 3x faster, lower recall) or thulac (if installed)."),
    no_clinical_terms: bool = typer.Option(False, "--no-clinical-terms", help="Do not protect clinical terms (drugs, herbs, symptoms ...) from being removed as names; see docs/curate.md."),
    report: Path | None = typer.Option(None, "--report", help="Write the removal report (counts by type) here."),
    chunk_size: int = typer.Option(1000, "--chunk-size", help="Rows per checkpointed chunk."),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Replace phone numbers, IDs, emails, URLs, bank cards, record numbers, passports, WeChat / QQ ids, plates, birth dates, names and addresses by typed placeholders."""
    from care.curate.pii.anonymiser import DEFAULT_FIELDS, AnonymiserConfig, anonymise_file
    from care.curate.pii.rules import PII_TYPES

    config = AnonymiserConfig(types=tuple(types) if types else PII_TYPES, old_ids=not no_old_ids, tagger=tagger,
                              clinical_terms=not no_clinical_terms)
    result = anonymise_file(input, output, fields=field or DEFAULT_FIELDS, config=config, chunk_size=chunk_size,
                            report_path=report, show_progress=not no_progress)
    _print(result.to_dict())


@curate_app.command("diversify")
def diversify_cmd(
    input: Path = typer.Argument(..., help="JSONL of texts ({\"id\", \"text\"} or any rows with --field)."),
    output: Path = typer.Argument(..., help="JSONL of the kept rows."),
    encoder: str = typer.Option("e5", "--encoder", "-e", help="Encoder spec (care.encoders.registry)."),
    role: str = typer.Option("document", "--role", help="query or document: picks the paper's defaults and the encoder role."),
    k: int | None = typer.Option(None, "--k", help="Neighbours retrieved per text (paper: 5)."),
    threshold: str | None = typer.Option(None, "--threshold", "-t", help="Similarity threshold, or 'auto' to calibrate the paper's for this encoder. Default: the paper's (0.85 queries, 0.78 documents), refused with the measured similarity distribution when the encoder's random pairs already exceed it."),
    max_similar: int | None = typer.Option(None, "--max-similar", "-n", help="Drop a text when more than n neighbours exceed the threshold (paper: 1)."),
    seed_size: int | None = typer.Option(None, "--seed-size", help="Texts inserted unfiltered to seed the index (paper: 5000)."),
    text_field: str = typer.Option("text", "--field", help="Field holding the text."),
    report: Path | None = typer.Option(None, "--report", help="Write the kept/dropped report (with examples) here."),
    chunk_size: int = typer.Option(512, "--chunk-size", help="Texts encoded and checkpointed per chunk."),
    batch_size: int = typer.Option(32, "--batch-size"),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Drop near-duplicates with the paper's dynamic vector index."""
    from care.curate.diversify import DiversifyConfig, diversify_file
    from care.encoders.base import Encoder
    from care.errors import CareError

    config = DiversifyConfig.for_role(role)
    if threshold is not None:
        config.calibration = "auto" if threshold.strip().lower() == "auto" else "off"
        if config.calibration == "off":
            try:
                config.threshold = float(threshold)
            except ValueError:
                raise CareError(f"--threshold must be a number (e.g. 0.9) or 'auto', got {threshold!r}") from None
    overrides = {"k": k, "max_similar": max_similar, "seed_size": seed_size}
    for name, value in overrides.items():
        if value is not None:
            setattr(config, name, value)
    config.chunk_size = chunk_size
    config.batch_size = batch_size
    model = _load_retrievers([encoder])[0]
    if not isinstance(model, Encoder):
        raise CareError(f"diversify needs a dense encoder; {encoder!r} is lexical")
    result = diversify_file(input, output, model, config, text_field=text_field, report_path=report,
                            show_progress=not no_progress)
    _print({k: v for k, v in result.items() if k != "examples"})


@curate_app.command("judge")
def judge_cmd(
    pairs: Path = typer.Argument(..., help="JSONL of {\"query_id\", \"query\", \"doc_id\", \"passage\"}."),
    output: Path = typer.Argument(..., help="JSONL of {query_id, doc_id, grades, label, score}."),
    judges: Path = typer.Option(..., "--judges", "-j", help="Judges config (YAML/JSON)."),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Grade pairs with every configured judge (cached, resumable) and apply the unanimous rule."""
    from care.curate.judges.labelling import judge_file

    config, judge_list, cache = _load_judges(judges)
    with cache:
        report = judge_file(pairs, judge_list, output, cache=cache, voting=config.voting, show_progress=not no_progress)
    _print({k: v for k, v in report.items()})


@curate_app.command("build-benchmark")
def build_benchmark_cmd(
    corpus: Path = typer.Option(..., "--corpus", help="corpus.jsonl"),
    queries: Path = typer.Option(..., "--queries", help="queries.jsonl"),
    retriever: list[str] = typer.Option(..., "--retriever", "-r", help="Retriever spec (bm25, e5, model folder ...); repeatable."),
    judges: Path = typer.Option(..., "--judges", "-j", help="Judges config (YAML/JSON)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output task folder."),
    depth: int = typer.Option(500, "--depth", help="Top-N pooled from each retriever."),
    rerank_negatives: int = typer.Option(20, "--rerank-negatives", help="Negatives per rerank example."),
    seed: int = typer.Option(0, "--seed"),
    instruction: str | None = typer.Option(None, "--instruction", help="Query instruction for dense retrievers."),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Pool candidates, judge with every judge, keep unanimous labels; write a task folder, rerank set and label report."""
    from care.curate.benchmark import BenchmarkConfig, build_benchmark

    config, judge_list, cache = _load_judges(judges)
    bconfig = BenchmarkConfig(depth=depth, rerank_negatives=rerank_negatives, seed=seed, instruction=instruction,
                              voting=config.voting)
    with cache:
        report = build_benchmark(corpus, queries, _load_retrievers(retriever), judge_list, out, cache=cache,
                                 config=bconfig, show_progress=not no_progress)
    _print({k: v for k, v in report.items() if k != "config"})


@curate_app.command("build-train")
def build_train_cmd(
    corpus: Path = typer.Option(..., "--corpus"),
    queries: Path = typer.Option(..., "--queries"),
    retriever: str = typer.Option(..., "--retriever", "-r", help="Retriever spec for the top-N candidates."),
    judges: Path = typer.Option(..., "--judges", "-j"),
    out: Path = typer.Option(..., "--out", "-o", help="Training JSONL {query, pos, neg}."),
    depth: int = typer.Option(50, "--depth", help="Candidates judged per query (paper: 50)."),
    max_negatives: int = typer.Option(7, "--max-negatives", help="Hard negatives kept per query."),
    prompt: str | None = typer.Option(None, "--prompt", help="Task instruction written into each row."),
    alignment_out: Path | None = typer.Option(None, "--alignment-out", help="Also write Stage I (q,q,q⁻)/(d,d,d⁻) rows here."),
    alignment_negatives: int = typer.Option(1, "--alignment-negatives"),
    alignment_sentences: int = typer.Option(0, "--alignment-sentences",
                                            help="Add up to N short corpus sentences as query-side alignment texts."),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Judge each query's top-N and write (query, positives, hard negatives); never a judged-relevant negative."""
    from care.curate.train_data import TrainDataConfig, build_train

    config, judge_list, cache = _load_judges(judges)
    with cache:
        stats = build_train(corpus, queries, _load_retrievers([retriever])[0], judge_list, out, cache=cache,
                            voting=config.voting, config=TrainDataConfig(depth=depth, max_negatives=max_negatives, prompt=prompt),
                            show_progress=not no_progress)
    if alignment_out is not None:
        extra = None
        from care.train.recipes.alignment_data import alignment_from_training_file, corpus_sentences

        if alignment_sentences:
            extra = corpus_sentences(corpus, limit=alignment_sentences)
            stats["alignment_sentences"] = len(extra)

        stats["alignment_rows"] = alignment_from_training_file(out, alignment_out, n_negatives=alignment_negatives,
                                                               extra_queries=extra or ())
    _print(stats)


@curate_app.command("build-sts")
def build_sts_cmd(
    queries: Path = typer.Option(..., "--queries", help="queries.jsonl ({\"id\", \"text\"})."),
    synonyms: Path = typer.Option(..., "--synonyms", help="Synonym dictionary: one group per line, terms separated by tabs, commas or spaces."),
    llm: Path = typer.Option(..., "--llm", help="LLM config (YAML/JSON: id, base_url, model, api_key_env, ...)."),
    out: Path = typer.Option(..., "--out", "-o", help="STS JSONL {sentence1, sentence2, score}."),
    cache: Path | None = typer.Option(None, "--cache", help="SQLite cache of generations (default <out>.cache.sqlite)."),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Generate synonym-swap positives, hard negatives and easy negatives with an LLM; check and write STS pairs."""
    from care.curate.sts import StsConfig, build_sts, load_llm_config

    report = build_sts(queries, synonyms, load_llm_config(llm), out, cache_path=cache, config=StsConfig(),
                       show_progress=not no_progress)
    _print(report)


@curate_app.command("audit")
def audit_cmd(
    task: Path = typer.Argument(..., help="Retrieval task folder (corpus.jsonl, queries.jsonl, qrels.tsv)."),
    retriever: str = typer.Option(..., "--retriever", "-r"),
    judges: Path = typer.Option(..., "--judges", "-j"),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for false_negatives.jsonl and audit_report.json."),
    top_k: int = typer.Option(10, "--top-k"),
    split: str | None = typer.Option(None, "--split"),
    no_progress: bool = typer.Option(False, "--no-progress"),
) -> None:
    """Re-judge the top-k of a benchmark and report likely false negatives (the paper's Appendix E)."""
    from care.curate.audit import audit_benchmark

    config, judge_list, cache = _load_judges(judges)
    with cache:
        report = audit_benchmark(task, _load_retrievers([retriever])[0], judge_list, out, top_k=top_k, split=split,
                                 cache=cache, voting=config.voting, show_progress=not no_progress)
    _print({k: v for k, v in report.items() if k != "examples"})


def register(app: typer.Typer) -> None:
    """Add ``care curate ...`` to the root CLI."""
    app.add_typer(curate_app, name="curate")
