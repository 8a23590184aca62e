#!/usr/bin/python3
"""Tests of scripts/new-user, the walk through the README as a new user does it: first how it reads
a README (the files it writes, the commands it runs and skips, the links it checks, what it does
with a command that fails), against a small README and a stand-in binary; then the walk itself,
the real README against the built crossover. Without a built binary the walk is skipped and the
test exits 77 (ctest: skipped).

    /usr/bin/python3 tests/scripts/test_new_user.py [--crossover build/crossover]
"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "new-user")
SKIP = 77

loader = importlib.machinery.SourceFileLoader("new_user", SCRIPT)
spec = importlib.util.spec_from_loader("new_user", loader)
new_user = importlib.util.module_from_spec(spec)
loader.exec_module(new_user)

BINARY = os.environ.get("CROSSOVER_BIN", os.path.join(ROOT, "build", "crossover"))
if "--crossover" in sys.argv:
    i = sys.argv.index("--crossover")
    BINARY = sys.argv[i + 1]
    del sys.argv[i:i + 2]
BINARY = os.path.abspath(BINARY)

README = textwrap.dedent("""\
    # A project

    ```sh
    scripts/setup && build/crossover run        # set up and run the default job
    scripts/test                                # the tests
    ```

    Save this as `data.csv`:

    <!-- file: data.csv -->
    ```text
    x,label
    1,0
    ```

    ```toml
    [not] written = "no file line before it"
    ```

    ```sh
    build/crossover train my.toml --epochs 2    # a comment with a 'quote
    build/crossover run
    build/crossover advise "a b.toml" \\
        --trials 4
    mpirun -np 2 build/crossover train disc-4
    build/crossover devices --profile           # new-user: skip (needs a quiet machine)
    ```

    See [the guide](docs/guide/README.md), [a heading](#a-project) and [the web](https://example.com).
    """)


def fake_binary(folder, body):
    path = os.path.join(folder, "fake-crossover")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


class ReadsTheReadme(unittest.TestCase):
    def test_plan(self):
        steps = new_user.plan(README)
        self.assertEqual([s[0] for s in steps],
                         ["skip", "skip", "write", "run", "skip", "run", "skip", "skip"])
        self.assertEqual(steps[2], ("write", "data.csv", "x,label\n1,0\n"))
        self.assertEqual(steps[3][2], ["train", "my.toml", "--epochs", "2"])
        self.assertIn("default job", steps[4][2])
        self.assertEqual(steps[5][2], ["advise", "a b.toml", "--trials", "4"])
        self.assertIn("not a build/crossover command", steps[6][2])
        self.assertEqual(steps[7][2], "needs a quiet machine")

    def test_slugs(self):
        self.assertEqual(new_user.slug("`train --json` (`crossover.train/2`)"),
                         "train---json-crossovertrain2")
        self.assertEqual(new_user.slug("The fused Linear's last passes (2026-11-29, second)"),
                         "the-fused-linears-last-passes-2026-11-29-second")
        self.assertEqual(new_user.slug("How many machines: `sweep --vary ranks`"),
                         "how-many-machines-sweep---vary-ranks")

    def test_advise_warnings(self):
        self.assertEqual(new_user.advise_warnings(["advise", "x"], "short\n" * 40), [])
        self.assertEqual(len(new_user.advise_warnings(["advise", "x"], "short\n" * 41)), 1)
        self.assertIn("wider than 120", new_user.advise_warnings(["advise"], "x" * 121)[0])
        self.assertEqual(new_user.advise_warnings(["train", "x"], "short\n" * 99), [])


class Walks(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        os.makedirs(os.path.join(self.root, "docs", "guide"))
        with open(os.path.join(self.root, "docs", "guide", "README.md"), "w") as f:
            f.write("# Guide\n\nBack to [the README](../../README.md#a-project).\n")
        self.readme = os.path.join(self.root, "README.md")
        with open(self.readme, "w") as f:
            f.write(README)

    def tearDown(self):
        self.dir.cleanup()

    def walk(self, binary_body, readme=None):
        if readme is not None:
            with open(self.readme, "w") as f:
                f.write(readme)
        binary = fake_binary(self.root, binary_body)
        return subprocess.run([sys.executable, SCRIPT, "--crossover", binary, "--readme",
                               self.readme, "--timeout", "5"], capture_output=True, text=True)

    def test_runs_in_order_with_the_files_written(self):
        # The stand-in fails unless the file the README wrote is beside it.
        p = self.walk('test -f data.csv || { echo "no data.csv"; exit 9; }; echo "ran $*"')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok   `build/crossover train my.toml --epochs 2`", p.stdout)
        self.assertIn("skipped `build/crossover run`", p.stdout)
        self.assertIn("skipped `mpirun -np 2 build/crossover train disc-4`", p.stdout)

    def test_a_failing_command_fails_the_walk_with_its_output(self):
        p = self.walk('if [ "$1" = advise ]; then echo "no such spec: $2"; exit 2; fi')
        self.assertEqual(p.returncode, 1)
        self.assertIn("FAIL `build/crossover advise \"a b.toml\"", p.stdout)
        self.assertIn("exited 2", p.stdout)
        self.assertIn("no such spec: a b.toml", p.stdout)

    def test_a_command_past_its_timeout_fails(self):
        p = self.walk('echo started; sleep 30')
        self.assertEqual(p.returncode, 1)
        self.assertIn("ran past 5.0 s", p.stdout)

    def test_a_long_advise_is_a_warning_only(self):
        p = self.walk('if [ "$1" = advise ]; then seq 1 50; fi')
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("WARNING `build/crossover advise", p.stdout)
        self.assertIn("printed 50 lines", p.stdout)

    def test_broken_links_fail(self):
        p = self.walk("true", README + "\n[gone](docs/guide/gone.md) and [no\nanchor](#nowhere)\n"
                              "`[in code](nowhere.md)`\n```text\n[in a block](nowhere.md)\n```\n")
        self.assertEqual(p.returncode, 1)
        self.assertIn("README.md:31: link docs/guide/gone.md: no such file", p.stdout)
        self.assertIn("README.md:31: link #nowhere: no heading with the anchor #nowhere", p.stdout)
        self.assertNotIn("nowhere.md", p.stdout)
        self.assertIn("2 failed", p.stdout)

    def test_links_of_the_guide_are_checked_too(self):
        with open(os.path.join(self.root, "docs", "guide", "README.md"), "a") as f:
            f.write("\n[a page](train.md)\n")
        p = self.walk("true")
        self.assertEqual(p.returncode, 1)
        self.assertIn("docs/guide/README.md:5: link train.md: no such file", p.stdout)

    def test_no_binary_is_a_skip(self):
        p = subprocess.run([sys.executable, SCRIPT, "--crossover",
                            os.path.join(self.root, "absent"), "--readme", self.readme],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, SKIP)
        self.assertIn("skipped, no crossover binary", p.stdout)


class TheReadme(unittest.TestCase):
    @unittest.skipUnless(os.access(BINARY, os.X_OK), f"no crossover binary at {BINARY}")
    def test_walks(self):
        p = subprocess.run([sys.executable, SCRIPT, "--crossover", BINARY],
                           capture_output=True, text=True)
        print(p.stdout + p.stderr)
        self.assertEqual(p.returncode, 0, "scripts/new-user failed (its output is above)")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        print(f"test_new_user: the README's walk skipped: no crossover binary at {BINARY}")
        sys.exit(SKIP)
    sys.exit(0)
