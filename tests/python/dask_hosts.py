"""A crossover search on a Dask cluster of simulated hosts: run by test_dask.py as
`scripts/sim-hosts 3 --plain --rate 1gbit -- python3 dask_hosts.py OUT` (as root). This process
is the client, on the first host; the scheduler and a worker run on the second, another worker on
the third, each started through the hosts' agent (SIM_HOSTS_AGENT), without a nanny, so that a
killed worker is a lost host. The same search runs twice: fault-free, then with the worker running
a job killed during it. Prints one JSON line: both searches' objectives, the killed worker, the
workers every trial ran on."""
import json
import os
import shlex
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import disc  # noqa: E402

import crossover  # noqa: E402
import distributed  # noqa: E402

SPACE = {"train.optimizer.lr": [0.05, 0.1, 0.2, 0.4]}


def main(out):
    hosts = os.environ["SIM_HOSTS"].split()
    agent = os.environ["SIM_HOSTS_AGENT"]
    address = {h: f"10.77.0.{i + 1}" for i, h in enumerate(hosts)}
    scheduler = f"tcp://{address[hosts[1]]}:8786"
    python = shlex.quote(sys.executable)
    started = [subprocess.Popen([agent, hosts[1],
                                 f"{python} -m distributed.cli.dask_scheduler --host "
                                 f"{address[hosts[1]]} --port 8786 --no-dashboard"])]
    for h in hosts[1:]:
        started.append(subprocess.Popen([agent, h,
                                         # Hosts share no files: everything travels.
                                         f"env CROSSOVER_DASK_SHARE_NOTHING=1 "
                                         f"{python} -m distributed.cli.dask_worker {scheduler} "
                                         f"--nthreads 1 --no-nanny --no-dashboard --host "
                                         f"{address[h]}"]))
    x, y = disc(600)
    with distributed.Client(scheduler, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)

        def run(name):
            s = crossover.tune(crossover.Model("disc-4"), x, y, SPACE, epochs=3000,
                               validation_split=0.25, out=os.path.join(out, name), verbose=0,
                               client=client)
            return s.result["trials"]

        whole = run("fault-free")
        killed = []

        def kill_one():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                busy = [w for w, keys in client.processing().items()
                        if any(str(k).startswith("crossover-job-") for k in keys)]
                if busy:
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    os.kill(pid, 9)
                    killed.append(busy[0])
                time.sleep(0.02)

        killer = threading.Thread(target=kill_one)
        killer.start()
        faulted = run("faulted")
        killer.join()
    for p in started:
        p.terminate()
    print(json.dumps({
        "fault_free": [(t["id"], t["status"], t["objective"]) for t in whole],
        "faulted": [(t["id"], t["status"], t["objective"]) for t in faulted],
        "killed": killed,
        "hosts": sorted({t["host"] for t in whole + faulted}),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
