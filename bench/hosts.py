#!/usr/bin/env python3
"""The scale-out model checked on simulated networks: for each model and link rate, a
data-parallel run on 2 simulated hosts of 1 rank each (scripts/sim-hosts, tbf-limited veth links)
records its measured communicate phase per step and the ring model's prediction over the link
measured between its ranks (data_parallel.predicted_communicate_ms); this prints both and the
model's error. Then the scaling efficiency of the 2 hosts against one process (1 thread) on the
same global batch, measured and predicted as the advisor's scale-out model predicts it
(src/advisor/scale_out.cpp, predict_data_parallel: each host's step on its half of the batch, here
measured on one process at half the batch, plus the all-reduce that backward does not hide, DDP's
overlap; and, for crossover's default across hosts, after-backward, plus all of it). And the
all-reduce as the advisor prices a catalog instance's network: the same ring at the link's rated
rate ("rated ms"), for its error against the measured one.

    python3 bench/hosts.py [--models disc-8,disc-10,mnist-cnn,disc-12] [--rates 1gbit,10gbit]
                           [--steps 100] [--json out.json]

Run as root on a quiet machine (the hosts share its cores)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CROSSOVER = os.environ.get("CROSSOVER", os.path.join(ROOT, "build", "crossover"))
SIM_HOSTS = os.path.join(ROOT, "scripts", "sim-hosts")


# How the advisor prices a catalog instance's network (src/advisor/price_table.cpp): the same ring at
# the link's rated rate, NCCL's 9.6 us a step across machines, the addition free (a GPU's NCCL
# fuses it into the copy). Here each 4 MiB bucket of the gradients is one all-reduce.
NETWORK_LATENCY_S = 9.6e-6
BUCKET_BYTES = 4 << 20


def rated_bytes_per_s(rate):
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for unit, scale in units.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale / 8
    sys.exit(f"--rates: {rate!r} is not a rate such as 1gbit or 100mbit")


def rated_allreduce_ms(total_bytes, rate, ranks=2):
    seconds, left = 0.0, float(total_bytes)
    while left > 0:
        bucket = min(left, BUCKET_BYTES)
        seconds += 2 * (ranks - 1) * (bucket / ranks / rated_bytes_per_s(rate) + NETWORK_LATENCY_S)
        left -= bucket
    return 1e3 * seconds


def run(cmd, out_json):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    with open(out_json) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", default="disc-8,disc-10,mnist-cnn,disc-12")
    ap.add_argument("--rates", default="1gbit,10gbit")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--json")
    a = ap.parse_args()
    for rate in a.rates.split(","):
        rated_bytes_per_s(rate)  # a rate it cannot read is said before any run
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            common = ["train", model, "--threads", "1", "--steps", str(a.steps),
                      "--checkpoint-every", "off"]
            one = run([CROSSOVER] + common + ["--json", f"{tmp}/one.json"], f"{tmp}/one.json")
            half = run([CROSSOVER] + common + ["--batch", str(one["batch"] // 2),
                                               "--json", f"{tmp}/half.json"], f"{tmp}/half.json")
            for rate in a.rates.split(","):
                two = run([SIM_HOSTS, "2", "--rate", rate, "--", CROSSOVER] + common +
                          ["--json", f"{tmp}/two.json"], f"{tmp}/two.json")
                dp = two["data_parallel"]
                measured, predicted = dp["communicate_ms"], dp["predicted_communicate_ms"]
                one_step = one["step_ms"]["median"]
                half_step = half["step_ms"]["median"]
                two_step = two["step_ms"]["median"]
                # The advisor's step: the slice's compute, plus what backward (2/3 of it) does not
                # hide of the all-reduce, at least the last bucket's (4 MiB of the gradients).
                last = predicted * min(1.0, 4 * 1024 * 1024 / dp["reduced_bytes_per_step"])
                overlapped = half_step + max(predicted - half_step * 2 / 3, last)
                after_backward = half_step + predicted
                rows.append({
                    "model": model, "rate": rate, "bytes": dp["reduced_bytes_per_step"],
                    "link_gbs": dp["link_gbs"], "link_latency_us": dp["link_latency_us"],
                    "communicate_ms": measured, "predicted_communicate_ms": predicted,
                    "error": predicted / measured - 1,
                    # The advisor's model of a catalog instance's network, at the rated rate.
                    "rated_communicate_ms": rated_allreduce_ms(dp["reduced_bytes_per_step"], rate),
                    "one_process_step_ms": one_step, "two_hosts_step_ms": two_step,
                    # The same global batch on 2 hosts: the speed-up of a step, and the
                    # efficiency (speed-up over 2).
                    "speed_up": one_step / two_step,
                    "efficiency": one_step / two_step / 2,
                    "half_batch_step_ms": half_step,
                    "predicted_efficiency_overlapped": one_step / overlapped / 2,
                    "predicted_efficiency_after_backward": one_step / after_backward / 2,
                })
    print(f"{'model':10} {'link':7} {'KiB':>8} {'link GB/s':>9} {'measured ms':>11} "
          f"{'model ms':>9} {'error':>7} {'rated ms':>9} {'error':>7} {'1 proc ms':>9} {'half ms':>8} {'2 hosts ms':>10} "
          f"{'eff.':>6} {'pred. DDP':>9} {'pred. a-b':>9}")
    for r in rows:
        print(f"{r['model']:10} {r['rate']:7} {r['bytes'] / 1024:8.0f} {r['link_gbs']:9.3f} "
              f"{r['communicate_ms']:11.3f} {r['predicted_communicate_ms']:9.3f} "
              f"{100 * r['error']:+6.1f}% {r['rated_communicate_ms']:9.3f} "
              f"{100 * (r['rated_communicate_ms'] / r['communicate_ms'] - 1):+6.1f}% "
              f"{r['one_process_step_ms']:9.3f} "
              f"{r['half_batch_step_ms']:8.3f} {r['two_hosts_step_ms']:10.3f} "
              f"{100 * r['efficiency']:5.1f}% {100 * r['predicted_efficiency_overlapped']:8.1f}% "
              f"{100 * r['predicted_efficiency_after_backward']:8.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
