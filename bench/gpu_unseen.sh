#!/usr/bin/env bash
# On a GPU machine, after `scripts/gpu-check --only gpu,deps,configure,build`: the step time of
# models crossover never profiled (bench/unseen/*.toml), for the predictions a machine without
# a GPU makes of them (bench/unseen_check.py compares); the same model measured three ways (train
# --steps, train for an epoch, run for an epoch); and the device profile measured twice more, for
# its spread. Everything goes to one tarball, $1 (default unseen.tgz).
#   bench/gpu_unseen.sh $OUT/unseen.tgz
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_TGZ=${1:-unseen.tgz}
WORK=bench/out/unseen
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'tar czf "$OUT_TGZ" "$WORK"' EXIT  # what was measured comes back even when cut short
# The Debian libraries and the data as scripts/gpu-check unpacked them.
LIB=$PWD/.gpu-deps/root/usr/lib/x86_64-linux-gnu
[[ -d $LIB ]] && export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d /usr/share/datasets/fashion-mnist ]] ||
  export CROSSOVER_FASHION_MNIST_DIR=$PWD/.gpu-deps/root/usr/share/datasets/fashion-mnist
export XDG_CACHE_HOME=$PWD/$WORK/cache
XO=build-gpu/crossover
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$WORK/gpu.csv" || true
for round in 1 2 3; do
  for spec in bench/unseen/*.toml; do
    name=$(basename "$spec" .toml)
    $XO train "$spec" --device cuda --steps 200 --checkpoint-every off \
      --json "$WORK/$name-$round.json" >"$WORK/$name-$round.log" 2>&1 || echo "$name round $round failed"
  done
done
# One model, three definitions of its step (item 6 of the predictions issue).
for round in 1 2; do
  $XO train imdb-lstm --device cuda --steps 200 --checkpoint-every off \
    --json "$WORK/imdb-lstm-steps200-$round.json" >/dev/null 2>&1 || echo "imdb-lstm steps failed"
  $XO train imdb-lstm --device cuda --epochs 1 --checkpoint-every off \
    --json "$WORK/imdb-lstm-epoch-$round.json" >/dev/null 2>&1 || echo "imdb-lstm epoch failed"
  rm -rf "$WORK/run-$round"
  $XO run --devices cuda --models imdb-lstm,mnist-cnn --epochs 1 --out "$WORK/run-$round" \
    >"$WORK/run-$round.log" 2>&1 || echo "run failed"
done
# The profile and the built-in models twice more (the spread of each between measurements).
for round in 1 2; do
  timeout 150 $XO validate --device cuda:0 --reprofile --repeat 2 \
    --write-profile "$WORK/profile-$round.json" --markdown "$WORK/validation-$round.md" \
    >"$WORK/validate-$round.log" 2>&1 || echo "validate $round failed"
done
echo "done: $OUT_TGZ"
