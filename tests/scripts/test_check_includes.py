#!/usr/bin/python3
"""Tests of scripts/check-includes on small trees: a layer table and a few sources each, checked by
running the script and reading what it prints and its exit status.

    /usr/bin/python3 tests/scripts/test_check_includes.py
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-includes")

# A table of the real one's shape: a sub-layer pair closed to all but the registry, a remark in
# parentheses, "nothing of ours" and "everything", and an extra column after "may include".
TABLE = """\
    # architecture

    ## Layers, bottom to top

    | folder | what it holds | may include | libraries |
    |---|---|---|---|
    | `src/core/` | errors | nothing of ours | |
    | `src/io/` | files | core | nlohmann-json |
    | `src/backend/` | the interface | core | |
    | `src/backend/cpu/` | one backend | backend, core (only `src/backend/registry.cpp` may include it) | oneDNN |
    | `src/backend/gpu/` | another | backend, core (only `src/backend/registry.cpp` may include it) | CUDA |
    | `src/model/` | the model | core, backend, io | |
    | `src/cli/` | the command | everything | CLI11 |

    ## A training step

    | not | the | table |
    |---|---|---|
    | `src/elsewhere/` | x | y |
    """

# The sources of a tree that follows TABLE: path -> the files it includes.
CLEAN = {
    "core/error.h": [],
    "core/error.cpp": ["core/error.h"],
    "io/file.h": ["core/error.h"],
    "backend/backend.h": ["core/error.h"],
    "backend/registry.cpp": ["backend/backend.h", "backend/cpu/cpu.h", "backend/gpu/entry.h"],
    "backend/cpu/cpu.h": ["backend/backend.h", "core/error.h"],
    "backend/cpu/linear.cpp": ["backend/cpu/cpu.h"],
    "backend/gpu/entry.h": ["backend/backend.h"],
    "backend/gpu/linear.cu": ["backend/gpu/entry.h", "core/error.h"],
    "backend/gpu/act.cuh": [],
    "model/model.h": ["backend/backend.h", "io/file.h"],
    "cli/main.cpp": ["model/model.h", "io/file.h", "core/error.h", "backend/backend.h"],
}


def make_tree(root, sources, table=TABLE):
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(root, "docs", "architecture.md"), "w") as f:
        f.write(textwrap.dedent(table))
    for path, includes in sources.items():
        full = os.path.join(root, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("// A file of the test tree.\n#pragma once\n#include <vector>\n")
            for include in includes:
                f.write(f'#include "{include}"\n')


def run(sources, table=TABLE):
    """(exit status, printed lines) of check-includes on a tree of `sources`."""
    with tempfile.TemporaryDirectory() as root:
        make_tree(root, sources, table)
        proc = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True,
                              text=True)
        return proc.returncode, proc.stdout.splitlines()


def with_include(path, include):
    sources = {k: list(v) for k, v in CLEAN.items()}
    sources.setdefault(path, []).append(include)
    return sources


class CheckIncludes(unittest.TestCase):
    def test_a_tree_that_follows_the_table_passes(self):
        rc, lines = run(CLEAN)
        self.assertEqual(rc, 0, lines)
        self.assertEqual(len(lines), 1)
        self.assertRegex(lines[0], r"^check-includes: 18 includes in 12 files follow the layer table")

    def test_an_include_the_row_does_not_allow(self):
        # io.h gets its fourth line: the file's three opening lines, then the includes.
        rc, lines = run(with_include("io/file.h", "backend/backend.h"))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ['src/io/file.h:5: includes "backend/backend.h" but io may include '
                                 'only: core'])

    def test_nothing_of_ours_is_named_as_such(self):
        rc, lines = run(with_include("core/error.cpp", "io/file.h"))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, [
            'src/core/error.cpp:5: includes "io/file.h" but core may include only: nothing of ours',
            "src/: include cycle between folders core -> io -> core (src/core/error.cpp:5 includes "
            '"io/file.h"; src/io/file.h:4 includes "core/error.h")'])

    def test_a_sub_layer_may_include_its_parent_and_what_the_parent_may(self):
        # backend/cpu lists core itself; io is allowed to neither backend nor backend/cpu.
        rc, lines = run(with_include("backend/cpu/linear.cpp", "io/file.h"))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ['src/backend/cpu/linear.cpp:5: includes "io/file.h" but '
                                 'backend/cpu may include only: core, backend'])

    def test_only_the_named_file_includes_a_closed_sub_layer(self):
        for path in ("cli/main.cpp", "backend/backend.h", "backend/gpu/linear.cu"):
            with self.subTest(path=path):
                rc, lines = run(with_include(path, "backend/cpu/cpu.h"))
                self.assertEqual(rc, 1)
                self.assertEqual(len(lines), 1, lines)
                self.assertRegex(lines[0], rf'^src/{path}:\d+: includes "backend/cpu/cpu.h" but only '
                                           r"src/backend/registry.cpp may include src/backend/cpu/ ")

    def test_a_folder_missing_from_the_table_fails(self):
        sources = dict(CLEAN, **{"report/html.cpp": ["core/error.h"]})
        rc, lines = run(sources)
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["src/report/: holds sources but has no row in the layer table of "
                                 "docs/architecture.md"])

    def test_a_source_directly_in_src_fails(self):
        rc, lines = run(dict(CLEAN, **{"version.h": []}))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["src/: holds sources but has no row in the layer table of "
                                 "docs/architecture.md"])

    def test_a_row_without_a_folder_fails(self):
        sources = {k: v for k, v in CLEAN.items() if not k.startswith("io/")}
        sources["model/model.h"] = ["backend/backend.h"]
        sources["cli/main.cpp"] = ["model/model.h"]
        rc, lines = run(sources)
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["docs/architecture.md:8: src/io/ has a row but no folder"])

    def test_an_include_cycle_between_folders_is_named_with_its_includes(self):
        rc, lines = run(with_include("backend/backend.h", "model/model.h"))
        self.assertEqual(rc, 1)
        self.assertEqual(lines, [
            'src/backend/backend.h:5: includes "model/model.h" but backend may include only: core',
            "src/: include cycle between folders backend -> model -> backend "
            '(src/backend/backend.h:5 includes "model/model.h"; '
            'src/model/model.h:4 includes "backend/backend.h")'])

    def test_a_cycle_through_a_sub_layer_counts_as_its_layer(self):
        # model -> backend/gpu (closed, and not allowed) and backend/gpu -> ... -> model: backend
        # and model form the cycle, not backend/gpu on its own.
        sources = with_include("backend/gpu/linear.cu", "model/model.h")
        rc, lines = run(sources)
        self.assertEqual(rc, 1)
        self.assertIn("src/: include cycle between folders backend -> model -> backend "
                      '(src/backend/gpu/linear.cu:6 includes "model/model.h"; '
                      'src/model/model.h:4 includes "backend/backend.h")', lines)

    def test_a_table_that_allows_a_cycle_fails(self):
        table = TABLE.replace("| `src/io/` | files | core |", "| `src/io/` | files | core, model |")
        rc, lines = run(CLEAN, table)
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["docs/architecture.md: the layer table allows a cycle: "
                                 "io -> model -> io"])

    def test_an_unknown_folder_in_the_table_fails(self):
        table = TABLE.replace("| core, backend, io |", "| core, backnd, io |")
        rc, lines = run(CLEAN, table)
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["docs/architecture.md:12: 'backnd' in the may-include cell of "
                                 "src/model/ is not a folder of the table"])

    def test_a_quoted_include_that_is_not_ours_fails(self):
        rc, lines = run(with_include("model/model.h", "dnnl.hpp"))
        self.assertEqual(rc, 1)
        self.assertEqual(len(lines), 1)
        self.assertRegex(lines[0], r'^src/model/model.h:6: includes "dnnl.hpp", which is not a file '
                                   r"under src/")

    def test_a_page_without_the_table_fails(self):
        rc, lines = run(CLEAN, "# architecture\n\nNo table here.\n")
        self.assertEqual(rc, 1)
        self.assertEqual(lines, ["docs/architecture.md: no heading 'Layers, bottom to top'"])


if __name__ == "__main__":
    unittest.main()
