#!/usr/bin/python3
"""Adds one op's kernel samples from a device profile measured here (crossover's cache, written by
`crossover devices --profile --reprofile`) to a shipped profile file of the same device, replacing
that op's samples there and keeping every other sample, measurement and figure as it was. For a
kind of sample a newer crossover measures (the fused trials' Linear, op trials_linear) without
measuring the whole profile and its validation again. The profile's note says which samples were
added when.

  /usr/bin/python3 bench/profile_add_samples.py --op trials_linear \\
      [--from ~/.cache/crossover/profiles.json] data/profiles/amd-epyc-2t.json

The cached profile must be of the same device (its id), measured with the same threads.
"""
import argparse
import json
import os
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shipped", help="the profile file to add the samples to (data/profiles/ID.json)")
    ap.add_argument("--op", required=True, help="the samples' op (e.g. trials_linear)")
    ap.add_argument("--from", dest="source",
                    default=os.path.expanduser("~/.cache/crossover/profiles.json"),
                    help="crossover's profile cache (default: %(default)s)")
    a = ap.parse_args()
    with open(a.shipped) as f:
        shipped = json.load(f)
    with open(a.source) as f:
        cache = json.load(f)
    measured = [p for p in cache.values() if isinstance(p, dict) and p.get("id") == shipped["id"]]
    if not measured:
        sys.exit(f"{a.source}: no profile with id '{shipped['id']}' (measure one here first: "
                 f"crossover devices --profile --reprofile)")
    source = measured[0]
    if source.get("threads") != shipped.get("threads"):
        sys.exit(f"{a.source}: '{shipped['id']}' measured with {source.get('threads')} threads, "
                 f"{a.shipped} with {shipped.get('threads')}")
    added = [s for s in source["samples"] if s["op"] == a.op]
    if not added:
        sys.exit(f"{a.source}: the profile '{shipped['id']}' has no samples of op '{a.op}'")
    shipped["samples"] = [s for s in shipped["samples"] if s["op"] != a.op] + added
    line = (f"{len(added)} {a.op} samples measured {source['date']} (peak "
            f"{source['peaks']['matmul_gflops']:.0f} GFLOP/s then), added to this profile of "
            f"{shipped['date']}")
    kept = [n for n in shipped.get("note", "").split("; ") if n and not n.split(" ")[1:2] == [a.op]]
    shipped["note"] = "; ".join(kept + [line])
    folder = os.path.dirname(os.path.abspath(a.shipped))
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
        json.dump(shipped, f, indent=1, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(f.name, a.shipped)
    print(f"{a.shipped}: {line}")


if __name__ == "__main__":
    main()
