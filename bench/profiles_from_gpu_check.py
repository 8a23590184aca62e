#!/usr/bin/env python3
"""Device profiles of peaks only (data/profiles/*.json, crossover.profile/1) for the devices of a
GPU check: the probed peaks `crossover devices --reprobe` printed there and the step times its
runs measured, for the validation table. No kernel samples: that GPU check did not measure them
(scripts/gpu-check now runs `crossover validate`, which does).

    python3 bench/profiles_from_gpu_check.py bench/results/2026-11-23-gpu-check.json \
        bench/results/2026-11-23-gpu-check.md data/profiles
"""
import json
import re
import sys


def peaks_from_md(md_text):
    """{device id: peaks dict} from the '- cpu (NAME): X GFLOP/s ...' lines of the report."""
    pattern = re.compile(
        r"^- (\S+) \((.+?)\): ([\d.]+) GFLOP/s f32 matmul \((\d+)\^3\), ([\d.]+) GB/s memory, "
        r"fixed costs ([\d.]+) us per step \+ ([\d.]+) us per layer \(probed (\S+)\)", re.M)
    out = {}
    for m in pattern.finditer(md_text):
        device, name, gflops, n, gbs, step, layer, probed = m.groups()
        out[device] = {"device": device, "name": name, "threads": 0,
                       "matmul_gflops": float(gflops), "matmul_n": int(n),
                       "bandwidth_gbs": float(gbs), "step_overhead_us": float(step),
                       "layer_overhead_us": float(layer), "probed": probed}
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    check_json, check_md, out_dir = sys.argv[1:]
    check = json.load(open(check_json))
    peaks = peaks_from_md(open(check_md).read())
    meta = check["meta"]
    date = check["date"]
    machine = f"{meta['cpu']}, {meta['cores']} logical CPUs, {meta['os']}"
    batches = {"mnist-mlp": 128, "mnist-cnn": 128, "imdb-lstm": 32}
    source = f"{check_json} ({date}): crossover run on the GPU machine, commit {meta['commit']}"

    def measured(field):
        rows = []
        for group in ("disc", "classic"):
            for model, row in check[group].items():
                if row.get(field):
                    rows.append({"model": model, "batch": batches.get(model, 100),
                                 "step_ms": row[field], "source": source})
        return rows

    gpu_name = check["torch"]["gpu"]
    devices = [
        ("xeon-16t-gpu-check", "cpu", "cpu", meta["cpu"], int(meta["cores"]),
         {"shard_threads": int(meta["cores"]), "min_shard_batch": 16, "min_shard_flops": 1e7,
          "max_shard_flops": 1e9, "single_thread_flops": 4e6}, measured("cpu_ms")),
        ("h100-sxm-gpu-check", "cuda:0", "gpu", gpu_name, 0,
         {"shard_threads": 1, "min_shard_batch": 0, "min_shard_flops": 0, "max_shard_flops": 0,
          "single_thread_flops": 0}, measured("gpu_graph_ms")),
    ]
    libraries = {"cpu": "oneDNN 2.6.3 (OpenMP)",
                 "cuda:0": "cuBLASLt 13.1.0, cuDNN 9.14.0, CUDA runtime 13.0"}
    for pid, device, kind, name, threads, policy, steps in devices:
        p = dict(peaks[device])
        p["threads"] = threads
        profile = {
            "schema": "crossover.profile/1", "id": pid, "device": device, "kind": kind,
            "name": name, "threads": threads, "machine": machine, "date": date,
            "library": libraries[device],
            "note": ("peaks only: the GPU check of " + date + " probed this device and timed the "
                     "built-in models; it measured no kernel profile"),
            "peaks": p, "policy": policy, "step_fixed_us": 0, "shard_fork_us": 0,
            "samples": [], "measured": steps}
        with open(f"{out_dir}/{pid}.json", "w") as f:
            json.dump(profile, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
