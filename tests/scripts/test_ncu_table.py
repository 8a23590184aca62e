#!/usr/bin/python3
"""Tests of scripts/ncu_table.py, the kernel table of scripts/gpu-profile, on CSV text shaped as
Nsight Compute writes it (its log lines first, a units row under the header, thousands
separators in durations).

    /usr/bin/python3 tests/scripts/test_ncu_table.py
"""
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import ncu_table  # noqa: E402

CSV = """==PROF== Connected to process 1234
==PROF== Profiling "linear_forward" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Kernel Name","gpu__time_duration.sum"
"","","","nsecond"
"0","1234","linear_forward","2,048"
"1","1234","linear_backward","3,000"
"2","1234","linear_forward","2,000"
"3","1234","adam_update","1,500"
"4","1234","linear_backward","n/a"
"""


class NcuTable(unittest.TestCase):
    def test_rows_skip_the_log_the_units_and_untimed_kernels(self):
        rows = ncu_table.kernel_times(CSV)
        self.assertEqual(rows, [("linear_forward", 2048.0), ("linear_backward", 3000.0),
                                ("linear_forward", 2000.0), ("adam_update", 1500.0)])

    def test_table_ranks_by_total_time_with_counts_and_means(self):
        lines = ncu_table.table("disc-2", ncu_table.kernel_times(CSV)).splitlines()
        self.assertEqual(lines[0], "== disc-2: 4 kernels profiled")
        parsed = [line.split() for line in lines[1:]]
        self.assertEqual([p[-1] for p in parsed], ["linear_forward", "linear_backward", "adam_update"])
        count, total, mean = int(parsed[0][0]), float(parsed[0][1]), float(parsed[0][3])
        self.assertEqual((count, total, mean), (2, 4.0, 2.02))  # 4048 ns in all, 2024 ns each

    def test_top_limits_the_rows_and_no_rows_says_so(self):
        self.assertEqual(len(ncu_table.table("m", ncu_table.kernel_times(CSV), top=1).splitlines()), 2)
        self.assertEqual(ncu_table.table("m", ncu_table.kernel_times("ncu failed")), "m: no ncu rows")

    def test_long_names_are_cut(self):
        name = "k" * 300
        rows = ncu_table.kernel_times(f'"ID","Kernel Name","{ncu_table.TIME}"\n"0","{name}","5"\n')
        self.assertEqual(rows, [("k" * ncu_table.NAME_WIDTH, 5.0)])


if __name__ == "__main__":
    unittest.main()
