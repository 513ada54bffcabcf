#!/usr/bin/env bash
# The quality-latency frontier on the device (issue 41): per seed, in parallel, one process that trains and scores
# CARE with e5 cut to 1 layer (+ 3 layers; LAYERS / EXTRA_LAYERS below) -> test_frontier_seedK, then CARE [rich] (Stage I on every corpus
# sentence, more epochs) on the same finished stages -> test_frontier_rich_seedK. Logs and records under $OUT.
# The kit (KIT, default .gpu/): data.tar.xz from `python -m benchmarks.frontier_kit`, e5-dev.bin from
# `care model shrink-e5`; wheels of what the machine lacks in .whl/ (faiss-cpu, pytrec_eval-terrier, bm25s,
# datasets, dill, multiprocess). Run from the repository root: OUT=<results> bash benchmarks/frontier_gpu.sh
# Other points of the curve: LAYERS (the query tower's depth; 0 = the static-embedding tower), EXTRA_LAYERS (more
# depths sharing the run's document tower; "" for none) and TAG / RICH_TAG (the records' names: a new tag joins the
# frontier by itself, benchmarks/frontier.py), e.g. the static tower and the rich Stage I at 3 layers:
#   LAYERS=0 EXTRA_LAYERS="" TAG=frontier_L0 RICH_TAG=frontier_rich_L0 OUT=... bash benchmarks/frontier_gpu.sh
#   LAYERS=3 EXTRA_LAYERS="" TAG=frontier_L3 RICH_TAG=frontier_rich_L3 OUT=... bash benchmarks/frontier_gpu.sh
# FFN narrows the run's query tower's feed-forward blocks (care model prune --ffn-width, ranked on the training
# queries), e.g. LAYERS=4 FFN=768 EXTRA_LAYERS="" TAG=frontier_L4_ffn768 RICH_TAG=frontier_rich_L4_ffn768, or the 5x
# candidate the CPU's Stage I probes rank first (docs/lab-notes.md, 2026-11-29):
#   LAYERS=2 FFN=768 EXTRA_LAYERS="" TAG=frontier_L2_ffn768 RICH_TAG=frontier_rich_L2_ffn768 OUT=... bash benchmarks/frontier_gpu.sh
# RICH_FILE picks CARE [rich]'s Stage I data in the kit: alignment_rich_queries.jsonl (a kit built with
# --alignment-queries: unlabelled questions, e.g. the second dev set's, after the training queries; in the CPU's
# 1-layer Stage I probes no better than as many more steps on the rich data, docs/lab-notes.md, 2026-11-29), e.g.
#   RICH_FILE=alignment_rich_queries.jsonl LAYERS=1 EXTRA_LAYERS="" TAG=frontier RICH_TAG=frontier_rich_queries OUT=... bash benchmarks/frontier_gpu.sh
# S1_EPOCHS (default 6) sets CARE [rich]'s Stage I epochs; another value names the row CARE [rich-epN], a screen the
# frontier leaves out (the CPU's 1-layer Stage I probes still gained from 2 to 4 epochs: 0.181 -> 0.224), e.g.
#   S1_EPOCHS=12 LAYERS=1 EXTRA_LAYERS="" RICH_TAG=frontier_rich_ep12 OUT=... bash benchmarks/frontier_gpu.sh
# S1_LR sets its Stage I learning rate (the preset's: 2e-4) and adds -lrX to the row's name; in the CPU's 1-layer
# probes 4 epochs of Stage I alone gave 0.224 / 0.256 / 0.266 / 0.273 at 2e-4 / 6e-4 / 1.2e-3 / 2.4e-3, and the whole
# [rich] recipe at 2.4e-3 kept 97.6 % of symmetric large over the CPU's seeds 0-2
# (benchmarks/results/real_weights/test_cpu_rich_lr2.4e-3_L1.md), e.g.
#   S1_LR=2.4e-3 RICH_SEEDS="0 1 2" LAYERS=1 EXTRA_LAYERS="" RICH_TAG=frontier_rich_lr2.4e-3 OUT=... bash benchmarks/frontier_gpu.sh
#   (Stage I alone at 4.8e-3: 0.273, flat against 2.4e-3)
# HIDDEN / RELATIONS add layer-wise distillation from the fine-tuned 12-layer tower to CARE [rich]'s Stage I
# (stage1:loss.lambda_hidden / lambda_relations, care.train.recipes.layer_distill), e.g. HIDDEN=1 RELATIONS=1
# RICH_TAG=frontier_rich_layers EXTRA_LAYERS="" (the base records of LAYERS are rebuilt from the finished stages).
set -uo pipefail
: "${OUT:?}"
ROOT=$(pwd)
KIT=${KIT:-$ROOT/.gpu}
PYTHON=${PYTHON:-python3}
SCRATCH=${SCRATCH:-/tmp/care-gpu}
SEEDS=${SEEDS:-"0 1 2"}
RICH_SEEDS=${RICH_SEEDS:-"0 1"}  # the seeds that also train CARE [rich]
MAXLEN=${MAXLEN:-128}
EXTRA=${EXTRA:-}
S1_EPOCHS=${S1_EPOCHS:-6}
RANK_EPOCHS=${RANK_EPOCHS:-3}
LAYERS=${LAYERS:-1}
EXTRA_LAYERS=${EXTRA_LAYERS-3}
TAG=${TAG:-frontier}
FFN=${FFN:-}
RICH_TAG=${RICH_TAG:-frontier_rich}
mkdir -p "$SCRATCH" "$OUT"
T0=$(date +%s)
{
if [ -z "${NO_WHEELS:-}" ]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SCRATCH/site" "$ROOT"/.whl/*.whl || exit 1
  export PYTHONPATH="$SCRATCH/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${THREADS:-8}
tar -C "$SCRATCH" -xJf "$KIT/data.tar.xz" || exit 1
cat "$SCRATCH/work/test/kit.json"
"$PYTHON" - <<'PY' || exit 1
import bm25s, datasets, dill, multiprocess, pyarrow, faiss, peft, pytrec_eval, sentence_transformers, torch, transformers
import benchmarks.bench_real_weights, care.cli, care.train.recipes.sweep, care.train.recipes.validation
print("pyarrow", pyarrow.__version__, "datasets", datasets.__version__)
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "transformers", transformers.__version__,
      "sentence-transformers", sentence_transformers.__version__, "peft", peft.__version__, "faiss", faiss.__version__)
PY
[ -f "$SCRATCH/e5/config.json" ] || "$PYTHON" -m care.cli model export-e5 --image "$KIT/e5-dev.bin" -o "$SCRATCH/e5" || exit 1
echo "setup done in $(( $(date +%s) - T0 )) s"
} 2>&1  # to stdout: $OUT holds at most 8 files (3 seed logs + 5 records)
export PYTHONPATH="$ROOT:$ROOT/src:$SCRATCH/site" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${THREADS:-8}
[ -n "${NO_WHEELS:-}" ] && export PYTHONPATH="$ROOT:$ROOT/src${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}"
DATA=$(ls -d "$SCRATCH"/data/*/ | head -n 1)
RICH="$SCRATCH/work/test/${RICH_FILE:-alignment_rich.jsonl}"
[ -f "$RICH" ] || { echo "no $RICH in the kit (RICH_FILE=alignment_rich_queries.jsonl needs a kit built with --alignment-queries)"; exit 1; }
if command -v nvidia-smi >/dev/null; then  # GPU use every 20 s, beside the setup log
  ( while sleep 20; do echo "[$(( $(date +%s) - T0 )) s] $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"; done ) &
  SAMPLER=$!
fi
case "${RICH_FILE:-}" in *queries*) NAME=rich-questions;; *) NAME=rich;; esac  # the row: CARE [NAME]
[ "$S1_EPOCHS" = 6 ] || NAME="$NAME-ep$S1_EPOCHS"  # another Stage I length is a screen row, e.g. CARE [rich-ep12]
[ -n "${S1_LR:-}" ] && NAME="$NAME-lr$S1_LR"  # another Stage I learning rate too, e.g. CARE [rich-ep12-lr6e-4]
VARIANT="$NAME=stage1:data.train_file=$RICH;stage1:optim.epochs=$S1_EPOCHS;stage1_rank:data.train_file=$RICH;stage1_rank:optim.epochs=$RANK_EPOCHS"
[ -n "${S1_LR:-}" ] && VARIANT="$VARIANT;stage1:optim.lr=$S1_LR"
[ -n "${HIDDEN:-}" ] && VARIANT="$VARIANT;stage1:loss.lambda_hidden=$HIDDEN"
[ -n "${RELATIONS:-}" ] && VARIANT="$VARIANT;stage1:loss.lambda_relations=$RELATIONS"
for s in $SEEDS; do
  W="$SCRATCH/work/s$s"
  mkdir -p "$W/test" && cp "$SCRATCH/work/test/train.jsonl" "$SCRATCH/work/test/alignment.jsonl" "$W/test/"
  (
    common=(--data "$DATA" --e5 "$SCRATCH/e5" --work "$W" --out "$OUT" --seeds "$s" --layers "$LAYERS"
            --max-length "$MAXLEN" --no-int8 --no-student --skip-rows peer without_stage1 --travel
            ${FFN:+--ffn-width "$FFN"} $EXTRA)
    echo "[$(( $(date +%s) - T0 )) s] seed $s: base"
    "$PYTHON" -m benchmarks.bench_real_weights "${common[@]}" --extra-layers $EXTRA_LAYERS --tag "$TAG"; rc=$?
    echo "[$(( $(date +%s) - T0 )) s] seed $s: base done rc=$rc"
    case " $RICH_SEEDS " in *" $s "*) ;; *) exit 0;; esac
    "$PYTHON" -m benchmarks.bench_real_weights "${common[@]}" --variant "$VARIANT" --tag "$RICH_TAG"; rc=$?
    echo "[$(( $(date +%s) - T0 )) s] seed $s: variant done rc=$rc"
  ) > "$OUT/log_seed$s.txt" 2>&1 &
done
for job in $(jobs -p); do [ "$job" = "${SAMPLER:-}" ] || wait "$job"; done
[ -n "${SAMPLER:-}" ] && kill "$SAMPLER"
echo "all done in $(( $(date +%s) - T0 )) s"
ls -la "$OUT" "$OUT/real_weights" 2>/dev/null
for s in $SEEDS; do grep -E "^\[|seed [0-9]+: |Error|error" "$OUT/log_seed$s.txt" | tail -n 12; done
