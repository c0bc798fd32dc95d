#!/usr/bin/env python3
"""`attrcheck --probe-library` against the MPI library the build is for: the probes (src/probes/)
run natively and every answer must be what the profile of the library's release series
(src/runtime/profile/mpi_profile.def) says, so the profile stays true to the library it describes; the
release chosen is the one the tests expect (tests/mpi_config.py). Compared with another library's
profile, the same answers must show as differences (exit 1), and an unknown profile is an error
(exit 2).

usage: test_probe_library.py BUILD_DIR
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_config  # noqa: E402

BUILD = sys.argv.pop(1) if len(sys.argv) > 1 else "build"
CFG = mpi_config.load(BUILD)
ATTRCHECK = os.path.join(BUILD, "bin", "attrcheck")


def probe(*args):
    return subprocess.run([ATTRCHECK, "--probe-library", *args], env=CFG.env(), capture_output=True, text=True,
                          timeout=600)


class ProbeLibrary(unittest.TestCase):
    def test_library_answers_as_its_profile_says(self):
        r = probe()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"profile: {CFG.release} ", r.stdout)
        self.assertIn("the library answers as its profile", r.stdout)
        asked = {m.group(1) for m in re.finditer(r"^[ !] (error-class|divergence|behaviour) ", r.stdout, re.M)}
        self.assertEqual(asked, {"error-class", "divergence", "behaviour"}, r.stdout)
        # Every divergence and behaviour the profile has was answered yes by the library.
        for ident in list(CFG.divergences) + [k for k, v in CFG.profile.items() if v is True and "-" in k]:
            self.assertRegex(r.stdout, rf"(?m)^  (divergence|behaviour) {re.escape(ident)} +yes +yes$")

    def test_another_librarys_profile_differs(self):
        other = next(p["id"] for p in mpi_config.profiles().values()
                     if p["library"] != CFG.library and p["id"] != p["library"])
        r = probe("--profile", other)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"profile: {other} ", r.stdout)
        self.assertRegex(r.stdout, r"(?m)^! error-class ")
        self.assertIn(f"differ from the profile {other}", r.stdout)

    def test_unknown_profile_is_an_error(self):
        r = probe("--profile", "nompi-9.9")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("no release profile", r.stderr)

    def test_explicit_launcher(self):
        r = probe("--", CFG.launcher, CFG.numproc_flag)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"probing: {CFG.launcher} {CFG.numproc_flag} 2 ", r.stderr)


if __name__ == "__main__":
    unittest.main()
