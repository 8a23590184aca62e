#!/usr/bin/python3
"""Predictions for models crossover never profiled, against what a GPU measured.

On the GPU machine, bench/gpu_unseen.sh measured each spec of bench/unseen/ (three processes of
`crossover train SPEC --device cuda --steps 200`); this keeps the fastest of their median steps
(as `crossover validate` does) and, on this machine (no GPU needed), runs `crossover advise SPEC`
to get the step it predicts for the GPU the measurement was taken on, from the shipped profiles.

    /usr/bin/python3 bench/unseen_check.py --measured DIR_OR_JSON [--crossover build/crossover]
        [--device h100-sxm] [--json OUT.json] [--markdown OUT.md]

DIR_OR_JSON: the folder gpu_unseen.sh wrote (bench/out/unseen), or the JSON this script wrote
(--json), which keeps the measurements.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def measured_steps(source):
    """{spec name: {"fastest_ms", "slowest_ms", "runs"}} from gpu_unseen.sh's folder or our JSON."""
    if os.path.isfile(source):
        with open(source) as f:
            return {row["model"]: row for row in json.load(f)["models"]}
    out = {}
    for path in sorted(glob.glob(os.path.join(source, "*-[0-9].json"))):
        name = os.path.basename(path).rsplit("-", 1)[0]
        if not os.path.exists(os.path.join(ROOT, "bench", "unseen", name + ".toml")):
            continue
        with open(path) as f:
            median = json.load(f)["step_ms"]["median"]
        out.setdefault(name, {"model": name, "runs": []})["runs"].append(median)
    for row in out.values():
        row["fastest_ms"], row["slowest_ms"] = min(row["runs"]), max(row["runs"])
    return out


def predicted(crossover, spec, device):
    with tempfile.TemporaryDirectory() as d:
        run = subprocess.run([crossover, "advise", spec, "--steps", "5", "--out", d],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"crossover advise {spec} failed: {run.stderr.strip()[-400:]}")
        with open(os.path.join(d, "results.json")) as f:
            results = json.load(f)
    for p in results["predictions"]:
        if p["device"] == device:
            return p
    sys.exit(f"crossover advise {spec}: no prediction for {device}")


def spec_batch(text, path):
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("batch ="):
            value = line.split("=", 1)[1].split("#")[0].strip()
            if not value.isdigit():
                sys.exit(f"{path}:{number}: batch: expected a positive integer, found '{value}'")
            return int(value)
    sys.exit(f"{path}: [train] batch: missing (the measurement's batch is recorded with it)")


def add_to_profile(a):
    if not a.date:
        sys.exit("--add-to-profile needs --date (the day the GPU measured them)")
    with open(a.add_to_profile) as f:
        profile = json.load(f)
    measured = measured_steps(a.measured)
    keep = [m for m in profile["measured"] if m["model"] not in measured]
    for name, m in sorted(measured.items()):
        path = os.path.join(ROOT, "bench", "unseen", name + ".toml")
        with open(path) as f:
            text = f.read()
        keep.append({"model": name, "batch": spec_batch(text, path), "step_ms": m["fastest_ms"],
                     "source": f"fastest median step of {len(m['runs'])} runs of crossover train "
                               f"bench/unseen/{name}.toml --device cuda --steps 200 "
                               f"(bench/gpu_unseen.sh; slowest {m['slowest_ms']:.4g} ms; {a.date})",
                     "spec_toml": text, "slowest_ms": m["slowest_ms"]})
    profile["measured"] = keep
    tmp = a.add_to_profile + ".tmp"
    with open(tmp, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.add_to_profile)
    print(f"{a.add_to_profile}: {len(measured)} models never profiled added to its measured steps")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--crossover", default=os.path.join(ROOT, "build", "crossover"))
    ap.add_argument("--device", default="h100-sxm", help="the catalog id of the GPU measured")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--add-to-profile", metavar="PROFILE_JSON",
                    help="add the measurements, with their specs, to that profile's measured steps "
                         "(replacing earlier ones of the same name), for `crossover validate`")
    ap.add_argument("--date", help="the measurements' date, for --add-to-profile (YYYY-MM-DD)")
    a = ap.parse_args()
    if a.add_to_profile:
        return add_to_profile(a)
    rows = []
    for name, m in sorted(measured_steps(a.measured).items()):
        spec = os.path.join(ROOT, "bench", "unseen", name + ".toml")
        p = predicted(a.crossover, spec, a.device)
        error = p["step_ms"] / m["fastest_ms"] - 1
        rows.append({**m, "predicted_ms": p["step_ms"], "error": error,
                     "expected_error": p["expected_error"],
                     "expected_worst_error": p.get("expected_worst_error"),
                     "profile": p["profile"]})
    errors = [abs(r["error"]) for r in rows]
    lines = ["| model | predicted ms | measured ms (fastest of 3; slowest) | error | expected (median, worst) |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        exp = ("n/a" if r["expected_error"] is None else
               f"{100 * r['expected_error']:.0f}%, {100 * (r['expected_worst_error'] or 0):.0f}%")
        lines.append(f"| {r['model']} | {r['predicted_ms']:.4g} | {r['fastest_ms']:.4g}; "
                     f"{r['slowest_ms']:.4g} | {100 * r['error']:+.1f}% | {exp} |")
    if errors:
        lines.append(f"| **median / worst** | | | **{100 * statistics.median(errors):.1f}% / "
                     f"{100 * max(errors):.1f}%** | |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "models": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
