#!/usr/bin/python3
"""The GPU check's packages are enough: `scripts/gpu-check --only deps,configure` configures
crossover (CUDA included) from .gpu-deps/ alone, with this system's copies of the same packages
hidden, as on a bare GPU machine. Where scripts/debian-packages and the build drift apart again
(a find_package whose package is not fetched), the configure here fails.

How: in a private mount namespace (`unshare -m`, root only), every file of the installed -dev
and header packages that scripts/debian-packages lists (for the GPU machine or only for setup: a
build that needs one not fetched must fail here) disappears (dpkg -L): each folder that holds one is
replaced, for this process and its children only, by a folder of links to everything else it
holds. A control configure without .gpu-deps must then fail; the GPU check's must succeed. It
runs on a copy of the repository's tracked files, so its build, logs and report stay out of the
checkout.

    /usr/bin/python3 tests/scripts/test_gpu_deps_configure.py

Exit codes: 0 passed, 1 failed, 77 cannot run here (not root, no unshare or nvcc, the packages
cannot be fetched): ctest reports a skip, with the reason printed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SKIP = 77
CUDA_BIN = "/usr/local/cuda/bin"


def skip(why):
    print(f"test_gpu_deps_configure: skipped: {why}")
    sys.exit(SKIP)


def fail(why):
    print(f"test_gpu_deps_configure: FAILED: {why}")
    sys.exit(1)


def listed_packages():
    """Every package scripts/debian-packages lists (for setup, the GPU machine or both)."""
    out = []
    with open(os.path.join(ROOT, "scripts", "debian-packages"), encoding="utf-8") as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2:
                out.append(fields[0])
    return out


def installed(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True,
                       text=True, check=False)
    return r.returncode == 0 and "install ok installed" in r.stdout


# Folders whose files stay: hiding one replaces its folder by links, and CMake, run from
# /usr/bin/cmake through such a link, no longer finds its own modules beside itself (python3-dev's
# python3-config is there). What the build finds of a package is its headers, libraries and CMake
# files, never a program in these.
KEPT_FOLDERS = ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")


def hidden_files(packages):
    """Every file (not folder) the build could find of these packages."""
    files = []
    for p in packages:
        listing = subprocess.run(["dpkg", "-L", p], capture_output=True, text=True, check=True)
        for path in listing.stdout.splitlines():
            if path.startswith(KEPT_FOLDERS):
                continue
            if path.startswith("/") and (os.path.islink(path) or os.path.isfile(path)):
                files.append(path)
    return files


def hide(files, scratch):
    """In this (private) mount namespace: each folder holding one of `files` becomes a folder of
    links to its other entries, deepest folders first (the links of a parent then lead to the
    child's replacement, which --rbind carries)."""
    subprocess.run(["mount", "-t", "tmpfs", "xo-hide", scratch], check=True)
    by_dir = {}
    for f in files:
        by_dir.setdefault(os.path.dirname(f), set()).add(os.path.basename(f))
    for n, d in enumerate(sorted(by_dir, key=lambda p: -p.count("/"))):
        original = os.path.join(scratch, "original", str(n))
        shadow = os.path.join(scratch, "shadow", str(n))
        os.makedirs(original)
        os.makedirs(shadow)
        subprocess.run(["mount", "--rbind", d, original], check=True)
        for entry in os.listdir(original):
            if entry not in by_dir[d]:
                os.symlink(os.path.join(original, entry), os.path.join(shadow, entry))
        subprocess.run(["mount", "--bind", shadow, d], check=True)


def inside(files_list, scratch, copy):
    """Runs in the namespace: hide, check the hiding, then the control and the GPU check."""
    with open(files_list, encoding="utf-8") as f:
        files = [line.rstrip("\n") for line in f if line.strip()]
    hide(files, scratch)
    still = [f for f in files if os.path.lexists(f)]
    if still:
        fail(f"{len(still)} files not hidden, e.g. {still[:3]}")
    if not os.path.exists("/usr/include/stdio.h"):
        fail("the hiding took the C library's headers too")
    env = dict(os.environ)
    env["PATH"] = f"{CUDA_BIN}:{env.get('PATH', '')}"
    env["GPU_CHECK_COMMIT"] = "test"
    # Control: the system alone no longer configures (else the test below proves nothing).
    control = subprocess.run(["cmake", "-S", copy, "-B", os.path.join(scratch, "control"), "-G",
                              "Ninja", "-DCROSSOVER_CUDA=OFF"], capture_output=True, text=True,
                             env=env, check=False)
    if control.returncode == 0:
        fail("CMake configured with the system's packages hidden and no .gpu-deps: the hiding "
             "missed what the build uses")
    print("control: without .gpu-deps, configure fails as it should:",
          next((line.strip() for line in (control.stdout + control.stderr).splitlines()
                if "Could NOT find" in line or "Could not find" in line), "(exit status "
               f"{control.returncode})"))
    env["GPU_CHECK_USE_DEBS"] = "1"
    check = subprocess.run([os.path.join(copy, "scripts", "gpu-check"), "--only",
                            "deps,configure", "--out", os.path.join(scratch, "out")],
                           capture_output=True, text=True, env=env, check=False)
    log = os.path.join(copy, "bench", "out", "gpu-check-work", "logs", "configure.log")
    if check.returncode != 0:
        tail = open(log, encoding="utf-8").read()[-3000:] if os.path.exists(log) else ""
        fail(f"scripts/gpu-check --only deps,configure failed ({check.returncode}):\n"
             f"{check.stdout[-2000:]}{check.stderr[-2000:]}\n--- configure.log ---\n{tail}")
    summary = [line for line in open(log, encoding="utf-8") if "crossover " in line and
               "cuda=ON" in line]
    if not summary:
        fail("the configure log has no summary line with cuda=ON")
    print("gpu-check --only deps,configure from .gpu-deps alone:", summary[-1].strip())


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--inside":
        inside(*sys.argv[2:])
        return
    if os.geteuid() != 0:
        skip("needs root (a private mount namespace: unshare -m)")
    if not shutil.which("unshare"):
        skip("no unshare (util-linux)")
    if not (shutil.which("nvcc") or os.access(os.path.join(CUDA_BIN, "nvcc"), os.X_OK)):
        skip("no nvcc: the GPU check configures the CUDA backend")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        skip(f"unshare -m is not permitted here: {probe.stderr.strip()}")
    deps = os.path.join(ROOT, ".gpu-deps")
    if not (os.path.isdir(deps) and any(n.endswith(".deb") for n in os.listdir(deps))):
        fetch = subprocess.run([os.path.join(ROOT, "scripts", "gpu-check"), "--fetch-deps"],
                               capture_output=True, text=True, check=False)
        if fetch.returncode != 0:
            skip("scripts/gpu-check --fetch-deps could not download the packages: "
                 f"{(fetch.stdout + fetch.stderr).strip()[-500:]}")
    dev = [p for p in listed_packages() if (p.endswith("-dev") or p.endswith("-headers"))]
    hidden = [p for p in dev if installed(p)]
    if not hidden:
        skip("none of crossover's -dev packages is installed here: nothing to hide")
    print(f"hiding {len(hidden)} installed packages: {' '.join(hidden)}")
    with tempfile.TemporaryDirectory(prefix="xo-gpu-deps-") as tmp:
        copy = os.path.join(tmp, "repo")
        listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True,
                                check=False)
        if listed.returncode == 0 and listed.stdout:
            for rel in listed.stdout.decode().split("\0"):
                if rel and os.path.lexists(os.path.join(ROOT, rel)):
                    os.makedirs(os.path.dirname(os.path.join(copy, rel)), exist_ok=True)
                    shutil.copy2(os.path.join(ROOT, rel), os.path.join(copy, rel),
                                 follow_symlinks=False)
        else:  # an export without .git: everything but what builds and checks write
            shutil.copytree(ROOT, copy, symlinks=True, ignore=shutil.ignore_patterns(
                "build*", ".gpu-deps", "out", "crossover-*", ".git"))
        os.makedirs(os.path.join(copy, ".gpu-deps"))
        for n in os.listdir(deps):
            if n.endswith(".deb"):
                os.symlink(os.path.join(deps, n), os.path.join(copy, ".gpu-deps", n))
        files_list = os.path.join(tmp, "hidden.txt")
        with open(files_list, "w", encoding="utf-8") as f:
            f.write("".join(p + "\n" for p in hidden_files(hidden)))
        scratch = os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                            os.path.abspath(__file__), "--inside", files_list, scratch, copy],
                           check=False)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
