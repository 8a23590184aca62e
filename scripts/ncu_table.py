#!/usr/bin/python3
"""The kernels of a training step from an Nsight Compute CSV (`ncu --csv --page raw --metrics
gpu__time_duration.sum`): each kernel name with its count, total and mean time, the costliest
first. scripts/gpu-profile runs ncu and prints this table per model.

    python3 scripts/ncu_table.py NCU_CSV MODEL [--top N]
"""
import argparse
import collections
import csv
import io
import sys

TIME = "gpu__time_duration.sum"
NAME_WIDTH = 110  # template-heavy kernel names run to hundreds of characters


def kernel_times(text):
    """(name, nanoseconds) of every kernel row of ncu's CSV; ncu's own log lines before the
    header ("==PROF==" ...) and rows without a numeric duration are skipped."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = []
    for r in csv.DictReader(io.StringIO(text[start:])):
        name, value = r.get("Kernel Name"), (r.get(TIME) or "").replace(",", "")
        try:
            ns = float(value)
        except ValueError:
            continue  # the units row under the header, or a kernel ncu could not time
        if name:
            rows.append((name[:NAME_WIDTH], ns))
    return rows


def summarise(rows):
    """{name: (count, total ns)}, in order of first appearance."""
    totals = collections.OrderedDict()
    for name, ns in rows:
        count, total = totals.get(name, (0, 0.0))
        totals[name] = (count + 1, total + ns)
    return totals


def table(model, rows, top=25):
    if not rows:
        return f"{model}: no ncu rows"
    lines = [f"== {model}: {len(rows)} kernels profiled"]
    ranked = sorted(summarise(rows).items(), key=lambda kv: -kv[1][1])[:top]
    for name, (count, total) in ranked:
        lines.append(f"{count:6d} {total / 1e3:10.1f} us {total / count / 1e3:8.2f} us/each  {name}")
    return "\n".join(lines)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="ncu's CSV output")
    p.add_argument("model", help="the model's name, for the heading")
    p.add_argument("--top", type=int, default=25, help="kernels to list (default 25)")
    a = p.parse_args(argv)
    with open(a.csv, errors="replace") as f:
        print(table(a.model, kernel_times(f.read()), a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
