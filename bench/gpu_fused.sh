#!/usr/bin/env bash
# On a GPU machine, after `scripts/gpu-check --only deps,configure,build[,tests]`: fused trials on
# the GPU (issue 37). Three measurements, each logged, all in one tarball, $1 (default fused.tgz):
#   1. the fused training loop against one trial's loop on the GPU, K = 1, 4, 16, 64
#      (bench/fused_trials.cpp; the H100 target: 64 fused disc-4 trials within 3x one trial's
#      step), with the fused step advise predicts beside each; the LSTMs with their fused kernel
#      off and on (CROSSOVER_GPU_FUSE_LSTM);
#   2. `crossover advise disc-4 --trials K --devices cuda:0`: the sweep verdict measured on the GPU;
#   3. a 16-trial disc-4 search end to end on the GPU, fused (--fuse auto, the default, and
#      --fuse 16) and one process per trial (--fuse off), alternated, whole-process wall time.
#   bench/gpu_fused.sh $OUT/fused.tgz      (scripts/gpu-check runs it as its step `fused`)
# Exits 1 when any measurement failed (each is still tried).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_TGZ=${1:-fused.tgz}
WORK=bench/out/gpu-fused
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'tar czf "$OUT_TGZ" "$WORK"' EXIT  # what was measured comes back even when cut short
trap 'exit 143' TERM INT
# The Debian libraries and the data as scripts/gpu-check unpacked them.
LIB=$PWD/.gpu-deps/root/usr/lib/x86_64-linux-gnu
[[ -d $LIB ]] && export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d /usr/share/datasets/fashion-mnist ]] ||
  export CROSSOVER_FASHION_MNIST_DIR=$PWD/.gpu-deps/root/usr/share/datasets/fashion-mnist
# The peaks and profile a `crossover validate --device cuda:0` before cached, where one did.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/$WORK/cache}
XO=build-gpu/crossover
FUSED=build-gpu/bench/crossover_fused_trials
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$WORK/gpu.csv" || true
note() { echo "$*" | tee -a "$WORK/commands.txt"; }
failed=0
fail() { echo "$1: exit $2" | tee -a "$WORK/commands.txt"; failed=1; }

# 1. The fused loop.
note "$FUSED --device cuda:0 --models disc-2,disc-4,disc-6,disc-8,mnist-mlp --k 1,4,16,64 --steps 300 --repeat 3"
timeout 150 $FUSED --device cuda:0 --models disc-2,disc-4,disc-6,disc-8,mnist-mlp --k 1,4,16,64 \
  --steps 300 --repeat 3 --json "$WORK/fused-cuda.json" >"$WORK/fused-cuda.log" 2>&1 ||
  fail "fused loop" $?
note "$FUSED --device cuda:0 --models mnist-cnn --k 1,4,16 --steps 100"
timeout 90 $FUSED --device cuda:0 --models mnist-cnn --k 1,4,16 --steps 100 \
  --json "$WORK/fused-cuda-cnn.json" >"$WORK/fused-cuda-cnn.log" 2>&1 ||
  fail "fused cnn" $?

# 1b. The fused LSTM as one kernel (the default; CROSSOVER_GPU_FUSE_LSTM=0: model by model)
# against the LSTM trial by trial inside the fused group, a small LSTM and imdb-lstm's.
for lstm in off on; do
  note "CROSSOVER_GPU_FUSE_LSTM=$([[ $lstm == on ]] && echo 1 || echo 0) $FUSED --device cuda:0 --models bench/specs/lstm-small.toml,imdb-lstm --k 1,4,16 --steps 50 --repeat 2"
  CROSSOVER_GPU_FUSE_LSTM=$([[ $lstm == on ]] && echo 1 || echo 0) timeout 120 $FUSED --device cuda:0 \
    --models bench/specs/lstm-small.toml,imdb-lstm --k 1,4,16 --steps 50 --repeat 2 \
    --json "$WORK/fused-cuda-lstm-$lstm.json" >"$WORK/fused-cuda-lstm-$lstm.log" 2>&1 ||
    fail "fused lstm $lstm" $?
done

# 2. The sweep verdict measured on the GPU.
for k in 4 64; do
  note "$XO advise disc-4 --trials $k --devices cuda:0 --steps 100 --out $WORK/advise-$k"
  timeout 90 $XO advise disc-4 --trials "$k" --devices cuda:0 --steps 100 \
    --out "$WORK/advise-$k" >"$WORK/advise-$k.log" 2>&1 || fail "advise $k" $?
done

# 3. A search end to end, fused and one process per trial, alternated.
LRS=0.02,0.05,0.1,0.2,0.3,0.4,0.5,0.6
TIMEFORMAT=%R
for round in 1 2 3; do
  for fuse in auto 16 off; do
    dir=$WORK/tune-$fuse-$round
    note "$XO tune disc-4 --vary lr=$LRS --vary train.seed=1,2 --epochs 20 --device cuda:0 --fuse $fuse --quiet --out $dir"
    { time timeout 120 $XO tune disc-4 --vary lr=$LRS --vary train.seed=1,2 --epochs 20 \
        --device cuda:0 --fuse "$fuse" --quiet --out "$dir" >"$dir.log" 2>&1; } 2>>"$WORK/tune-$fuse.seconds" ||
      fail "tune --fuse $fuse round $round" $?
  done
done
tail -n +1 "$WORK"/tune-*.seconds
echo "gpu_fused: done"
exit $failed
