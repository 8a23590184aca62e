#!/usr/bin/python3
"""scripts/release-rest runs in the Release build the tests the sanitized run did not pass: these
tests fail when a test skipped or failed there, or absent from that build, would run nowhere, or
when a suite whose bits depend on the kernels' compilation stops running in Release.

    /usr/bin/python3 tests/scripts/test_release_rest.py
"""
import importlib.machinery
import importlib.util
import os
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
loader = importlib.machinery.SourceFileLoader("release_rest",
                                              os.path.join(ROOT, "scripts", "release-rest"))
spec = importlib.util.spec_from_loader("release_rest", loader)
release_rest = importlib.util.module_from_spec(spec)
loader.exec_module(release_rest)

# A sanitized run as ctest writes it: a pass, a skip (no MPI there), a failure, a parameterised name.
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="5">
  <testcase name="Cli.TrainsAModel" classname="Cli.TrainsAModel" time="1.0" status="run"/>
  <testcase name="DataParallel.TwoRanks" classname="x" time="0.2" status="notrun">
    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/></testcase>
  <testcase name="Spec.Broken" classname="x" time="0.1" status="fail">
    <failure message="Failed"/></testcase>
  <testcase name="Ops/OpTest.GradientsMatch/linear  # GetParam() = linear" classname="x"
            time="2.0" status="run"/>
  <testcase name="Tune.AGrid/2  # GetParam() = 2" classname="x" time="2.0" status="run"/>
</testsuite>
"""


class ReleaseRest(unittest.TestCase):
    def passed(self):
        with tempfile.NamedTemporaryFile("w", suffix=".xml") as f:
            f.write(JUNIT)
            f.flush()
            return release_rest.passed_sanitized(f.name)

    def test_only_passes_count(self):
        self.assertEqual(self.passed(), {"Cli.TrainsAModel", "Tune.AGrid/2  # GetParam() = 2",
                                          "Ops/OpTest.GradientsMatch/linear  # GetParam() = linear"})

    def test_the_rest_runs_in_release(self):
        tests = [(1, "Cli.TrainsAModel"), (2, "DataParallel.TwoRanks"), (3, "Spec.Broken"),
                 (4, "Ops/OpTest.GradientsMatch/linear  # GetParam() = linear"),
                 (5, "golden.torch_sequential"), (6, "Tune.AGrid/2  # GetParam() = 2"),
                 (7, "Training.LossFalls")]
        # skipped there (2), failed there (3), a numerics suite (4, 7), absent there (5).
        self.assertEqual(release_rest.to_run(tests, self.passed()), [2, 3, 4, 5, 7])

    def test_an_unreadable_file_is_named(self):
        with self.assertRaises(SystemExit) as e:
            release_rest.passed_sanitized("/nonexistent/sanitized.xml")
        self.assertIn("/nonexistent/sanitized.xml", str(e.exception))


if __name__ == "__main__":
    unittest.main()
