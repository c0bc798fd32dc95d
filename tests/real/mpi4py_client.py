#!/usr/bin/env python3
"""An mpi4py program for the real-client tests (run as `mpirun -np N python3 mpi4py_client.py`).

It uses mpi4py (Debian's python3-mpi4py: 3.1.4 on Debian 12, 4.0.3 on Debian 13) the way Python
MPI programs do: attributes with Python copy/delete callbacks on communicators, datatypes and
windows; datatype decoding through mpi4py.util.dtlib (MPI_Type_get_envelope/get_contents, and
freeing the types get_contents returns); pickled collectives. It checks every result itself and prints them one per line, so that a call
attrcheck wrongly refused shows as an exception, a different line, or a non-zero exit.
Every rank prints only deterministic values (no addresses, no timings, no implementation limits).
"""
import sys

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(what, got, want):
    print(f"{what}: {got!r}", flush=True)
    if got != want:
        failures.append(f"{what}: got {got!r}, expected {want!r}")


def comm_attributes():
    log = []

    def copy_fn(obj, keyval, value):
        log.append(("copy", value["id"]))
        return {"id": value["id"] + 100, "data": list(value["data"])}

    def delete_fn(obj, keyval, value):
        log.append(("delete", value["id"]))

    def no_copy(obj, keyval, value):
        log.append(("no-copy", value))
        return NotImplemented  # mpi4py: the attribute is not copied to the duplicate

    key = MPI.Comm.Create_keyval(copy_fn, delete_fn)
    key_nocopy = MPI.Comm.Create_keyval(no_copy, delete_fn)
    key_int = MPI.Comm.Create_keyval(nopython=True)  # plain integer values, no callbacks
    check("comm keyvals valid", MPI.KEYVAL_INVALID not in (key, key_nocopy, key_int), True)

    c1 = comm.Dup()
    check("c1 attr before set", c1.Get_attr(key), None)
    c1.Set_attr(key, {"id": 1, "data": [rank]})
    c1.Set_attr(key_nocopy, {"id": 2, "data": []})
    c1.Set_attr(key_int, 4242 + rank)
    check("c1 get key", c1.Get_attr(key), {"id": 1, "data": [rank]})
    check("c1 get key_int", c1.Get_attr(key_int), 4242 + rank)

    c2 = c1.Dup()
    check("c2 copied key", c2.Get_attr(key), {"id": 101, "data": [rank]})
    check("c2 did not copy key_nocopy", c2.Get_attr(key_nocopy), None)
    check("c2 did not copy key_int", c2.Get_attr(key_int), None)

    c1.Set_attr(key, {"id": 3, "data": []})  # replacing a value runs the delete callback
    c1.Delete_attr(key_nocopy)
    check("c1 key_nocopy deleted", c1.Get_attr(key_nocopy), None)
    c1.Delete_attr(key_int)

    # Freeing a keyval in use is legal: the attributes stay, and their delete callbacks still
    # run when the communicators go.
    check("free key in use", MPI.Comm.Free_keyval(key), MPI.KEYVAL_INVALID)
    c3 = c2.Dup()  # the copy callback of the freed key still runs (log: copy 101, delete 201)
    c3.Free()
    c2.Free()
    c1.Free()
    MPI.Comm.Free_keyval(key_nocopy)
    MPI.Comm.Free_keyval(key_int)
    check("comm callback log", log, [("copy", 1), ("no-copy", {"id": 2, "data": []}), ("delete", 1),
                                     ("delete", 2), ("copy", 101), ("delete", 201), ("delete", 101),
                                     ("delete", 3)])

    # A split communicator with an attribute freed by MPI_Comm_free.
    gone = []
    ks = MPI.Comm.Create_keyval(delete_fn=lambda o, k, v: gone.append(v))
    half = comm.Split(rank % 2, rank)
    half.Set_attr(ks, ("split", rank % 2))
    half.Free()
    MPI.Comm.Free_keyval(ks)
    check("split delete callback", gone, [("split", rank % 2)])

    # Predefined attributes (the values vary by implementation; only their presence is printed).
    check("MPI_TAG_UB present", comm.Get_attr(MPI.TAG_UB) is not None, True)
    check("MPI_WTIME_IS_GLOBAL present", comm.Get_attr(MPI.WTIME_IS_GLOBAL) is not None, True)


def type_attributes():
    log = []
    key = MPI.Datatype.Create_keyval(copy_fn=lambda t, k, v: (log.append(("copy", v)), v * 2)[1],
                                     delete_fn=lambda t, k, v: log.append(("delete", v)))
    t = MPI.INT.Create_contiguous(4).Commit()
    t.Set_attr(key, 21)
    t2 = t.Dup()
    check("datatype dup copied", t2.Get_attr(key), 42)
    t2.Delete_attr(key)
    check("datatype attr deleted", t2.Get_attr(key), None)
    t2.Free()
    t.Free()
    MPI.Datatype.Free_keyval(key)
    check("datatype callback log", log, [("copy", 21), ("delete", 42), ("delete", 21)])


def win_attributes():
    log = []
    key = MPI.Win.Create_keyval(delete_fn=lambda w, k, v: log.append(("delete", v)))
    win = MPI.Win.Allocate(8, 1, comm=comm)
    win.Set_attr(key, [rank])
    check("win attr", win.Get_attr(key), [rank])
    check("win create flavor", win.Get_attr(MPI.WIN_CREATE_FLAVOR) == MPI.WIN_FLAVOR_ALLOCATE, True)
    win.Free()
    MPI.Win.Free_keyval(key)
    check("win callback log", log, [("delete", [rank])])


def datatype_decoding():
    contig = MPI.DOUBLE.Create_contiguous(3).Commit()
    vector = MPI.INT.Create_vector(2, 1, 3).Commit()
    struct = MPI.Datatype.Create_struct([1, 2, 1], [0, 8, 24], [MPI.INT, MPI.DOUBLE, contig]).Commit()
    nested = struct.Create_contiguous(2).Commit()
    subarray = MPI.DOUBLE.Create_subarray([2, 3], [2, 3], [0, 0], order=MPI.ORDER_FORTRAN).Commit()
    indexed = MPI.SHORT.Create_indexed_block(2, [0, 4]).Commit()
    for name, t in (("contiguous", contig), ("vector", vector), ("struct", struct),
                    ("contiguous of struct", nested), ("subarray", subarray), ("indexed block", indexed)):
        dt = dtlib.to_numpy_dtype(t)
        check(f"dtlib {name}", (str(dt), dt.itemsize), (str(dt), t.extent))
    check("dtlib contiguous", str(dtlib.to_numpy_dtype(contig)), "('<f8', (3,))")
    check("dtlib vector itemsize", dtlib.to_numpy_dtype(vector).itemsize, vector.extent)
    # mpi4py 4.0 adds the large counts (MPI-4's get_envelope_c / get_contents_c) to both results:
    # the combiner stays last, the datatypes too.
    check("envelope of struct is a struct", struct.Get_envelope()[-1] == MPI.COMBINER_STRUCT, True)
    contents = struct.Get_contents()
    ints, addrs, types = contents[0], contents[1], contents[-1]
    # mpi4py 4 makes the struct with MPI_Type_create_struct_c where the library has it, and such a
    # datatype may give its integers and addresses back as large counts (MPI-4.0 5.1.13): Open MPI
    # 6.0 returns all seven there (the count, the block lengths, the displacements), with no
    # integers or addresses; MPICH, Open MPI 4.1 and 5.0 in the integers and addresses.
    counts = contents[2] if len(contents) == 4 else []
    got = (ints, addrs) if ints or addrs or not counts else (counts[:4], counts[4:])
    check("contents of struct", got, ([3, 1, 2, 1], [0, 8, 24]))
    for inner in types:  # the standard: the caller frees derived types get_contents returns
        if not inner.is_predefined:
            inner.Free()
    # And the other way round: numpy dtype -> MPI datatype -> numpy dtype.
    np_type = np.dtype([("a", "i4"), ("b", "f8", (2,)), ("c", "u1")], align=True)
    mpi_type = dtlib.from_numpy_dtype(np_type).Commit()
    back = dtlib.to_numpy_dtype(mpi_type)  # MPI types carry no field names: numpy's f0, f1, ...
    check("round trip", (back.names, back.itemsize, [back.fields[n][1] for n in back.names]),
          (("f0", "f1", "f2"), np_type.itemsize, [np_type.fields[n][1] for n in np_type.names]))
    for t in (mpi_type, indexed, subarray, nested, struct, vector, contig):
        t.Free()


def pickled_collectives():
    mine = {"rank": rank, "items": list(range(rank + 3)), "tag": ("x" * rank, rank * 1.5)}
    root = comm.bcast(mine if rank == 0 else None, root=0)
    check("bcast", root, {"rank": 0, "items": [0, 1, 2], "tag": ("", 0.0)})
    everyone = comm.allgather(mine)
    check("allgather ranks", [o["rank"] for o in everyone], list(range(size)))
    check("allgather items", [len(o["items"]) for o in everyone], [r + 3 for r in range(size)])
    gathered = comm.gather(rank * rank, root=0)
    check("gather", gathered, [r * r for r in range(size)] if rank == 0 else None)
    check("scatter", comm.scatter([f"to {r}" for r in range(size)] if rank == 0 else None, root=0), f"to {rank}")
    check("alltoall", comm.alltoall([(rank, r) for r in range(size)]), [(r, rank) for r in range(size)])
    check("allreduce sum", comm.allreduce(rank + 1, op=MPI.SUM), size * (size + 1) // 2)
    check("allreduce lists", comm.allreduce([rank], op=MPI.SUM), list(range(size)))
    right, left = (rank + 1) % size, (rank - 1) % size
    check("sendrecv", comm.sendrecv({"from": rank}, dest=right, source=left), {"from": left})
    # A duplicate communicator: mpi4py's pickled point-to-point on it too.
    dup = comm.Dup()
    check("dup bcast", dup.bcast(np.arange(4) * 2 if rank == 0 else None).tolist(), [0, 2, 4, 6])
    dup.Free()
    buf = np.full(3, rank, dtype="i8")
    out = np.empty(3, dtype="i8")
    comm.Allreduce(buf, out, op=MPI.MAX)
    check("buffer allreduce", out.tolist(), [size - 1] * 3)


comm_attributes()
type_attributes()
win_attributes()
datatype_decoding()
pickled_collectives()
comm.Barrier()
if failures:
    for f in failures:
        print(f"rank {rank}: FAILED {f}", file=sys.stderr)
    sys.exit(1)
print("done", flush=True)
