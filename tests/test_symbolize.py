#!/usr/bin/env python3
"""Symbolization names the function that holds an address, or none.

Without debug information addr2line names the nearest symbol before an address; in a stripped
library (Debian's mpi4py and PETSc modules) that is often another function: a static function's
code gets the exported one before it. attrcheck-report keeps a name only when the symbol's extent
holds the address. Builds a small stripped library with cc to check it. Frames a rank already
symbolized in-process are left alone.

usage: test_symbolize.py BUILD_DIR"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import json

BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.abspath("build")
TOOL = os.path.join(BUILD, "bin", "attrcheck-report")

SOURCE = r"""
int exported_first(int x) { return x * 3 + 1; }
static int __attribute__((noinline)) hidden_second(int x) { volatile int y = x; return y * 7 + exported_first(y); }
int exported_third(int x) { return hidden_second(x) + 2; }
"""


class SymbolizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="attrcheck-sym-")
        src = os.path.join(cls.dir, "lib.c")
        with open(src, "w") as f:
            f.write(SOURCE)
        cls.lib = os.path.join(cls.dir, "libsym.so")
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", cls.lib, src], check=True)
        subprocess.run(["strip", "--strip-all", cls.lib], check=True)
        symbols = {}
        for line in subprocess.run(["nm", "-D", "-S", "--defined-only", cls.lib], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            start, size, _, name = line.split()
            symbols[name] = (int(start, 16), int(start, 16) + int(size, 16))
        cls.first, cls.third = symbols["exported_first"], symbols["exported_third"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def site(self, offset, entry=True):
        return {"module": self.lib, "offset": hex(offset), "address": hex(0x7f0000000000 + offset), "entry": entry}

    def symbolize(self, *sites):
        """The functions attrcheck-report names for the sites, in the order given."""
        return [f["site"].get("function", "") for f in self.in_order(self.merged(sites))]

    @staticmethod
    def in_order(merged):
        """The merged findings in the order of their sites (the merge orders them by site)."""
        return sorted(merged["findings"], key=lambda f: int(f["message"].split()[-1]))

    def merged(self, sites, stack=None):
        """A rank report with a finding at each site (the first with `stack`), merged by
        attrcheck-report with a suppressions file (which symbolizes the report; this one
        suppresses nothing)."""
        report = {"schema": "attrcheck.rank-report", "version": "1.2", "run": {"rank": 0, "size": 1},
                  "findings": [{"rule": "attr.leak", "severity": "warning", "message": f"site {i}", "site": s}
                               for i, s in enumerate(sites)], "stacks": []}
        if stack:
            report["stacks"] = [{"id": 1, "frames": stack}]
            report["findings"][0]["stack"] = 1
        path, supp, out = (os.path.join(self.dir, n) for n in ("rank-0.json", "none.supp", "merged.json"))
        with open(path, "w") as f:
            json.dump(report, f)
        with open(supp, "w") as f:
            f.write("keyval.invalid fun:nothing-is-called-this\n")
        subprocess.run([TOOL, "--no-default-suppressions", "--suppressions", supp, "merge", path, "-o", out,
                        "--force"], check=True, capture_output=True)
        with open(out) as f:
            return json.load(f)

    def test_a_static_function_after_an_exported_one_gets_no_name(self):
        hidden = self.first[1] + 2  # inside hidden_second, which follows exported_first
        self.assertLess(hidden, self.third[0])
        self.assertEqual(self.symbolize(self.site(hidden)), [""])

    def test_an_exported_function_is_named(self):
        self.assertEqual(self.symbolize(self.site(self.third[0]), self.site(self.first[0])),
                         ["exported_third", "exported_first"])

    def test_a_return_address_inside_a_function_names_it(self):
        self.assertEqual(self.symbolize(self.site(self.third[0] + 8, entry=False)), ["exported_third"])

    def test_frames_the_rank_symbolized_in_process_are_left_alone(self):
        # Marked "symbolized" by the rank at MPI_Finalize (src/report/symbolize.hpp): kept as they
        # are, even where nothing was found; a frame with a function is not looked up again.
        named = dict(self.site(self.third[0]), function="named_by_the_rank", symbolized=True)
        nothing_found = dict(self.site(self.first[0]), symbolized=True)
        has_function = dict(self.site(self.first[0]), function="given")
        plain = self.site(self.first[0])
        frame = dict(self.site(self.third[0] + 8, entry=False), symbolized=True)
        merged = self.merged([named, nothing_found, has_function, plain], stack=[frame])
        self.assertEqual([f["site"].get("function", "") for f in self.in_order(merged)],
                         ["named_by_the_rank", "", "given", "exported_first"])
        self.assertNotIn("function", merged["stacks"][0]["frames"][0])

if __name__ == "__main__":
    unittest.main(verbosity=2)
