#!/usr/bin/python3
"""Tests of scripts/check-functions on small trees: a few sources, checked by running the script
and reading what it prints and its exit status.

    /usr/bin/python3 tests/scripts/test_check_functions.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-functions")


def body(lines, text="  x += 1;"):
    return "\n".join([text] * lines)


class CheckFunctions(unittest.TestCase):
    def check(self, files, limit=5, kept=None):
        with tempfile.TemporaryDirectory() as root:
            if kept is not None:
                os.makedirs(os.path.join(root, "scripts"))
                with open(os.path.join(root, "scripts", "long-functions.txt"), "w") as f:
                    f.write(kept)
            for name, text in files.items():
                path = os.path.join(root, "src", name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            p = subprocess.run([sys.executable, SCRIPT, "--root", root, "--limit", str(limit)],
                               capture_output=True, text=True)
            return p.returncode, p.stdout

    def test_a_function_at_the_limit_passes_and_one_line_more_fails(self):
        at = "namespace xo {\nvoid f() {\n" + body(3) + "\n}\n}\n"  # 5 lines
        code, out = self.check({"a/f.cpp": at})
        self.assertEqual(code, 0, out)
        over = "namespace xo {\nvoid f(int a,\n       int b) {\n" + body(3) + "\n}\n}\n"
        code, out = self.check({"a/f.cpp": over})
        self.assertEqual(code, 1)
        self.assertIn("src/a/f.cpp:2: f is 6 lines (at most 5)", out)

    def test_lambdas_and_blocks_count_toward_their_function(self):
        text = ("int g() {\n  auto h = [] {\n    return 1;\n  };\n  if (h()) {\n    return 2;\n"
                "  }\n  return 0;\n}\n")
        code, out = self.check({"g.cpp": text})
        self.assertEqual(code, 1)
        self.assertIn("g is 9 lines", out)

    def test_methods_in_classes_and_qualified_definitions_are_named(self):
        text = ("class A {\n public:\n  int m() const {\n" + body(6) + "\n  }\n};\n"
                "int A::n() {\n" + body(6) + "\n}\n")
        code, out = self.check({"a.h": text})
        self.assertIn("m is 8 lines", out)
        self.assertIn("A::n is 8 lines", out)

    def test_cuda_kernels_are_left_out_but_their_host_code_is_not(self):
        text = ("__global__ void __launch_bounds__(256) k(float* x) {\n" + body(9) + "\n}\n"
                "void host() {\n" + body(9) + "\n}\n")
        code, out = self.check({"backend/cuda/k.cu": text})
        self.assertNotIn(" k ", out)
        self.assertIn("host is 11 lines", out)

    def test_braces_in_comments_strings_and_literals_do_not_count(self):
        text = ("// a { in a comment\nconst char* s = \"{\";\nconst char c = '{';\n"
                "const char* r = R\"x({ \"})x\";\nint n = 1'000;\n/* } */\n"
                "void f() {\n  x(\"}\");\n}\n")
        code, out = self.check({"c.cpp": text})
        self.assertEqual(code, 0, out)

    def test_initialisers_and_namespaces_are_not_functions(self):
        text = ("namespace a::b {\nconstexpr int t[] = {\n" + body(9, "  1,") + "\n};\n"
                "struct S {\n  int v[3] = {1, 2, 3};\n};\n}\n")
        code, out = self.check({"d.cpp": text})
        self.assertEqual(code, 0, out)
        self.assertIn("0 functions", out)

    def test_a_function_kept_long_needs_its_line_and_a_stale_line_fails(self):
        long = {"k.cpp": "void f() {\n" + body(9) + "\n}\nvoid g() {\n}\n"}
        code, out = self.check(long, kept="# why each stays whole\nsrc/k.cpp f: one table\n")
        self.assertEqual(code, 0, out)
        self.assertIn("1 kept long", out)
        code, out = self.check(long, kept="src/k.cpp f: one table\nsrc/k.cpp g: gone\n")
        self.assertEqual(code, 1)
        self.assertIn("src/k.cpp g is listed as kept long", out)
        code, out = self.check(long, kept="src/k.cpp f\n")
        self.assertNotEqual(code, 0)


if __name__ == "__main__":
    unittest.main()
