"""GPU figures at the paper's shapes (random weights measure speed and memory as real ones do).

1. Corpus encoding with the document tower at Qwen3-4B shape in bf16, through the same code
   ``care index build`` and ``care bench`` use (``care.encoders.registry.load_model`` ->
   ``HFEncoder.encode_documents``: last-token pooling, EOS appended): documents per second, tokens per
   second, and the achieved model FLOP rate as a fraction of (a) the GPU's bf16 dense peak from its
   datasheet and (b) a bf16 matrix product measured in the same run.
2. A few Stage II steps at the paper's shapes with the real trainer (``care.train``): a
   gte-multilingual-base-shaped query tower and the Qwen3-4B-shaped document tower with LoRA r=32,
   bf16, gradient checkpointing, GradCache, 1 positive + 7 hard negatives, batch 16: step time and
   peak GPU memory, to show it fits one GPU.

Texts are the dev set's answers when ``--data`` holds a ``corpus.jsonl`` (else synthetic Chinese
text); the tokenizer is a character tokenizer trained on them (one token per character). Writes a
record to ``<out>/gpu_shapes/<device>.json`` and a markdown table next to it. Needs a CUDA GPU.

Usage::

    python benchmarks/bench_gpu_shapes.py --data ../shared/data/toyhom_neike_sample --out benchmarks/results
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
import time
from pathlib import Path

from care.bench.record import BenchmarkRecord, write_record
from care.data.io import iter_jsonl, write_jsonl

logger = logging.getLogger("bench_gpu_shapes")

EXPERIMENT = "gpu_shapes"
#: bf16 dense tensor-core peaks from the datasheets (TFLOP/s), by device-name substring.
BF16_PEAK_TFLOPS = {"H200": 989.4, "H100 80GB HBM3": 989.4, "H100": 989.4, "A100": 312.0}
#: Matrix product used to measure the reachable bf16 rate in the same run.
MATMUL_SIZE = 8192
DOCUMENT_MAX_LENGTH = 512


def _texts(data: Path | None, n: int) -> list[str]:
    if data is not None and (data / "corpus.jsonl").is_file():
        texts = [row["text"] for _, row in iter_jsonl(data / "corpus.jsonl")]
    else:
        texts = [("患者咳嗽发热三天，建议多喝水，注意休息，必要时到医院检查血常规。" * 4)[: 60 + i % 200] for i in range(n)]
    return (texts * (n // len(texts) + 1))[:n]


def measured_matmul_tflops() -> float:
    import torch

    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * MATMUL_SIZE ** 3 * reps / (time.perf_counter() - start) / 1e12


def build_towers(texts: list[str], work: Path) -> tuple[Path, Path, int]:
    """A random Qwen3-4B-shaped document tower and a gte-multilingual-base-shaped query tower (bf16), saved."""
    import torch

    from care.models.presets import GTE_MULTILINGUAL_BASE, QWEN3_4B, build_random_model
    from care.models.tokenizer import train_char_tokenizer

    out = []
    for shape, kind in ((dataclasses.replace(GTE_MULTILINGUAL_BASE, max_position_embeddings=514), "encoder"),
                        (QWEN3_4B, "decoder")):
        tokenizer = train_char_tokenizer(texts, kind=kind, model_max_length=shape.max_position_embeddings)
        overrides = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
        if kind == "decoder":
            overrides["eos_token_id"] = tokenizer.eos_token_id
        model = build_random_model(shape, dtype=torch.bfloat16, device="cuda", **overrides)
        target = work / shape.name
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
        out.append((target, params))
        del model
        torch.cuda.empty_cache()
    return out[0][0], out[1][0], out[1][1]


def bench_encoding(document_dir: Path, texts: list[str], batch_size: int, non_embedding_params: int,
                   layers: int, hidden: int) -> dict:
    import torch

    from care.encoders.registry import load_model

    encoder = load_model(f"{document_dir}?pooling=lasttoken&dtype=bfloat16&max_length={DOCUMENT_MAX_LENGTH}"
                         f"&batch_size={batch_size}&device=cuda")
    encoder.encode_documents(texts[:batch_size])  # warm-up: kernels, allocator
    tokenizer = encoder.model.tokenizer
    lengths = [min(len(ids), DOCUMENT_MAX_LENGTH) for ids in tokenizer(texts)["input_ids"]]
    torch.cuda.synchronize()
    start = time.perf_counter()
    encoder.encode_documents(texts)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = sum(lengths)
    # forward FLOPs: 2 per parameter per token, plus attention scores and mixing (4 * layers * len^2 * hidden)
    flops = 2 * non_embedding_params * tokens + sum(4 * layers * n * n * hidden for n in lengths)
    return {"documents": len(texts), "tokens": tokens, "seconds": seconds, "documents_per_s": len(texts) / seconds,
            "tokens_per_s": tokens / seconds, "model_tflops": flops / seconds / 1e12, "batch_size": batch_size,
            "max_length": DOCUMENT_MAX_LENGTH, "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}


def bench_stage2(query_dir: Path, document_dir: Path, texts: list[str], work: Path, steps: int) -> dict:
    """``steps`` Stage II steps of the real trainer at the paper's settings (configs/care_paper/stage2.yaml)."""
    import torch

    from care.train.config import apply_overrides, load_config, TrainConfig
    from care.train.trainer import train

    rows = [{"query": t[:30], "pos": [t], "neg": [texts[(i + k) % len(texts)] for k in range(1, 8)]}
            for i, t in enumerate(texts[:256])]
    train_file = work / "stage2_train.jsonl"
    write_jsonl(train_file, rows)
    config = Path(__file__).resolve().parents[1] / "configs" / "care_paper" / "stage2.yaml"
    data = apply_overrides(load_config(config).to_dict(), [
        f"output_dir={work / 'stage2'}", f"model.query_model={query_dir}", f"model.document_model={document_dir}",
        "model.query_pooling=cls", "model.trust_remote_code=false", f"data.train_file={train_file}",
        f"optim.max_steps={steps}", "runtime.log_with=null", "runtime.progress_bar=false", "checkpoint.every_steps=100000",
        "model.lora={r: 32, alpha: 64, dropout: 0.05, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"])
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = train(TrainConfig.from_dict(data))
    seconds = time.perf_counter() - start
    metrics = [line for line in (work / "stage2" / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return {"steps": result.global_step, "seconds_total": seconds, "batch_size": data["optim"]["batch_size"],
            "negatives": data["data"]["n_negatives"], "grad_cache_chunk_size": data["optim"]["grad_cache_chunk_size"],
            "document_max_length": data["model"]["document_max_seq_length"], "lora_r": 32,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30, "final_loss": result.final_loss,
            "logged_steps": len(metrics)}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--documents", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu_shapes needs a CUDA GPU")
    from care.models.presets import QWEN3_4B

    device = torch.cuda.get_device_name(0)
    peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in device), None)
    texts = _texts(args.data, args.documents)
    matmul = measured_matmul_tflops()
    with tempfile.TemporaryDirectory() as tmp:
        query_dir, document_dir, params = build_towers(texts, Path(tmp))
        encoding = bench_encoding(document_dir, texts, args.batch_size, params, QWEN3_4B.num_hidden_layers,
                                  QWEN3_4B.hidden_size)
        encoding["fraction_of_datasheet_peak"] = encoding["model_tflops"] / peak if peak else None
        encoding["fraction_of_measured_matmul"] = encoding["model_tflops"] / matmul
        torch.cuda.empty_cache()
        stage2 = bench_stage2(query_dir, document_dir, texts, Path(tmp), args.steps)
    record = BenchmarkRecord(EXPERIMENT, device.replace(" ", "_"), config=vars(args) | {"data": str(args.data),
                                                                                          "out": str(args.out)},
                             scores={}, latencies={"encoding": encoding, "stage2": stage2},
                             extra={"bf16_datasheet_peak_tflops": peak, "bf16_matmul_tflops_measured": matmul,
                                    "document_tower": "Qwen3-4B shape (36 x 2560, GQA 32/8), random bf16 weights",
                                    "query_tower": "gte-multilingual-base shape (12 x 768), random weights"})
    path = write_record(record, args.out)
    lines = [f"# Paper shapes on {device} (random weights)", "",
             f"Document tower (Qwen3-4B shape, bf16) encoding {encoding['documents']} documents (batch "
             f"{encoding['batch_size']}, up to {DOCUMENT_MAX_LENGTH} tokens): {encoding['documents_per_s']:.0f} docs/s, "
             f"{encoding['tokens_per_s']:.0f} tokens/s, {encoding['model_tflops']:.0f} TFLOP/s = "
             f"{encoding['fraction_of_measured_matmul']:.0%} of the bf16 matrix product measured here "
             f"({matmul:.0f} TFLOP/s)" + (f", {encoding['fraction_of_datasheet_peak']:.0%} of the datasheet peak "
                                           f"({peak:.0f})" if peak else "") + ".",
             "", f"Stage II at the paper's settings (LoRA r=32, bf16, batch {stage2['batch_size']} x (1 + "
             f"{stage2['negatives']}) documents of up to {stage2['document_max_length']} tokens, GradCache chunk "
             f"{stage2['grad_cache_chunk_size']}): {stage2['steps']} steps in {stage2['seconds_total']:.1f} s "
             f"(model loading included), peak GPU memory {stage2['peak_memory_gib']:.1f} GiB.",
             "", f"Command: `{record.command}`"]
    (path.with_suffix(".md")).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))  # noqa: T201 - the script's report


if __name__ == "__main__":
    main()
