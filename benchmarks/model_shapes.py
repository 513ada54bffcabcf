"""Parameter counts of the model presets, and (optionally) the tiny models built from a text sample.

Counts come from instantiating each preset's base model (``AutoModel``, no LM head) on the ``meta``
device — no weights, no memory. With ``--texts`` (a .txt or .jsonl sample such as the toyhom dev
set's ``train.jsonl``) it also times ``make_tiny_models`` and the tiny CARE model's CPU encoding
speed (one thread) for queries and documents.

    python -m benchmarks.model_shapes --texts "$CARE_DEV_SET/train.jsonl" \
        # -> benchmarks/results/model_shapes/presets.json
"""

from __future__ import annotations

import argparse
import itertools
import logging
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._common import RESULTS, portable
from benchmarks.bench_results import save
from care.models.presets import PRESETS, count_parameters

logger = logging.getLogger("model_shapes")

#: Tiny presets get their vocabulary from a tokenizer; this stand-in size only affects the count.
TINY_STAND_IN_VOCAB = 5000
ENCODE_SAMPLE = 256
BATCH_SIZE = 32
QUERY_MAX_TOKENS = 128
DOCUMENT_MAX_TOKENS = 256


def lora_parameters(shape) -> int:
    """Trainable parameters of the paper's LoRA (r=32, all projections) on a decoder preset (meta device)."""
    from care.models.lora import LoraSettings, add_lora
    from care.models.presets import build_random_model

    model = build_random_model(shape, device="meta")
    add_lora(model, LoraSettings())
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def preset_rows() -> list[dict]:
    rows = []
    for name, shape in PRESETS.items():
        overrides = {"vocab_size": TINY_STAND_IN_VOCAB} if shape.vocab_size <= 0 else {}
        rows.append({
            "preset": name,
            "kind": shape.kind,
            "hidden_size": shape.hidden_size,
            "layers": shape.num_hidden_layers,
            "vocab_size": overrides.get("vocab_size", shape.vocab_size),
            "parameters": count_parameters(shape, **overrides),
            "lora_r32_parameters": lora_parameters(shape) if shape.kind == "decoder" and not overrides else None,
        })
    return rows


def tiny_run(texts_path: Path, sample: int) -> dict:
    from care.models.asymmetric import build_care_model
    from care.models.cli import iter_training_texts
    from care.models.document import build_document_encoder
    from care.models.lora import LoraSettings
    from care.models.presets import make_tiny_models
    from care.models.query import build_query_encoder

    texts = list(itertools.islice(iter_training_texts(texts_path), sample))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        query_dir, document_dir = make_tiny_models(texts, tmp)
        build_seconds = time.perf_counter() - start
        query = build_query_encoder(query_dir, max_seq_length=QUERY_MAX_TOKENS)
        document = build_document_encoder(document_dir, lora=LoraSettings(), output_dim=query.get_embedding_dimension(),
                                          max_seq_length=DOCUMENT_MAX_TOKENS)
        care = build_care_model(query, document)
        probe = texts[:ENCODE_SAMPLE]
        timings = {}
        for route in ("query", "document"):
            encode = getattr(care, f"encode_{route}")
            start = time.perf_counter()
            encode(probe, batch_size=BATCH_SIZE, show_progress_bar=False)
            timings[f"{route}_texts_per_second"] = round(len(probe) / (time.perf_counter() - start), 1)
        return {
            "texts_file": portable(texts_path),
            "texts_used": len(texts),
            "make_tiny_models_seconds": round(build_seconds, 2),
            "query_vocab": len(query[0].tokenizer),
            "document_vocab": len(document[0].tokenizer),
            "query_parameters": sum(p.numel() for p in query.parameters()),
            "document_parameters": sum(p.numel() for p in document.parameters()),
            "document_lora_parameters": sum(p.numel() for p in document.parameters() if p.requires_grad),
            "encode_sample": len(probe),
            "query_max_tokens": QUERY_MAX_TOKENS,
            "document_max_tokens": DOCUMENT_MAX_TOKENS,
            "instruction_tokens": len(query[0].tokenizer(care.prompts["query"], add_special_tokens=False)["input_ids"]),
            **timings,
            "threads": torch.get_num_threads(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=Path, help="optional text sample (.txt / .jsonl) for the tiny-model run")
    parser.add_argument("--sample", type=int, default=20000, help="max texts read from --texts")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    report: dict = {"presets": preset_rows()}
    if args.texts:
        report["tiny"] = tiny_run(args.texts, args.sample)
    save("model_shapes", "presets", config={"texts": portable(args.texts) if args.texts else None, "sample": args.sample},
         scores=report, results=args.out)
    print("| preset | kind | hidden | layers | vocab | parameters | LoRA r=32 parameters |")
    print("|---|---|---|---|---|---|---|")
    for row in report["presets"]:
        print(f"| {row['preset']} | {row['kind']} | {row['hidden_size']} | {row['layers']} | {row['vocab_size']} | "
              f"{row['parameters']:,} | {'' if row['lora_r32_parameters'] is None else format(row['lora_r32_parameters'], ',')} |")
    if "tiny" in report:
        print()
        for key, value in report["tiny"].items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
