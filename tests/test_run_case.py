#!/usr/bin/env python3
"""run_case.py keeps a failing run's evidence where the next run of the case does not remove it
(WORKDIR.failed/STAMP/: log.txt and the report directory), the newest KEEP_FAILED of them; and
where a case's library may hang the job (hangs-on), a run still going after HANG_SECONDS is
ended with SIGTERM, and what it did until then is what the checks see."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi"))
import run_case  # noqa: E402


def main():
    with tempfile.TemporaryDirectory() as tmp:
        workdir = os.path.join(tmp, "case.emulate")
        os.makedirs(os.path.join(workdir, "out"))
        with open(os.path.join(workdir, "out", "rank-0.json"), "w") as f:
            f.write("{}")
        kept = [run_case.keep_failure(workdir, f"run {i}\n") for i in range(run_case.KEEP_FAILED + 2)]
        root = workdir + ".failed"
        left = sorted(os.path.join(root, d) for d in os.listdir(root))
        failures = []
        if left != sorted(kept[-run_case.KEEP_FAILED:]):
            failures.append(f"kept {left}, expected the newest {run_case.KEEP_FAILED} of {kept}")
        last = kept[-1]
        with open(os.path.join(last, "log.txt")) as f:
            if f.read() != f"run {run_case.KEEP_FAILED + 1}\n":
                failures.append("log.txt does not hold the run's log")
        if not os.path.isfile(os.path.join(last, "out", "rank-0.json")):
            failures.append("the report directory was not copied")
        # The next run of the case empties its workdir, not what was kept beside it.
        run_case.shutil.rmtree(workdir)
        if not os.path.isfile(os.path.join(last, "log.txt")):
            failures.append("the kept failure went with the workdir")
    # hangs-on: a hanging job is ended as a batch system would, and its handler still runs.
    run_case.HANG_SECONDS = 1
    job = ["sh", "-c", 'trap "echo ended by SIGTERM; exit 3" TERM; echo started; sleep 60 & wait']
    hung = run_case.run_ended_if_hung(job, dict(os.environ), "/", "the library may hang")
    if hung.returncode != 3 or hung.stdout.split("\n")[:2] != ["started", "ended by SIGTERM"]:
        failures.append(f"a hung job ended with {hung.returncode}, printing {hung.stdout!r}")
    quick = run_case.run_ended_if_hung(["sh", "-c", "echo done; exit 5"], dict(os.environ), "/", "the library may hang")
    if quick.returncode != 5 or quick.stdout != "done\n":
        failures.append(f"a job that ends by itself ended with {quick.returncode}, printing {quick.stdout!r}")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
