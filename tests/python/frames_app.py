"""An mpi4py program with one erroneous use of attributes per rule, for tests/python/run_frames.py:
each finding must be reported at the Python line marked on it, with its provenance at the Python
lines marked on them.

Markers (a comment at the end of the line they name):
  expect-site: RULE                  some RULE finding's site is this line (its first frame of the
                                     user's Python code)
  expect-provenance: RULE WHAT       some RULE finding's provenance WHAT is this line
  expect-where: RULE                 some RULE finding is shown at this line (the summary's where,
                                     SARIF's location, JUnit's failure): one found at MPI_Finalize,
                                     which mpi4py runs from the interpreter's exit (no Python code
                                     running), is where its subject was made
Several markers on one line are separated by ';'.
A marker ending in [mpi4py<4] holds only before mpi4py 4. mpi4py 4 tells MPI that a delete
callback which raised succeeded (its C callback returns MPI_SUCCESS, keeps the error and raises it
once MPI_Comm_delete_attr has returned): the library deletes the attribute, and attrcheck, rightly,
sees no failing callback. mpi4py 3 returns the error: the call fails and the attribute stays.
A failing callback's finding names the Python function mpi4py ran (its provenance "Python copy
callback" / "Python delete callback", at the function's first line) and is at the Python line of
the call that ran it, also inside comm.Dup(), which mpi4py calls with the GIL released.
"""
import sys
import threading

from mpi4py import MPI

comm = MPI.COMM_WORLD
failed = []


def make_keyval():
    return MPI.Comm.Create_keyval()  # expect-provenance: keyval.leak keyval created; expect-where: keyval.leak


def delete_once(state):
    def delete_fn(obj, keyval, value):  # expect-provenance: callback.error Python delete callback [mpi4py<4]
        if not state:
            state.append(1)
            raise RuntimeError("a delete callback that raises")
    return delete_fn


def copy_raises(obj, keyval, value):  # expect-provenance: callback.error Python copy callback
    raise RuntimeError("a copy callback that raises")


def expect_failure(what, fn):
    try:
        fn()
    except Exception:  # MPI.Exception (attrcheck refused it, or the library failed it), or the callback's
        return
    failed.append(what)


def double_free():
    key = MPI.Comm.Create_keyval()  # expect-provenance: keyval.double-free keyval created
    MPI.Comm.Free_keyval(key)  # expect-provenance: keyval.double-free keyval freed
    expect_failure("double free", lambda: MPI.Comm.Free_keyval(key))  # expect-site: keyval.double-free


def failing_delete():
    key = MPI.Comm.Create_keyval(delete_fn=delete_once([]))  # expect-provenance: callback.error keyval created [mpi4py<4]
    dup = comm.Dup()
    dup.Set_attr(key, "value")
    expect_failure("raising delete", lambda: dup.Delete_attr(key))  # expect-site: callback.error [mpi4py<4]
    if dup.Get_attr(key) is not None:  # mpi4py 3: the failed delete left it (see above)
        dup.Delete_attr(key)
    dup.Free()
    MPI.Comm.Free_keyval(key)


def failing_copy():
    key = MPI.Comm.Create_keyval(copy_fn=copy_raises)  # expect-provenance: callback.error keyval created
    dup = comm.Dup()
    dup.Set_attr(key, "value")
    expect_failure("raising copy", lambda: dup.Dup())  # expect-site: callback.error
    dup.Delete_attr(key)
    dup.Free()
    MPI.Comm.Free_keyval(key)


def wrong_kind():
    key = MPI.Datatype.Create_keyval()  # expect-provenance: keyval.kind-mismatch keyval created
    expect_failure("wrong kind", lambda: comm.Set_attr(key, 1))  # expect-site: keyval.kind-mismatch
    MPI.Datatype.Free_keyval(key)


def replace(obj, key):
    obj.Set_attr(key, "left")  # expect-provenance: attr.leak attribute set; expect-where: attr.leak


def attribute_left():
    key = MPI.Comm.Create_keyval(delete_fn=lambda obj, keyval, value: None)
    never_freed = comm.Dup()  # expect-provenance: attr.leak object created
    never_freed.Set_attr(key, "first")
    replace(never_freed, key)  # (a set replacing a value: emulate mode runs its delete callback itself)
    return never_freed


def keyval_in_a_thread(out):
    out.append(MPI.Comm.Create_keyval())  # expect-provenance: keyval.leak keyval created; expect-where: keyval.leak


def from_a_thread():
    # Another Python thread's frames are its own (mpi4py initializes MPI_THREAD_MULTIPLE).
    out = []
    if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        worker = threading.Thread(target=keyval_in_a_thread, args=(out,))
        worker.start()
        worker.join()
    else:  # (a run at a lower thread level: the same keyval, from this thread)
        keyval_in_a_thread(out)
    return out


leaked = make_keyval()
leaked_in_a_thread = from_a_thread()
double_free()
failing_delete()
failing_copy()
wrong_kind()
kept = attribute_left()
if failed:  # a call that must fail did not: the exit status says so (run_frames.py)
    sys.exit(f"calls that should have failed did not: {failed}")
