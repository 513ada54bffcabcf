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
text); the tokenizer is a character tokenizer trained on them (one token per character, so token counts
are about 1.4x what Qwen3's own tokenizer gives the same Chinese text: tokens/s is the comparable figure,
documents/s is not). Writes a record to ``<out>/gpu_shapes/<device>.json`` and a markdown table next to it.
Needs a CUDA GPU; ``--tiny`` runs the same code path with the tiny shapes on the CPU in seconds (a smoke
check of the script, no figure worth recording; it writes nothing unless ``--out`` is given).

The timing routines are the package's: ``care.bench.encoding_throughput`` (encoding, FLOP rate, the matmul
reference) and ``care.train.engine.step_timing`` (trainer steps); this script picks the shapes, texts and report.

Usage::

    python -m benchmarks.bench_gpu_shapes --data "$CARE_DEV_SET" --out benchmarks/results
    python -m benchmarks.bench_gpu_shapes --tiny --documents 32 --steps 2
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._common import RESULTS, portable
from care.bench.encoding_throughput import (
    MATMUL_SIZE,
    datasheet_peak_tflops,
    document_encoding_throughput,
    measured_matmul_tflops,
)
from care.bench.record import COMMIT_ENV, BenchmarkRecord, invocation, write_record
from care.data.io import iter_jsonl, write_jsonl

if TYPE_CHECKING:
    from care.models.presets import DecoderShape, EncoderShape

logger = logging.getLogger("bench_gpu_shapes")

EXPERIMENT = "gpu_shapes"
DOCUMENT_MAX_LENGTH = 512
#: LoRA of the paper's Stage II on the document tower (every projection of the Qwen3 blocks).
#: Stage II rows written (each a query, its positive and ``n_negatives`` negatives, all full length).
STAGE2_ROWS = 256
LORA = "{r: 32, alpha: 64, dropout: 0.05, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"


@dataclasses.dataclass(frozen=True)
class Setting:
    """Where and at which shapes the benchmark runs: the paper's shapes on a GPU, or the tiny ones on the CPU."""

    device: str
    dtype: str
    query_shape: EncoderShape
    document_shape: DecoderShape
    document_max_length: int
    #: overrides of configs/care_paper/stage2.yaml beyond the models, data and step count
    stage2_overrides: tuple[str, ...]


def paper_setting() -> Setting:
    from care.models.presets import GTE_MULTILINGUAL_BASE, QWEN3_4B

    return Setting("cuda", "bfloat16", dataclasses.replace(GTE_MULTILINGUAL_BASE, max_position_embeddings=514),
                   QWEN3_4B, DOCUMENT_MAX_LENGTH, (f"model.lora={LORA}",))


def tiny_setting() -> Setting:
    from care.models.presets import TINY_BERT, TINY_QWEN3

    return Setting("cpu", "float32", TINY_BERT, TINY_QWEN3, 64,
                   ('runtime.mixed_precision="no"', "runtime.cpu=true",
                    "optim.batch_size=4", "optim.grad_cache_chunk_size=2", "data.n_negatives=3",
                    "model.query_max_seq_length=32", "model.document_max_seq_length=64",
                    "model.lora={r: 4, alpha: 8, dropout: 0.0, target_modules: [q_proj, v_proj]}"))


def _texts(data: Path | None, n: int) -> list[str]:
    if data is not None and (data / "corpus.jsonl").is_file():
        texts = [row["text"] for _, row in iter_jsonl(data / "corpus.jsonl")]
    else:
        texts = [("患者咳嗽发热三天，建议多喝水，注意休息，必要时到医院检查血常规。" * 4)[: 60 + i % 200] for i in range(n)]
    return (texts * (n // len(texts) + 1))[:n]


def build_towers(texts: list[str], work: Path, setting: Setting) -> tuple[Path, Path, int]:
    """The setting's random query and document towers with character tokenizers, saved under ``work``.

    Returns the query folder, the document folder and the document tower's non-embedding parameter count.
    """
    import torch

    from care.models.presets import save_random_model

    out = []
    for shape in (setting.query_shape, setting.document_shape):
        target = work / shape.name
        model = save_random_model(shape, texts, target, dtype=getattr(torch, setting.dtype), device=setting.device)
        params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
        out.append((target, params))
        del model
        if setting.device == "cuda":
            torch.cuda.empty_cache()
    return out[0][0], out[1][0], out[1][1]


def bench_encoding(document_dir: Path, texts: list[str], batch_size: int, non_embedding_params: int,
                   setting: Setting) -> dict:
    """Encode ``texts`` with the document tower through ``care.encoders.registry.load_model`` (timed after a warm-up)."""
    return document_encoding_throughput(document_dir, texts, batch_size=batch_size,
                                        max_length=setting.document_max_length, dtype=setting.dtype,
                                        device=setting.device, shape=setting.document_shape,
                                        non_embedding_params=non_embedding_params)


def bench_stage2(query_dir: Path, document_dir: Path, texts: list[str], work: Path, steps: int,
                 setting: Setting) -> dict:
    """``steps`` Stage II steps of the real trainer at the paper's settings (configs/care_paper/stage2.yaml)."""
    from care.train.engine.config import TrainConfig, apply_overrides, load_config
    from care.train.engine.step_timing import time_training_steps

    config = Path(__file__).resolve().parents[1] / "configs" / "care_paper" / "stage2.yaml"
    overrides = [f"output_dir={work / 'stage2'}", f"model.query_model={query_dir}", f"model.document_model={document_dir}",
                 "model.query_pooling=cls", "model.trust_remote_code=false", f"optim.max_steps={steps}",
                 "runtime.log_with=null", "runtime.progress_bar=false", "checkpoint.every_steps=100000",
                 *setting.stage2_overrides]
    data = apply_overrides(load_config(config).to_dict(), overrides)
    negatives = data["data"]["n_negatives"]
    # documents as long as the tower reads (the memory worst case): each text runs on into the next ones
    length = data["model"]["document_max_seq_length"]
    joined = "".join(texts)
    joined *= length // len(joined) + 2
    stride = max(1, (len(joined) - length) // STAGE2_ROWS)
    long = [joined[i * stride:i * stride + length] for i in range(STAGE2_ROWS)]
    rows = [{"query": t[:30], "pos": [t], "neg": [long[(i + k) % len(long)] for k in range(1, negatives + 1)]}
            for i, t in enumerate(long)]
    train_file = work / "stage2_train.jsonl"
    write_jsonl(train_file, rows)
    data = apply_overrides(data, [f"data.train_file={train_file}"])
    timing = time_training_steps(TrainConfig.from_dict(data), steps, setting.device)
    return {"steps": timing.steps, "seconds_total": timing.seconds_total, "batch_size": data["optim"]["batch_size"],
            "negatives": negatives, "grad_cache_chunk_size": data["optim"]["grad_cache_chunk_size"],
            "document_max_length": length, "gradient_checkpointing": data["model"]["gradient_checkpointing"],
            "lora_r": data["model"]["lora"]["r"], "peak_memory_gib": timing.peak_memory_gib,
            "memory_at_start_gib": timing.memory_at_start_gib, "losses": timing.losses,
            "steady_step_seconds": timing.steady_step_seconds, "steady_steps_timed": timing.steady_steps_timed}


def report_lines(device: str, setting: Setting, encodings: list[dict], stages: list[dict], matmul: float,
                 peak: float | None, command: str) -> list[str]:
    """The markdown report of one run (a table row per encoding batch size, a line per Stage II chunk size)."""
    doc, query = setting.document_shape, setting.query_shape
    lines = [f"# Paper shapes on {device} (random weights)", "",
             f"Document tower: {doc.name} shape ({doc.num_hidden_layers} x {doc.hidden_size}, GQA "
             f"{doc.num_attention_heads}/{doc.num_key_value_heads}), {setting.dtype}, last-token pooling, through "
             f"`load_model` -> `encode_documents` (the code `care index build` runs). Query tower: {query.name} shape "
             f"({query.num_hidden_layers} x {query.hidden_size}). Character tokenizer: one token per character.", "",
             f"| batch | documents | tokens | seconds | documents/s | tokens/s | model TFLOP/s | of measured matmul "
             f"({matmul:.3g} TFLOP/s) | of datasheet peak | peak memory GiB |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in encodings:
        datasheet = f"{e['fraction_of_datasheet_peak']:.0%}" if e.get("fraction_of_datasheet_peak") else "n/a"
        memory = f"{e['peak_memory_gib']:.1f}" if e["peak_memory_gib"] is not None else "n/a"
        lines.append(f"| {e['batch_size']} | {e['documents']} | {e['tokens']} | {e['seconds']:.2f} | "
                     f"{e['documents_per_s']:.0f} | {e['tokens_per_s']:.0f} | {e['model_tflops']:.1f} | "
                     f"{e['fraction_of_measured_matmul']:.0%} | {datasheet} | {memory} |")
    for stage2 in stages:
        memory = (f"{stage2['peak_memory_gib']:.1f} GiB ({stage2['memory_at_start_gib']:.1f} held when it started)"
                  if stage2["peak_memory_gib"] is not None else "n/a (CPU)")
        steady = (f"{stage2['steady_step_seconds']:.2f} s per step (median of {stage2['steady_steps_timed']} after the "
                  "first)" if stage2["steady_step_seconds"] is not None else "no steady step timed (one step only)")
        lines += ["", f"Stage II with the real trainer (configs/care_paper/stage2.yaml: LoRA r={stage2['lora_r']} on the "
                  f"document tower, gradient checkpointing {'on' if stage2['gradient_checkpointing'] else 'off'}, batch "
                  f"{stage2['batch_size']} x (1 + {stage2['negatives']}) documents of up to "
                  f"{stage2['document_max_length']} tokens), **GradCache chunk {stage2['grad_cache_chunk_size']}** "
                  f"sequences: {stage2['steps']} steps, {steady}, {stage2['seconds_total']:.1f} s with model loading "
                  f"(the final checkpoint and model saves are not run); peak GPU memory {memory}; loss by step "
                  f"{', '.join(f'{v:.3f}' for v in stage2['losses'])}."]
    lines += ["", f"Command: `{command}`"]
    return lines


def main() -> None:
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="folder with a corpus.jsonl whose texts are encoded")
    parser.add_argument("--out", type=Path, default=None,
                        help="results root (default: benchmarks/results on a GPU; nothing written with --tiny)")
    parser.add_argument("--documents", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[64], help="encoding batch sizes to time")
    parser.add_argument("--steps", type=int, default=3, help="Stage II optimiser steps (>= 2 for a steady step time)")
    parser.add_argument("--grad-cache-chunk", type=int, nargs="+", default=[None],
                        help="Stage II GradCache chunk sizes to time (sequences per chunk; default: the paper config's)")
    parser.add_argument("--name", default="", help="suffix of the record's file name (keeps runs of other settings apart)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU: a smoke check of this script")
    parser.add_argument("--commit", default="", help="the commit the code came from, where the copy has no .git "
                                                      "(sets $CARE_GIT_COMMIT; a git checkout's own commit wins)")
    args = parser.parse_args()
    if args.commit:  # only where git cannot answer (care.bench.record.git_commit): never a commit typed over git's
        os.environ.setdefault(COMMIT_ENV, args.commit)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    setting = tiny_setting() if args.tiny else paper_setting()
    if setting.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu_shapes needs a CUDA GPU (or --tiny for the CPU smoke check)")
    out = args.out if args.out is not None or args.tiny else RESULTS
    device = torch.cuda.get_device_name(0) if setting.device == "cuda" else f"CPU ({setting.document_shape.name})"
    peak = datasheet_peak_tflops(device) if setting.device == "cuda" else None
    texts = _texts(args.data, args.documents)
    matmul = measured_matmul_tflops(setting.device, setting.dtype, MATMUL_SIZE if setting.device == "cuda" else 256)
    with tempfile.TemporaryDirectory() as tmp:
        query_dir, document_dir, params = build_towers(texts, Path(tmp), setting)
        encodings = []
        for batch_size in args.batch_size:
            encoding = bench_encoding(document_dir, texts, batch_size, params, setting)
            encoding["fraction_of_datasheet_peak"] = encoding["model_tflops"] / peak if peak else None
            encoding["fraction_of_measured_matmul"] = encoding["model_tflops"] / matmul
            encodings.append(encoding)
            if setting.device == "cuda":
                torch.cuda.empty_cache()
        stages = []
        for chunk in args.grad_cache_chunk:
            overrides = () if chunk is None else (f"optim.grad_cache_chunk_size={chunk}",)
            run_setting = dataclasses.replace(setting, stage2_overrides=(*setting.stage2_overrides, *overrides))
            stages.append(bench_stage2(query_dir, document_dir, texts, Path(tmp) / f"chunk{chunk}", args.steps,
                                       run_setting))
    name = device.replace(" ", "_").replace("(", "").replace(")", "") + (f"_{args.name}" if args.name else "")
    record = BenchmarkRecord(EXPERIMENT, name,
                             config=vars(args) | {"data": portable(args.data), "out": portable(out)},
                             scores={}, latencies={"encoding": encodings, "stage2": stages},
                             extra={"bf16_datasheet_peak_tflops": peak, "matmul_tflops_measured": matmul,
                                    "document_tower": dataclasses.asdict(setting.document_shape),
                                    "query_tower": dataclasses.asdict(setting.query_shape),
                                    "document_non_embedding_parameters": params, "dtype": setting.dtype,
                                    "transformers": transformers.__version__,
                                    "weights": "random (speed and memory only)"})
    if out is None:
        record.command = invocation()
    else:
        path = write_record(record, out)
    lines = report_lines(device, setting, encodings, stages, matmul, peak, record.command)
    if out is not None:
        path.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))  # noqa: T201 - the script's report


if __name__ == "__main__":
    main()
