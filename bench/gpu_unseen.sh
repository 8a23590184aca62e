#!/usr/bin/env bash
# On a GPU machine, after `scripts/gpu-check --only gpu,deps,configure,build`: the step time of
# models crossover never profiled (bench/unseen/*.toml), for the predictions a machine without
# a GPU makes of them (bench/unseen_check.py compares, and adds them to a profile's held-out rows).
# Without --specs-only also: the same model measured three ways (train --steps, train for an
# epoch, run for an epoch), and the device profile measured twice more, for its spread.
# Everything goes to one tarball, TGZ (default unseen.tgz).
#   bench/gpu_unseen.sh [--specs-only] [--rounds N] [TGZ]
#       --rounds N   processes of `crossover train SPEC --steps 200` per spec (default 3)
#   scripts/gpu-check runs `bench/gpu_unseen.sh --specs-only --rounds 2` as its step `unseen`.
# Environment (for a dry run on a machine without a GPU): XO (default build-gpu/crossover),
# UNSEEN_DEVICE (default cuda), UNSEEN_STEPS (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
SPECS_ONLY=0 ROUNDS=3 OUT_TGZ=unseen.tgz
while (($#)); do
  case "$1" in
    --specs-only) SPECS_ONLY=1 ;;
    --rounds) ROUNDS=${2:?--rounds needs a count}; shift ;;
    -*) echo "gpu_unseen.sh: unknown option '$1'" >&2; exit 2 ;;
    *) OUT_TGZ=$1 ;;
  esac
  shift
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_unseen.sh: --rounds takes a count, got '$ROUNDS'" >&2; exit 2; }
WORK=bench/out/unseen
rm -rf "$WORK"; mkdir -p "$WORK"
trap 'tar czf "$OUT_TGZ" "$WORK"' EXIT  # what was measured comes back even when cut short
trap 'exit 143' TERM INT
# The Debian libraries and the data as scripts/gpu-check unpacked them.
LIB=$PWD/.gpu-deps/root/usr/lib/x86_64-linux-gnu
[[ -d $LIB ]] && export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[[ -d /usr/share/datasets/fashion-mnist ]] ||
  export CROSSOVER_FASHION_MNIST_DIR=$PWD/.gpu-deps/root/usr/share/datasets/fashion-mnist
export XDG_CACHE_HOME=$PWD/$WORK/cache
XO=${XO:-build-gpu/crossover}
DEVICE=${UNSEEN_DEVICE:-cuda}
STEPS=${UNSEEN_STEPS:-200}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$WORK/gpu.csv" 2>/dev/null || true
failed=0
# Rounds over the specs (not one spec's processes back to back), as `crossover validate` measures.
for ((round = 1; round <= ROUNDS; ++round)); do
  for spec in bench/unseen/*.toml; do
    name=$(basename "$spec" .toml)
    $XO train "$spec" --device "$DEVICE" --steps "$STEPS" --checkpoint-every off \
      --json "$WORK/$name-$round.json" >"$WORK/$name-$round.log" 2>&1 ||
      { echo "$name round $round failed: $(tail -n1 "$WORK/$name-$round.log")"; failed=1; }
  done
done
((SPECS_ONLY)) && { echo "done: $OUT_TGZ"; exit $failed; }
# One model, three definitions of its step (item 6 of the predictions issue).
for round in 1 2; do
  $XO train imdb-lstm --device "$DEVICE" --steps "$STEPS" --checkpoint-every off \
    --json "$WORK/imdb-lstm-steps$STEPS-$round.json" >/dev/null 2>&1 || echo "imdb-lstm steps failed"
  $XO train imdb-lstm --device "$DEVICE" --epochs 1 --checkpoint-every off \
    --json "$WORK/imdb-lstm-epoch-$round.json" >/dev/null 2>&1 || echo "imdb-lstm epoch failed"
  rm -rf "$WORK/run-$round"
  $XO run --devices "$DEVICE" --models imdb-lstm,mnist-cnn --epochs 1 --out "$WORK/run-$round" \
    >"$WORK/run-$round.log" 2>&1 || echo "run failed"
done
# The profile and the built-in models twice more (the spread of each between measurements).
for round in 1 2; do
  timeout 150 $XO validate --device "$DEVICE:0" --reprofile --repeat 2 \
    --write-profile "$WORK/profile-$round.json" --markdown "$WORK/validation-$round.md" \
    >"$WORK/validate-$round.log" 2>&1 || echo "validate $round failed"
done
echo "done: $OUT_TGZ"
exit $failed
