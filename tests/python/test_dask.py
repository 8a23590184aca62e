"""crossover.tune on a Dask cluster (crossover.dask): the same search as on this machine, trial for
trial; a worker killed during a job; Ctrl-C, and the same call going on. The LocalCluster's
workers are processes of their own. Each case runs twice: with workers that see the search's
folder (a LocalCluster's, as on a shared file system: jobs run in place), and with workers told
to share nothing (CROSSOVER_DASK_SHARE_NOTHING=1: each job runs in a temporary folder of its
worker, every file it needs travelling with its task, as where workers share no file system)."""
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import PYTHON_DIR, disc

crossover = pytest.importorskip("crossover")
distributed = pytest.importorskip("distributed")

SPACE = {"train.optimizer.lr": [0.05, 0.1, 0.2, 0.4]}


@pytest.fixture(params=["shared", "share-nothing"])
def client(request, monkeypatch):
    if request.param == "share-nothing":
        monkeypatch.setenv("CROSSOVER_DASK_SHARE_NOTHING", "1")  # the workers inherit it
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            yield c


EIGHT = {"train.optimizer.lr": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]}


def search(out, epochs, space=SPACE, **kwargs):
    x, y = disc(600)
    return crossover.tune(crossover.Model("disc-4"), x, y, space, epochs=epochs,
                          validation_split=0.25, out=out, verbose=0, **kwargs)


def objectives(s):
    return [(t["id"], t["status"], t["objective"]) for t in s.result["trials"]]


def running_jobs(client):
    """The workers running a job of the search now: {address: [task keys]}."""
    return {w: keys for w, keys in client.processing().items()
            if any(str(k).startswith("crossover-job-") for k in keys)}


def test_a_search_on_a_cluster_ends_trial_for_trial_as_on_this_machine(tmp_path, client):
    # Here: two slots of one thread each, as the cluster's two workers of one thread.
    here = search(tmp_path / "here", 4, threads=1, parallel=2)
    there = search(tmp_path / "there", 4, client=client)
    assert objectives(there) == objectives(here)
    assert all(t["status"] == "finished" for t in there.result["trials"])
    workers = sorted(client.scheduler_info()["workers"])
    devices = [p["device"] for p in there.result["parallel"]]
    assert devices == [f"dask worker {w}: cpu" for w in workers], devices
    assert {t["host"] for t in there.result["trials"]} <= {f"dask worker {w}" for w in workers}
    # Every trial's files came back: its weights, its result, its log.
    for t in there.result["trials"]:
        folder = tmp_path / "there" / "trials" / t["id"]
        assert (folder / "weights.safetensors").stat().st_size > 0
        assert (folder / "result.json").exists() and (folder / "log.txt").exists()
    assert there.best_model().count_params() == crossover.Model("disc-4").count_params()
    # The mark by which workers know the search's folder (_sees) is gone with the search.
    assert not list((tmp_path / "there").glob("**/.crossover-dask-*"))


def _no_crossover_processes():
    """On a worker (client.run): starting a crossover process fails the job."""
    import crossover.dask

    def refuse(*args, **kwargs):
        raise RuntimeError("a crossover process was started")
    crossover.dask._run = refuse


def test_a_worker_that_sees_the_folder_trains_a_group_in_its_own_process(tmp_path):
    # With the workers unable to start a crossover process, a search of fused groups ends as on
    # this machine: each group trained in its worker's process, through the engine.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            c.run(_no_crossover_processes)
            here = search(tmp_path / "here", 4, threads=1, parallel=2)
            there = search(tmp_path / "there", 4, client=c)
            assert all(t["status"] == "finished" for t in there.result["trials"]), there.result
            assert all(t["fused"] > 1 for t in there.result["trials"])
            assert objectives(there) == objectives(here)
            # What the group said is in its log, as the command's output is; each job ran once.
            logs = list((tmp_path / "there" / "groups").glob("*.log"))
            assert logs and all("validation accuracy" in p.read_text() for p in logs)
            assert not any("task failed" in p.read_text() for p in logs)


def test_a_trial_alone_trains_in_its_workers_process_and_ends_as_the_command_would(tmp_path):
    # Trials that fuse with none (here fuse="off"; a width sweep's) are jobs of one trial each:
    # with the workers unable to start a crossover process, each trains in its worker's process
    # as a group of one, and ends as the command would: the same objectives, and a loss that
    # became NaN a diverged trial, as on this machine.
    space = {"train.optimizer.lr": [0.1, 0.4, 1e12]}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            c.run(_no_crossover_processes)
            here = search(tmp_path / "here", 4, space, threads=1, parallel=2, fuse="off")
            there = search(tmp_path / "there", 4, space, client=c, fuse="off")
    assert [t["fused"] for t in there.result["trials"]] == [1, 1, 1]
    assert objectives(there) == objectives(here)
    assert [t["status"] for t in there.result["trials"]] == ["finished", "finished", "diverged"]
    # Each trial's log says how it ended, once.
    for t in there.result["trials"][:2]:
        log = (tmp_path / "there" / "trials" / t["id"] / "log.txt").read_text()
        assert log.count("validation accuracy") == 1, log


def test_workers_in_the_clients_process_run_its_groups_as_processes(tmp_path, monkeypatch):
    # Workers that are threads of this process (processes=False) share the engine's stop request
    # with this search: their groups run as the crossover command, and the search ends as here.
    import crossover.dask

    def refuse(job, stop):
        raise RuntimeError("a group ran in the process of a running search")
    monkeypatch.setattr(crossover.dask, "_run_here", refuse)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            here = search(tmp_path / "here", 4, threads=1, parallel=2)
            there = search(tmp_path / "there", 4, client=c)
            assert all(t["status"] == "finished" for t in there.result["trials"]), there.result
            assert objectives(there) == objectives(here)
            # Each job ran once (a job whose task failed runs again, as the command).
            logs = list((tmp_path / "there" / "groups").glob("*.log"))
            assert logs and not any("task failed" in p.read_text() for p in logs)


def test_workers_without_the_clients_files_are_sent_the_data(tmp_path, monkeypatch):
    # As on workers that share no file system with the client: they never read its paths. Their
    # temporary folder (where they keep what they were sent) this test's own.
    monkeypatch.setenv("CROSSOVER_DASK_SHARE_NOTHING", "1")
    (tmp_path / "workers").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "workers"))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            there = search(tmp_path / "there", 3, client=c)
            cached = c.run(lambda: sorted(os.listdir(os.path.join(
                __import__("tempfile").gettempdir(), f"crossover-dask-{os.getuid()}"))))
    here = search(tmp_path / "here", 3, threads=1, parallel=2)
    assert objectives(there) == objectives(here)
    # Each worker got the samples and the initial weights (the spec's [model] init), each once.
    assert all(len(names) == 2 for names in cached.values()), cached


def test_the_files_a_spec_names_are_read_off_its_text_as_toml_finds_them(tmp_path, monkeypatch):
    import crossover.dask
    from crossover.dask import _named_files, _spec_files
    x, y = disc(100)
    crossover.tune(crossover.Model("disc-4"), x, y, {"train.optimizer.lr": [0.1, 0.2]},
                   epochs=1, validation_data=(x[:20], y[:20]), out=tmp_path / "s", verbose=0)
    text = (tmp_path / "s" / "trials" / "t01" / "spec.toml").read_text()
    parsed = sorted(path for _, path in _spec_files(text, "t01"))
    assert len(parsed) == 3, parsed  # the samples, the validation samples, the initial weights
    # A spec as the engine writes it is read without a TOML parser (its weights' file is named
    # init-DIGEST: "init" inside a string is no key).
    with monkeypatch.context() as m:
        m.setattr(crossover.dask, "_spec_files", lambda *a: pytest.fail("parsed as TOML"))
        assert sorted(_named_files(text, "t01")) == parsed
    # `init` as a key the quick reading does not take (a dotted key): parsed, still found.
    dotted = 'model.init = "/w.safetensors"\n[data]\nsource = "csv:/d.csv"\n'
    assert sorted(_named_files(dotted, "x")) == ["/d.csv", "/w.safetensors"]
    # Quoted otherwise than the engine writes specs (a literal string): parsed as TOML.
    literal = "[model]\ninit = 'C:\\w.safetensors'\n[data]\nsource = \"csv:/d.csv\"\n"
    assert sorted(_named_files(literal, "x")) == ["/d.csv", "C:\\w.safetensors"]


def test_a_worker_that_cannot_see_the_folder_says_so_once_and_gets_its_jobs_whole(tmp_path,
                                                                                   monkeypatch):
    # Jobs go as their command line alone; a worker that cannot see the search's folder (here:
    # told to share nothing) answers so, the job is sent again with its files, and so is every
    # later job of that worker, without asking again.
    import crossover.dask
    answers, full = [], []
    original_full = crossover.dask.DaskRunner._full_inputs
    original_collect = crossover.dask.DaskRunner._result

    def counted(self, job):
        full.append(job.folders)
        return original_full(self, job)

    def watched(job):
        result = original_collect(job)
        if result is not None and result[0] == crossover.dask._NEED_FILES:
            answers.append(result[1])
        return result
    monkeypatch.setattr(crossover.dask.DaskRunner, "_full_inputs", counted)
    monkeypatch.setattr(crossover.dask.DaskRunner, "_result", staticmethod(watched))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            blind = sorted(c.scheduler_info()["workers"])[0]
            c.run(lambda: os.environ.__setitem__("CROSSOVER_DASK_SHARE_NOTHING", "1"),
                  workers=[blind])
            # Eight trials long enough that each worker takes several.
            there = search(tmp_path / "there", 300, client=c, fuse="off", space=EIGHT)
    here = search(tmp_path / "here", 300, threads=1, parallel=2, fuse="off", space=EIGHT)
    assert answers == [blind], answers
    blind_jobs = [t for t in there.result["trials"] if t["host"] == f"dask worker {blind}"]
    assert len(full) >= len(blind_jobs) >= 2, (full, blind_jobs)
    assert objectives(there) == objectives(here)


def test_workers_elsewhere_find_a_relative_folder_from_the_clients_working_folder(tmp_path,
                                                                                 monkeypatch):
    # `out` relative to the client's working folder, the workers' own elsewhere: they see the
    # search's folder all the same, and no job is sent again with its files.
    import crossover.dask
    answers = []
    original = crossover.dask.DaskRunner._result

    def watched(job):
        result = original(job)
        if result is not None and result[0] == crossover.dask._NEED_FILES:
            answers.append(result[1])
        return result
    monkeypatch.setattr(crossover.dask.DaskRunner, "_result", staticmethod(watched))
    (tmp_path / "client").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "client")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            c.run(os.chdir, str(tmp_path / "elsewhere"))
            there = search("relative", 3, client=c)
    assert answers == [], answers
    assert all(t["status"] == "finished" for t in there.result["trials"]), there.result


def test_data_goes_to_one_worker_where_copying_it_to_every_worker_fails(tmp_path, monkeypatch):
    # distributed 2022.12's scatter(broadcast=True) fails where a worker leaves meanwhile (seen in
    # CI on the simulated hosts: "Sample larger than population or is negative"); the data then
    # goes to one worker, and Dask copies it to each worker whose job needs it.
    monkeypatch.setenv("CROSSOVER_DASK_SHARE_NOTHING", "1")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            scatter, broadcasts = c.scatter, []

            def failing_broadcast(data, broadcast=False, **kwargs):
                if broadcast:
                    broadcasts.append(1)
                    raise ValueError("Sample larger than population or is negative")
                return scatter(data, **kwargs)

            monkeypatch.setattr(c, "scatter", failing_broadcast)
            there = search(tmp_path / "there", 3, client=c)
    here = search(tmp_path / "here", 3, threads=1, parallel=2)
    assert broadcasts, "the data was never sent"
    assert objectives(there) == objectives(here)


def test_a_worker_killed_during_a_job_costs_only_that_job(tmp_path, client):
    expected = search(tmp_path / "fault-free", 3000, client=client)
    killed = []

    def kill_one():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            busy = running_jobs(client)
            if busy:
                address = sorted(busy)[0]
                pid = client.run(os.getpid, workers=[address])[address]
                os.kill(pid, signal.SIGKILL)
                killed.append(address)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one)
    killer.start()
    s = search(tmp_path / "faulted", 3000, client=client)
    killer.join()
    assert killed, "no job was seen running"
    assert objectives(s) == objectives(expected)


def test_a_job_whose_result_is_lost_after_it_ended_runs_again(tmp_path):
    # A worker killed after its job ended but before the result came back: Dask reports the task
    # finished, then cannot give its result (it cancels a task whose scattered data went with the
    # worker). The job is run again from its inputs, as one whose worker was lost mid-job.
    from crossover.dask import DaskRunner, _Job

    class LostResult:
        status = "finished"

        def done(self):
            return True

        def result(self, timeout=None):
            raise distributed.client.CancelledError("crossover-job-lost")

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            runner = DaskRunner(c)
            submitted = []
            runner._submit = lambda slot, job: submitted.append(slot)
            log = tmp_path / "log.txt"
            job = _Job([str(tmp_path)], str(log), ([], [], {}), False, {})
            job.future = LostResult()
            runner._running[0] = job
            assert runner.collect() == []
            assert submitted == [0]
            assert "CancelledError" in log.read_text() and "submitted again" in log.read_text()


def test_ctrl_c_keeps_the_finished_trials_and_the_same_call_goes_on(tmp_path, client):
    expected = search(tmp_path / "whole", 3000, client=client, fuse="off")

    def interrupt_once_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not running_jobs(client):
            time.sleep(0.02)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    stopper = threading.Thread(target=interrupt_once_running)
    stopper.start()
    with pytest.raises(KeyboardInterrupt):
        search(tmp_path / "stopped", 3000, client=client, fuse="off", checkpoint_every="200steps")
    stopper.join()
    assert not running_jobs(client)
    s = search(tmp_path / "stopped", 3000, client=client, fuse="off", checkpoint_every="200steps")
    assert objectives(s) == objectives(expected)
    # A trial went on from the checkpoint its stopped job sent back, in its own folder's words.
    logs = "".join((tmp_path / "stopped" / "trials" / t["id"] / "log.txt").read_text()
                   for t in s.result["trials"])
    assert "from its checkpoint in " + str(tmp_path / "stopped" / "trials") in logs, logs


def test_a_worker_that_joins_during_the_search_takes_jobs(tmp_path):
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            first = set(c.scheduler_info()["workers"])

            def grow_once_running():
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not running_jobs(c):
                    time.sleep(0.02)
                cluster.scale(2)

            grower = threading.Thread(target=grow_once_running)
            grower.start()
            x, y = disc(600)
            s = crossover.tune(crossover.Model("disc-4"), x, y,
                               {"train.optimizer.lr": [0.01 * k for k in range(1, 17)]},
                               epochs=5000, validation_split=0.25, out=tmp_path / "s", verbose=0,
                               fuse="off", client=c)
            grower.join()
    hosts = {t["host"] for t in s.result["trials"]}
    assert all(t["status"] == "finished" for t in s.result["trials"])
    assert len(s.result["parallel"]) == 2, s.result["parallel"]
    assert hosts - {f"dask worker {w}" for w in first}, hosts


def test_a_client_that_is_not_one_is_refused_saying_so(tmp_path):
    with pytest.raises(TypeError, match=r"tune\(client=\): a distributed.Client expected "
                                        r"\(got str\)"):
        search(tmp_path / "no", 2, client="tcp://scheduler:8786")


def test_a_cluster_without_workers_is_refused_saying_so(tmp_path):
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            with pytest.raises(ValueError, match="the cluster has no worker"):
                search(tmp_path / "none", 2, client=c)


def test_a_gpu_worker_trains_its_jobs_on_its_gpu_as_a_search_here_does(tmp_path):
    if not any(d.startswith("cuda") for d in crossover.devices()["available"]):
        pytest.skip("no GPU here: a worker with a GPU resource is checked where there is one")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  resources={"GPU": 1}, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        with distributed.Client(cluster) as c:
            there = search(tmp_path / "there", 3, client=c)
    here = search(tmp_path / "here", 3, devices=["cuda"], parallel=1)
    assert [t["device"] for t in there.result["trials"]] == ["cuda"] * 4
    assert objectives(there) == objectives(here)


def test_a_cluster_of_simulated_hosts_loses_a_host_and_ends_as_without_the_fault(tmp_path):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    sim_hosts = os.path.join(root, "scripts", "sim-hosts")
    check = subprocess.run([sim_hosts, "--check"], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(check.stderr.strip() or check.stdout.strip())
    name = f"xosim{os.getpid()}{int(time.time()) % 100000}"
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR))
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dask_hosts.py")
    run = subprocess.run([sim_hosts, "3", "--plain", "--rate", "1gbit", "--name", name, "--",
                          sys.executable, driver, str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["killed"], found
    assert found["faulted"] == found["fault_free"], found
    assert all(status == "finished" for _, status, _ in found["faulted"]), found
    # Both workers' hosts ran trials, and the client's (the first) none.
    assert {h.split(":")[1] for h in found["hosts"]} == {"//10.77.0.2", "//10.77.0.3"}, found
    # Nothing of it is left: no namespace, no process.
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert name not in namespaces, namespaces
    left = subprocess.run(["pgrep", "-f", "distributed.cli.dask_"], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
