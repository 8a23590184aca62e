#!/usr/bin/env python3
"""What a worker lost mid-search costs a crossover search on a Dask cluster (issue 64: "time lost
at most the killed group's rung"): the same search run without a fault, then with one worker
killed (SIGKILL to its process, as a machine lost) when its first job has run a given fraction of
that job's fault-free time. A LocalCluster of two worker processes of one thread each, its nanny
starting a new worker in the killed one's place, as a cluster manager would; Dask runs the lost
job again from its start.

  PYTHONPATH=build/python /usr/bin/python3 bench/dask_fault.py [--model disc-4] [--epochs 2000]
                                                               [--at 0.5] [--repeats 3]

Searches: disc-4 (600 disc points, a quarter held out; 16 trials, 4 learning rates x 4 weight
decays, fused as --fuse auto chooses) or mnist-mlp (Fashion-MNIST's 60,000 training images, a fifth
held out, 1 epoch). Prints, for each faulted run, its wall time, the time lost against the
fault-free median, the killed job's fault-free time (its trials' process seconds, summed: the
group's rung) and whether every objective equals the fault-free search's; and one JSON line.
"""
import argparse
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
sys.path.insert(0, HERE)

import crossover  # noqa: E402
import distributed  # noqa: E402
from dask_tune import GRID, disc, fashion  # noqa: E402

HELD_OUT = {"disc-4": 0.25, "mnist-mlp": 0.2}


def search(name, x, y, epochs, out, client):
    start = time.perf_counter()
    s = crossover.tune(crossover.Model(name), x, y, GRID, epochs=epochs,
                       validation_split=HELD_OUT[name], out=out, verbose=0, client=client)
    return time.perf_counter() - start, s.result


def jobs_running(client):
    return {w: keys for w, keys in client.processing().items()
            if any(str(k).startswith("crossover-job-") for k in keys)}


def group_seconds(result):
    """Each job's fault-free time: {group (or a lone trial's id): its trials' process seconds}."""
    seconds = {}
    for t in result["trials"]:
        key = t.get("group") or t["id"]
        seconds[key] = seconds.get(key, 0.0) + t["process_seconds"]
    return seconds


def kill_after(client, seconds, killed):
    """Kills the worker of the first job seen running once that job has run `seconds`."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        busy = jobs_running(client)
        if busy:
            address = sorted(busy)[0]
            seen = time.monotonic()
            pid = client.run(os.getpid, workers=[address])[address]
            time.sleep(max(0.0, seconds - (time.monotonic() - seen)))
            os.kill(pid, signal.SIGKILL)
            killed.append(address)
            return
        time.sleep(0.005)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=sorted(HELD_OUT), default="disc-4")
    p.add_argument("--epochs", type=int, default=2000)
    p.add_argument("--at", type=float, default=0.5,
                   help="the fraction of the job's fault-free time at which its worker is killed")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    x, y = disc(600) if a.model == "disc-4" else fashion()
    epochs = a.epochs if a.model == "disc-4" else 1
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client, tempfile.TemporaryDirectory() as tmp:
        clean, faulted = [], []
        for r in range(a.repeats):
            wall, result = search(a.model, x, y, epochs, os.path.join(tmp, f"clean{r}"), client)
            clean.append((wall, result))
        clean_wall = statistics.median(w for w, _ in clean)
        expected = [(t["id"], t["objective"]) for t in clean[0][1]["trials"]]
        jobs = group_seconds(clean[0][1])
        job_s = max(jobs.values())  # the jobs run side by side: the longest is the one that ends last
        for r in range(a.repeats):
            client.wait_for_workers(2, timeout=120)
            killed = []
            killer = threading.Thread(target=kill_after, args=(client, a.at * job_s, killed))
            killer.start()
            wall, result = search(a.model, x, y, epochs, os.path.join(tmp, f"fault{r}"), client)
            killer.join()
            same = [(t["id"], t["objective"]) for t in result["trials"]] == expected
            faulted.append({"wall_s": wall, "lost_s": wall - clean_wall, "killed": killed,
                            "same_objectives": same})
            print(f"{a.model}: worker killed at {a.at:.0%} of its job ({a.at * job_s:.2f} s in): "
                  f"{wall:.2f} s, {wall - clean_wall:+.2f} s against the fault-free median "
                  f"{clean_wall:.2f} s; the killed job's fault-free time {job_s:.2f} s "
                  f"({'within' if wall - clean_wall <= job_s else 'MORE than'} it); "
                  f"same objectives: {same}")
    print(json.dumps({"model": a.model, "epochs": epochs, "at": a.at,
                      "clean_s": [w for w, _ in clean], "jobs_s": jobs, "faulted": faulted}))


if __name__ == "__main__":
    main()
