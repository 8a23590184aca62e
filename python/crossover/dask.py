"""crossover.dask: a search's jobs on a Dask cluster.

`crossover.tune(..., client=distributed.Client(...))` plans the search here as it does on one
machine (the grid or the samples, halving's rungs, fused groups) and runs each of its jobs (a fused
group of trials, or a trial alone) as one Dask task on a worker, one job a worker at a time.

A worker that sees the search's folder itself (a shared file system, or a LocalCluster: it finds
there the mark this search wrote, a random token) runs its jobs in place, writing into the trials'
folders as a search on one machine does, and nothing travels but the command line; there a CPU
job, a fused group or a trial alone (as the group of its one folder), trains in the worker's own
process, through the engine with the GIL released (as Model.fit trains); a GPU's runs the
crossover command (CROSSOVER_DASK_PROCESSES=1: every job does). A job goes as its command line
alone until its worker answers that it cannot see the folder; from then on that worker's tasks
carry their trials' folders (spec, checkpoints, log) as bytes, and the worker runs the crossover
command beside its own crossover package on them in a temporary folder; the folders' new files
(result, weights, log, checkpoints) come back as the task's result and are written into the
search's folder here. The data files a spec names are read where the worker finds the same file at
the same path (checked by content, once per worker); where it does not, they are sent to every
worker once. So no shared file system is needed, and what a
task starts from is only its inputs: a worker lost during a task, Dask runs it again on another
worker from the same start (the rung's checkpoints, or the newest checkpoints in the shared
folder), so the search ends as it would have. Ctrl-C asks every running task to stop: its job
saves its checkpoints, they come back, and the same call goes on from them.

DaskRunner is the runner the engine's search calls (src/python/runner.h gives its protocol)."""
import hashlib
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid

# The spec fields that name files, and the prefixes of a data source that does (tune/
# trial_process.cpp's with_absolute_paths makes them absolute).
_SOURCE_PREFIXES = ("csv:", "safetensors:", "idx:", "imdb:")
_EXIT_INTERRUPTED = 130  # core/exit_codes.h
_EXIT_DIVERGED = 4  # core/exit_codes.h: the loss became NaN or infinite
_EXIT_MACHINE = 7  # the machine failed the job: the search runs it again when it goes on
_RETRIES = 3  # a job's task failed with its workers: submitted again at most this many times
_NEED_DATA = -1  # run_job's answer where its worker lacks the data: sent again with the data
_NEED_FILES = -2  # its answer to a job sent as its command line alone where the worker does not
# see the search's folder (or a file a spec names), with the worker's address: sent again with the
# trials' files and data, as every later job of that worker is
_CHANGES_EVERY = 0.5  # seconds between two looks at the cluster's workers (each asks the scheduler)
_WAIT = 0.2  # seconds the search waits for a job's end before it looks at anything else
# Seconds a done job's result may take to come back: where its worker died meanwhile, Dask
# computes the task again and result() would wait that long, the search held; it is run again.
_RESULT_WAIT = 10


def _program():
    """The crossover command beside this package (the build and scripts/install-python put it
    there): what a worker runs."""
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "crossover")
    if not os.access(program, os.X_OK):
        raise FileNotFoundError(f"{program}: the crossover command is not beside the package on "
                                "this worker (install crossover on every worker)")
    return program


def _trial_dirs(args):
    """The trials' folders a job's command line names: train-group's folders, or the folder of
    train's spec."""
    if args and args[0] == "train-group":
        dirs = []
        for a in args[1:]:
            if a.startswith("--"):
                break
            dirs.append(a)
        return dirs
    if len(args) >= 2 and args[0] == "train":
        return [os.path.dirname(args[1])]
    raise ValueError(f"crossover.dask: a job's command line neither trains nor trains a group: "
                     f"{args!r}")


def _marked(arg, dirs):
    """`arg` with a trial folder's path in it replaced by its mark (@@TRIAL<k>@@)."""
    for k, d in enumerate(dirs):
        if arg == d or arg.startswith(d + os.sep):
            return f"@@TRIAL{k}@@" + arg[len(d):]
    return arg


def _unmarked(arg, dirs):
    for k, d in enumerate(dirs):
        mark = f"@@TRIAL{k}@@"
        if arg.startswith(mark):
            return d + arg[len(mark):]
    return arg


def _mark_text(text, dirs):
    """What a job printed, the worker's trial folders in it marked (@@TRIAL<k>@@), so that the
    search's own folders take their place (_unmark_text)."""
    for k, d in sorted(enumerate(dirs), key=lambda e: len(e[1]), reverse=True):
        text = text.replace(d, f"@@TRIAL{k}@@")
    return text


def _unmark_text(text, dirs):
    for k, d in enumerate(dirs):
        text = text.replace(f"@@TRIAL{k}@@", d)
    return text


def _read_folder(path):
    """{relative path: bytes} of the regular files under `path` (links are not followed)."""
    files = {}
    for root, dirnames, names in os.walk(path):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(root, d))]
        for name in names:
            full = os.path.join(root, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            with open(full, "rb") as f:
                files[os.path.relpath(full, path)] = f.read()
    return files


def _trial_inputs(folder):
    """What a trial's job reads from its folder: its spec, its log (the job appends to it) and its
    checkpoints."""
    files = {}
    for name in ("spec.toml", "log.txt"):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                files[name] = f.read()
    checkpoints = os.path.join(folder, "checkpoints")
    if os.path.isdir(checkpoints) and not os.path.islink(checkpoints):
        for rel, content in _read_folder(checkpoints).items():
            files[os.path.join("checkpoints", rel)] = content
    if "spec.toml" not in files:
        raise FileNotFoundError(f"{folder}: the trial's spec.toml is missing")
    return files


def _safe_relative(rel):
    norm = os.path.normpath(rel)
    if os.path.isabs(norm) or norm == ".." or norm.startswith(".." + os.sep):
        raise ValueError(f"crossover.dask: a job returned a file outside its trial's folder: "
                         f"{rel!r}")
    return norm


def _write_file(path, content):
    """Written to a temporary name and renamed over `path`: a link planted there is replaced,
    never written through."""
    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "wb") as f:
        f.write(content)
    os.replace(partial, path)


def _write_back(folder, files):
    """A job's returned files into its trial's folder: each written whole; checkpoints the job
    pruned are removed here too."""
    checkpoints = os.path.join(folder, "checkpoints")
    returned = {_safe_relative(rel) for rel in files}
    if os.path.islink(checkpoints):
        os.unlink(checkpoints)
    if any(rel.startswith("checkpoints" + os.sep) for rel in returned):
        os.makedirs(checkpoints, exist_ok=True)
        for name in os.listdir(checkpoints):
            rel = os.path.join("checkpoints", name)
            if name.startswith("step-") and rel not in returned:
                os.unlink(os.path.join(folder, rel))
    for rel, content in files.items():
        rel = _safe_relative(rel)
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write_file(path, content)


def _spec_files(spec_text, origin):
    """The files a trial's spec names, as (the value written in the spec, its path)."""
    import tomllib
    try:
        spec = tomllib.loads(spec_text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{origin}: {e}") from None
    found = []
    data = spec.get("data", {})
    for key in ("source", "test"):
        value = data.get(key)
        if isinstance(value, str):
            for prefix in _SOURCE_PREFIXES:
                if value.startswith(prefix):
                    found.append((value, value[len(prefix):]))
    model = spec.get("model", {})
    if isinstance(model, dict) and isinstance(model.get("init"), str):  # the initial weights
        found.append((model["init"], model["init"]))
    return found


def _toml_string(text):
    """`text` as the engine's spec writer quotes it (a basic string: JSON's escapes)."""
    import json
    return json.dumps(text, ensure_ascii=False)


def _materialise(cache, digest, content):
    """A data file (bytes) or folder ({relative path: bytes}) in the worker's cache, written once
    under its digest: the path it has there."""
    path = os.path.join(cache, digest)
    if os.path.exists(path):
        return path
    partial = f"{path}.partial-{os.getpid()}-{threading.get_ident()}"
    if isinstance(content, dict):
        for rel, data in content.items():
            full = os.path.join(partial, _safe_relative(rel))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
    else:
        with open(partial, "wb") as f:
            f.write(content)
    try:
        os.rename(partial, path)
    except OSError:  # another task of this worker wrote it first
        if not os.path.exists(path):
            raise
    return path


# (path, size, mtime) -> digest of a data file or folder, here and on each worker: a file is read
# whole once per process to learn it.
_DIGESTS = {}


def _digest_of(path):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        if os.path.isdir(path):
            for rel, content in sorted(_read_folder(path).items()):
                h.update(rel.encode() + b"\0" + hashlib.sha256(content).digest())
        else:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
        _DIGESTS[key] = h.hexdigest()[:32]
    return _DIGESTS[key]


class _NeedData(Exception):
    """A job's data is not on its worker (no file at the client's path, or another one there)."""


def _local_data(cache, digest, entry):
    """Where a job's data file or folder is on this worker: at the client's own path where the
    same data is there (a shared file system), else in the worker's cache from the bytes the
    client sent; _NeedData where it sent none."""
    path, content = entry
    if content is None:
        if (os.environ.get("CROSSOVER_DASK_SHARE_NOTHING") != "1" and os.path.exists(path)
                and _digest_of(path) == digest):
            return path
        raise _NeedData(digest)
    return _materialise(cache, digest, content)


def _dies_with_worker(argv):
    """`argv` run so that it dies with the worker that started it (a worker killed mid-task
    leaves no trial running): util-linux's setpriv sets its parent-death signal, then execs it."""
    import shutil
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] + argv if setpriv else argv


def _sees(shared):
    """Whether this worker sees the search's folder: the mark the client wrote there (`shared`'s
    "mark", holding its "token") is there (a stale copy of the folder elsewhere cannot hold a
    fresh token)."""
    if shared is None or os.environ.get("CROSSOVER_DASK_SHARE_NOTHING") == "1":
        return False
    try:
        with open(shared["mark"]) as f:
            return f.read() == shared["token"]
    except OSError:
        return False


# A data source or an initial-weights file as the engine's spec writer quotes it (a basic string
# without escapes): every string _spec_files could find, and perhaps more.
_QUOTED_SOURCE = re.compile(
    r'"(?:' + "|".join(p[:-1] for p in _SOURCE_PREFIXES) + r'):([^"\\\n]*)"')
_QUOTED_INIT = re.compile(r'^[ \t]*init[ \t]*=[ \t]*"([^"\\\n]*)"', re.M)
_ANY_INIT = re.compile(r"\binit\b")
_BASIC_STRING = re.compile(r'"[^"\\\n]*"')


def _named_files(text, origin):
    """The paths of the files a spec names: read off its quoted strings where it quotes as the
    engine writes specs (32 specs parsed as TOML took a job's worker 4 ms), else parsed."""
    inits = _QUOTED_INIT.findall(text)
    # Parsed where the spec quotes otherwise, or names `init` outside a string otherwise than
    # as those keys (a dotted key, an inline table, a comment): the quick reading could miss a
    # file there. Inside strings "init" is no key (the weights' own file is init-DIGEST).
    if ("\\" in text or "'" in text or '"""' in text
            or len(_ANY_INIT.findall(_BASIC_STRING.sub('""', text))) != len(inits)):
        return [path for _, path in _spec_files(text, origin)]
    return _QUOTED_SOURCE.findall(text) + inits


def _spec_files_here(folders):
    """Whether every file the specs of the trial folders `folders` name by an absolute path is
    on this worker (a data set outside the search's folder may be the client's alone)."""
    seen = set()
    for folder in folders:
        path = os.path.join(folder, "spec.toml")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return False
        for named in _named_files(text, path):
            if named in seen or not os.path.isabs(named):
                continue
            if not os.path.exists(named):
                return False
            seen.add(named)
    return True


def _run(argv, cwd, stop):
    """`argv` run to its end, SIGINTed (it saves its checkpoints) once `stop` (a Dask Event) is
    set: (exit code, what it printed)."""
    process = subprocess.Popen(_dies_with_worker(argv), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd)
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                if stop.wait(0.25):
                    process.send_signal(signal.SIGINT)
                    return
            except Exception:  # the scheduler unreachable for a moment: ask again
                time.sleep(0.25)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    output, _ = process.communicate()
    done.set()  # the watcher ends at its next poll; the job's end does not wait for it
    code = process.returncode if process.returncode >= 0 else 128 - process.returncode
    return code, output.decode(errors="replace")


# train-group's flags as the engine's TrainGroupJob fields: (field, type); and its switches.
_GROUP_FLAGS = {"--device": ("device", str), "--threads": ("threads", int),
                "--precision": ("precision", str), "--checkpoint-every": ("checkpoint_every", str),
                "--pause-after": ("pause_after", int), "--on-nan": ("on_nan", str)}
_GROUP_SWITCHES = {"--quiet": "quiet", "--resume": "resume"}
# One job at a time in a worker's own process (the engine's stop request is the process's): a
# second task there at once (a worker of several threads) runs its job as a process.
_HERE = threading.Lock()


def _engine_idle():
    """Whether no engine job runs in this process now (the module's own count)."""
    from . import _crossover
    return _crossover.jobs_running() == 0


# A trial alone's command line (tune/trial_process.cpp's train_args): its files, each the one of
# that name in the spec's folder, and its switches.
_TRIAL_FILES = {"--json": "result.json", "--save": "weights.safetensors",
                "--checkpoint-dir": "checkpoints"}
_TRIAL_SWITCHES = {"--quiet": "quiet", "--resume-if-any": "resume"}


def _job_flags(job, flags, switches, named=None):
    """A command line's flags (after its folders or spec) set on `job`: its `switches`, and
    train-group's flags with a value; with `named`, a trial alone's file flags (_TRIAL_FILES),
    each checked by named(flag, path). False at a flag that is none of those (or a file `named`
    refuses): the command line then runs as a process."""
    k = 0
    while k < len(flags):
        if flags[k] in switches:
            setattr(job, switches[flags[k]], True)
            k += 1
        elif named is not None and flags[k] in _TRIAL_FILES and k + 1 < len(flags):
            if not named(flags[k], flags[k + 1]):
                return False
            k += 2
        elif flags[k] in _GROUP_FLAGS and k + 1 < len(flags):
            field, kind = _GROUP_FLAGS[flags[k]]
            setattr(job, field, kind(flags[k + 1]))
            k += 2
        else:
            return False
    return True


def _lone_job(argv, cwd):
    """A trial alone's `train TRIAL/spec.toml FLAGS` as the TrainGroupJob of its one folder (a
    group of one trains as its trial alone: the same result and weights, docs/benchmarks.md
    "Groups of one"); None for any other shape of `train`."""
    from ._crossover import TrainGroupJob
    spec = os.path.join(cwd, argv[1]) if len(argv) > 1 else ""
    if os.path.basename(spec) != "spec.toml":
        return None
    folder, job, files = os.path.dirname(spec), TrainGroupJob(), set()

    def named(flag, path):  # each of the trial's files the one of its name in its folder
        files.add(flag)
        return os.path.normpath(os.path.join(cwd, path)) == os.path.join(folder, _TRIAL_FILES[flag])
    if (not _job_flags(job, argv[2:], _TRIAL_SWITCHES, named) or files != set(_TRIAL_FILES)
            or not (job.quiet and job.resume)):
        return None
    job.dirs = [folder]
    return job


def _group_job(argv, cwd):
    """`train-group DIR... FLAGS` on the CPU as the engine's TrainGroupJob, its folders from
    `cwd` where relative, and a trial alone's `train` as the group of its one folder; None for any
    other command line (it runs as a process), or with CROSSOVER_DASK_PROCESSES=1."""
    if not argv or os.environ.get("CROSSOVER_DASK_PROCESSES") == "1":
        return None
    if argv[0] == "train":
        job = _lone_job(argv, cwd)
        return job if job is not None and job.device == "cpu" else None
    if argv[0] != "train-group":
        return None
    from ._crossover import TrainGroupJob
    job, dirs, k = TrainGroupJob(), [], 1
    while k < len(argv) and not argv[k].startswith("--"):
        dirs.append(os.path.join(cwd, argv[k]))
        k += 1
    if not _job_flags(job, argv[k:], _GROUP_SWITCHES):
        return None
    job.dirs = dirs
    # A GPU's group runs as a process until a GPU has run one in a worker's process (a CUDA
    # context kept from one job to the next: docs/benchmarks.md, "Not yet run on a GPU").
    return job if dirs and job.device == "cpu" else None


def _run_here(job, stop):
    """A train-group job in this worker's own process (the engine's, the GIL released while it
    trains), asked to stop as the command is by Ctrl-C once `stop` (a Dask Event) is set: (exit
    code, what the command would have printed)."""
    from . import _crossover
    done = threading.Event()
    asking = threading.Lock()  # "not done yet, so stop it" as one step: never the next job

    def watch():
        while not done.is_set():
            try:
                if stop.wait(0.25):
                    # Asked again at every poll until the job ends: a request made before the job
                    # cleared the engine's stop flag at its start would otherwise be lost.
                    with asking:
                        if not done.is_set():
                            _crossover.stop_job()
            except Exception:  # the scheduler unreachable for a moment: ask again
                time.sleep(0.25)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return _crossover.train_group(job)
    finally:
        with asking:
            done.set()  # before the next job may start here; the watcher ends at its next poll


def run_job(args, trials, data, stop_name, shared=None):
    """A Dask task: `crossover ARGS` on a worker. Where the worker sees the search's folder
    (`shared`: the "mark" the client wrote there and its "token", the client's trial "folders",
    which replace their marks in `args`, and its working folder, "cwd", where the command runs),
    in place, and returns (exit code, the command's output, None). A job sent as its command line
    alone (`trials` and `data` None, as the client sends a job until its worker says it cannot
    see the folder) runs in place, or answers (_NEED_FILES, the worker's address, None).
    Otherwise in a temporary
    folder holding the trials' folders (`trials`, one {relative path: bytes} each, marked
    @@TRIAL<k>@@ in `args`) and the data (`data`: {digest: (the client's path, None or its
    bytes, or {relative path: bytes} for a folder)}, marked @@DATA<digest>@@ in the specs), and
    returns (exit code, the command's output, each trial folder's files after it); the code
    _NEED_DATA where the data was not sent and the worker does not have it. Stops the command
    (SIGINT: it saves its checkpoints) when the search's Event `stop_name` is set.
    """
    import distributed
    # In place where this worker sees the search's folder and every data file at the client's
    # path (a data set outside the shared folder may still be the client's alone).
    if trials is None:
        folders = [os.path.join(shared["cwd"], f) for f in shared["folders"]]
        if not (_sees(shared) and _spec_files_here(folders)):
            return _NEED_FILES, distributed.get_worker().address, None
        in_place = True
    else:
        in_place = _sees(shared) and all(os.path.exists(path) for path, _ in data.values())
    if not in_place:
        cache = os.path.join(tempfile.gettempdir(), f"crossover-dask-{os.getuid()}")
        os.makedirs(cache, mode=0o700, exist_ok=True)
        try:
            local = {digest: _local_data(cache, digest, entry) for digest, entry in data.items()}
        except _NeedData:
            return _NEED_DATA, "", []
    stop = distributed.Event(stop_name)
    if stop.is_set():
        unchanged = None if in_place else [
            {rel: c for rel, c in files.items() if rel != "spec.toml"} for files in trials]
        return _EXIT_INTERRUPTED, "crossover: the search stopped before this job started\n", unchanged
    if in_place:
        argv = [_unmarked(a, shared["folders"]) for a in args]
        # A job run again after its task failed (a worker lost: perhaps to the job itself, a crash
        # or the kernel's memory killer) runs as a process, where a crash ends the job alone.
        job = None if shared.get("processes") else _group_job(argv, shared["cwd"])
        here = job is not None and _HERE.acquire(blocking=False)
        try:
            # The engine's stop request is the process's: not beside an engine job of this
            # process's own (a client in this process, its search running; a fit).
            if here and _engine_idle():
                code, output = _run_here(job, stop)
                # A trial alone's log is its own, which the job wrote: what it printed goes there
                # only where it failed (its exit code is the command's: job/train_group.cpp).
                if argv[0] == "train" and code in (0, _EXIT_DIVERGED, _EXIT_INTERRUPTED):
                    output = ""
            else:
                code, output = _run([_program()] + argv, shared["cwd"], stop)
        finally:
            if here:
                _HERE.release()
        return code, output, None
    with tempfile.TemporaryDirectory(prefix="crossover-job-") as tmp:
        dirs = []
        for k, files in enumerate(trials):
            folder = os.path.join(tmp, f"t{k:03}")
            for rel, content in files.items():
                if rel == "spec.toml":
                    text = content.decode()
                    for digest, path in local.items():
                        text = text.replace(f"@@DATA{digest}@@", path)
                    content = text.encode()
                path = os.path.join(folder, _safe_relative(rel))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(content)
            dirs.append(folder)
        code, output = _run([_program()] + [_unmarked(a, dirs) for a in args], tmp, stop)
        outputs = []
        for folder in dirs:
            files = _read_folder(folder)
            files.pop("spec.toml", None)
            if "log.txt" in files:
                files["log.txt"] = _mark_text(files["log.txt"].decode(errors="replace"),
                                              dirs).encode()
            outputs.append(files)
        return code, _mark_text(output, dirs), outputs


class _Job:
    def __init__(self, folders, log, inputs, gpu, shared):
        self.future = None
        self.folders = folders
        self.log = log
        # run_job's arguments but the stop's name: (marked args, each trial's files, the data),
        # the last two None where the job is sent as its command line alone
        self.inputs = inputs
        self.gpu = gpu
        self.shared = shared  # run_job's `shared`: this search's mark, the trial folders
        self.started = time.monotonic()
        self.retries = 0  # times its task failed with its workers and was submitted again


class DaskRunner:
    """The search's jobs on `client`'s workers: a slot per worker (its threads each trial's, or
    `threads`; a worker with a "GPU" resource runs its trials on cuda), each job pinned to its
    slot's worker but free to run on another where that one is lost."""

    def __init__(self, client, threads=0):
        import distributed
        from distributed.client import Client
        if not isinstance(client, Client):
            raise TypeError(f"tune(client=): a distributed.Client expected (got "
                            f"{type(client).__name__})")
        workers = client.scheduler_info().get("workers", {})
        if not workers:
            raise ValueError("tune(client=): the cluster has no worker (start one with `dask "
                             "worker SCHEDULER-ADDRESS`, or wait with client.wait_for_workers(n))")
        self._client = client
        self._threads = int(threads)
        self._addresses = []  # each slot's worker
        self._gone = set()  # the slots whose worker left
        self.slots = []
        self._join(workers)
        self._token = uuid.uuid4().hex[:12]
        self._stop = distributed.Event(f"crossover-stop-{self._token}", client=client)
        self._running = {}  # slot -> _Job
        self._paths = {}  # digest -> the data's path here
        self._sent = {}  # digest -> its scattered future, once a worker lacked it
        self._marks = {}  # a folder of trial folders -> the mark written in it (_sees)
        self._blind = set()  # the workers that said they cannot see the search's folder
        self._jobs = 0
        self._looked = time.monotonic()  # when changes() last asked the scheduler
        self._ended = threading.Event()  # set when a job's future is done (wait)

    def _join(self, workers):
        """Slots for the workers of `workers` (scheduler_info's) that have none yet."""
        joined = []
        for address in sorted(workers):
            if address in self._addresses:
                continue
            w = workers[address]
            gpu = bool((w.get("resources") or {}).get("GPU"))
            n = 0 if gpu else int(self._threads or w.get("nthreads") or 1)
            self._addresses.append(address)
            self.slots.append(("cuda" if gpu else "cpu", n, f"dask worker {address}"))
            joined.append(self.slots[-1])
        return joined

    def changes(self):
        """The slots of workers that joined since the last call, and the slots whose worker
        left (a job of theirs still running goes on elsewhere; no job starts there again). The
        scheduler is asked at most every _CHANGES_EVERY seconds (the search calls this before
        every start, and each ask is a round trip)."""
        if time.monotonic() - self._looked < _CHANGES_EVERY:
            return [], []
        self._looked = time.monotonic()
        workers = self._client.scheduler_info().get("workers", {})
        joined = self._join(workers)
        gone = [i for i, a in enumerate(self._addresses) if a not in workers and i not in self._gone]
        self._gone.update(gone)
        return joined, gone

    def _ship(self, digest):
        """The data of `digest` sent to every worker, once: its future."""
        if self._sent.get(digest) is None:
            path = self._paths[digest]
            if os.path.isdir(path):
                content = _read_folder(path)
            else:
                with open(path, "rb") as f:
                    content = f.read()
            self._sent[digest] = self._scatter(content)
        return self._sent[digest]

    def _scatter(self, content):
        """`content` sent to every worker; where a worker is lost meanwhile (distributed
        2022.12's replicate samples from the workers it had: "Sample larger than population";
        or the lost worker, not yet removed, closes the stream), sent to one, and Dask copies it
        to each worker whose task needs it; tried again until the scheduler has removed the lost
        worker (it does within seconds)."""
        deadline = time.monotonic() + 30
        while True:
            for broadcast in (True, False):
                try:
                    return self._client.scatter(content, broadcast=broadcast, hash=False)
                except (ValueError, OSError):  # distributed's CommClosedError is an OSError
                    if time.monotonic() > deadline and not broadcast:
                        raise
            time.sleep(0.25)

    def _inputs(self, folder, data):
        files = _trial_inputs(folder)
        spec_path = os.path.join(folder, "spec.toml")
        text = files["spec.toml"].decode()
        for written, path in _spec_files(text, spec_path):
            if not os.path.isabs(path) or not os.path.exists(path):
                continue  # a built-in data set (fashion-mnist), found on the worker itself
            digest = _digest_of(path)
            self._paths[digest] = path
            data[digest] = (path, self._sent.get(digest))
            quoted = _toml_string(written)
            if quoted not in text:
                raise ValueError(f"{spec_path}: cannot mark {written!r} for the workers (the spec "
                                 "quotes it otherwise)")
            text = text.replace(quoted, _toml_string(written.replace(path, f"@@DATA{digest}@@")))
        files["spec.toml"] = text.encode()
        return files

    def _mark(self, folder):
        """The path of this search's mark in the folder holding `folder` (written once, holding
        the token), by which a worker that sees the folder knows it (_sees)."""
        parent = os.path.abspath(os.path.dirname(folder))
        if parent not in self._marks:
            path = os.path.join(parent, f".crossover-dask-{self._token}")
            _write_file(path, self._token.encode())
            self._marks[parent] = path
        return self._marks[parent]

    def remove_marks(self):
        for path in self._marks.values():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._marks.clear()

    def _full_inputs(self, job):
        """run_job's arguments for `job` with its trials' files and the data they name (for a
        worker that does not see the search's folder)."""
        data = {}
        trials = [self._inputs(folder, data) for folder in job.folders]
        return (job.inputs[0], trials, data)

    def start(self, slot, args, log):
        folders = sorted(_trial_dirs(args), key=len, reverse=True)
        marked = [_marked(a, folders) for a in args]
        # The working folder: args may be relative to it.
        shared = {"mark": self._mark(folders[0]), "token": self._token, "folders": folders,
                  "cwd": os.getcwd()}
        job = _Job(folders, log, (marked, None, None), self.slots[slot][0] == "cuda", shared)
        # The command line alone, unless its worker said it cannot see the search's folder: the
        # trials' files are read here only then (64 specs parsed, and the samples hashed, were a
        # tenth of a 64-trial disc-4 search). A worker that cannot says so once (_NEED_FILES).
        if self._addresses[slot] in self._blind:
            job.inputs = self._full_inputs(job)
        self._submit(slot, job)
        self._running[slot] = job

    def _submit(self, slot, job):
        self._jobs += 1
        job.future = self._client.submit(
            run_job, *job.inputs, self._stop.name, job.shared,
            key=f"crossover-job-{self._token}-{self._jobs}",
            workers=[self._addresses[slot]], allow_other_workers=True, pure=False,
            resources={"GPU": 1} if job.gpu else None)
        job.future.add_done_callback(lambda _: self._ended.set())

    def _finish(self, job, result):
        if result is not None:
            code, output, outputs = result
        else:  # the task failed everywhere Dask ran it (KilledWorker, ...)
            try:
                job.future.result(timeout=_RESULT_WAIT)
                error = "no result"
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
            code, output, outputs = _EXIT_MACHINE, (
                f"crossover: error: the job's Dask task failed: {error}\n"), None
        for folder, files in zip(job.folders, outputs or []):
            if "log.txt" in files:
                files["log.txt"] = _unmark_text(files["log.txt"].decode(), job.folders).encode()
            _write_back(folder, files)
        # After the folders: a trial alone logs its process's output in its own log.txt.
        with open(job.log, "a") as f:
            f.write(_unmark_text(output, job.folders))
        return code

    def _with_data(self, slot, job):
        """Submits `job` again with its data, which its worker lacked (no shared file system):
        each data set is sent to every worker once."""
        marked, trials, data = job.inputs
        data = {digest: (path, self._ship(digest)) for digest, (path, _) in data.items()}
        job.inputs = (marked, trials, data)
        self._submit(slot, job)

    def _again(self, slot, job):
        """Submits `job` again after its task failed (its worker lost, and with it the only copy
        of data it needed: Dask cannot compute scattered data again), its data sent anew; False
        after _RETRIES such tries (the failure is then the job's own)."""
        if job.retries >= _RETRIES:
            return False
        job.retries += 1
        try:
            job.future.result(timeout=_RESULT_WAIT)
        except Exception as e:
            with open(job.log, "a") as f:
                f.write(f"crossover: the job's Dask task failed ({type(e).__name__}: {e}); "
                        f"submitted again with its data ({job.retries} of {_RETRIES})\n")
        job.shared = dict(job.shared, processes=True)  # see run_job: a crash ends it alone
        if job.inputs[2] is None:  # its command line alone: the worker reads its files
            self._submit(slot, job)
            return True
        for digest in job.inputs[2]:
            self._sent.pop(digest, None)
        self._with_data(slot, job)
        return True

    @staticmethod
    def _result(job):
        """A done job's result, or None where its task failed, or its result was lost before it
        came back: a worker killed after the job ended but before its result was gathered (Dask
        cancels a task it cannot compute again, one whose scattered data the lost worker held)."""
        if job.future.status != "finished":
            return None
        try:
            return job.future.result(timeout=_RESULT_WAIT)
        except Exception:  # CancelledError, the worker gone mid-transfer, a wait past _RESULT_WAIT
            return None

    def collect(self):
        ended = []
        for slot in sorted(self._running):
            job = self._running[slot]
            if not job.future.done():
                continue
            result = self._result(job)
            if result is not None and result[0] == _NEED_DATA:
                self._with_data(slot, job)
                continue
            if result is not None and result[0] == _NEED_FILES:
                self._blind.add(result[1])
                job.inputs = self._full_inputs(job)
                self._submit(slot, job)
                continue
            if result is None and self._again(slot, job):
                continue
            del self._running[slot]
            code = self._finish(job, result)
            ended.append((slot, code, time.monotonic() - job.started))
        return ended

    def wait(self, seconds):
        """Until a job ends, at most `seconds`, or _WAIT where that is longer: a job's end wakes
        the search at once (its future's callback), and its other business (Ctrl-C, a worker
        joined) can wait that long; waking every 20 ms took a tenth of a core from the workers
        sharing it."""
        if not self._running:
            time.sleep(min(seconds, 0.05))
            return
        if not any(job.future.done() for job in self._running.values()):
            self._ended.wait(max(seconds, _WAIT))
        self._ended.clear()  # an end after this is seen by collect, or by the next look above

    def interrupt(self):
        self._stop.set()

    def close(self):
        for job in self._running.values():
            job.future.cancel()
        self._running.clear()
        self.remove_marks()
