#!/usr/bin/python3
"""scripts/debian-packages is the one list of Debian packages that scripts/setup installs and
scripts/gpu-check fetches for a GPU machine. These tests fail when a find_package of the build
has no package behind it, or when its package is not fetched for the GPU machine (the drift that
once broke the GPU check: ONNX and protobuf required by CMakeLists.txt, missing from its list).

    /usr/bin/python3 tests/scripts/test_debian_packages.py
"""
import os
import re
import subprocess
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Every find_package of the build: the Debian package that provides it, or None where the
# toolchain does (the CUDA toolkit, the compiler's OpenMP, CMake's Git) or the package is optional
# (MPI: the build leaves it out when absent, and a GPU machine need not have it).
PROVIDERS = {
    "CUDAToolkit": None,
    "OpenMP": None,
    "Git": None,
    "MPI": None,
    "Python3": None,  # python3-dev, for the module: optional, as pybind11
    "pybind11": None,  # pybind11-dev: the Python module is built where it is found
    "dnnl": "libdnnl-dev",
    "fmt": "libfmt-dev",
    "nlohmann_json": "nlohmann-json3-dev",
    "CLI11": "libcli11-dev",
    "tomlplusplus": "libtomlplusplus-dev",
    "Protobuf": "libprotobuf-dev",
    "ONNX": "libonnx-dev",
    "ZLIB": "zlib1g-dev",
    "GTest": "libgtest-dev",
    "benchmark": "libbenchmark-dev",
}


def packages(tag):
    out = []
    with open(os.path.join(ROOT, "scripts", "debian-packages")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line and tag in line[1:]:
                out.append(line[0])
    return out


def find_packages():
    names = set()
    for folder, _, files in os.walk(ROOT):
        rel = os.path.relpath(folder, ROOT)
        if rel.startswith(("build", ".gpu-deps", ".git", "bench/out")):
            continue
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                with open(os.path.join(folder, name)) as f:
                    names.update(re.findall(r"find_package\(\s*([A-Za-z0-9_]+)", f.read()))
    return names


class DebianPackages(unittest.TestCase):
    def test_every_find_package_has_a_known_provider(self):
        unknown = sorted(find_packages() - set(PROVIDERS))
        self.assertEqual(unknown, [], "add each to PROVIDERS and its package to scripts/debian-packages")

    def test_the_gpu_machine_gets_every_package_the_build_finds(self):
        gpu, setup = set(packages("gpu")), set(packages("setup"))
        for name in sorted(find_packages()):
            package = PROVIDERS.get(name)
            if package:
                self.assertIn(package, gpu, f"find_package({name}): {package} not marked gpu")
                self.assertIn(package, setup, f"find_package({name}): {package} not marked setup")

    def test_both_scripts_read_the_list(self):
        for script, tag in (("setup", "setup"), ("gpu-check", "gpu")):
            with open(os.path.join(ROOT, "scripts", script)) as f:
                text = f.read()
            self.assertIn("scripts/debian-packages", text, script)
            self.assertIn(f'$i == "{tag}"', text, script)

    def test_setup_reads_the_setup_packages(self):
        # The awk program scripts/setup runs, run here: the same packages as this reader.
        text = open(os.path.join(ROOT, "scripts", "setup")).read()
        program = re.search(r"awk '([^']*)' scripts/debian-packages", text).group(1)
        got = subprocess.run(["awk", program, "scripts/debian-packages"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
        self.assertEqual(got, packages("setup"))
        self.assertIn("libopenblas0-pthread", got)  # the peer's BLAS (docs/benchmarks.md)


if __name__ == "__main__":
    unittest.main()
