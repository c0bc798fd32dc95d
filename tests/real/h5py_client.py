#!/usr/bin/env python3
"""h5py with MPI (Debian's python3-h5py-mpi 3.7, HDF5 1.10 openmpi) for the real-client tests:
a file created, written and read collectively through the mpio driver (H5Pset_fapl_mpio), as
h5py's parallel documentation does it. Run as `mpirun -np N python3 h5py_client.py` in a scratch
directory (it writes parallel.h5 there). Prints only deterministic values; checks them itself.
"""
import sys

import h5py
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(what, got, want):
    print(f"{what}: {got!r}", flush=True)
    if got != want:
        failures.append(f"{what}: got {got!r}, expected {want!r}")


check("h5py built with MPI", h5py.get_config().mpi, True)
with h5py.File("parallel.h5", "w", driver="mpio", comm=comm) as f:
    check("driver", f.driver, "mpio")
    independent = f.create_dataset("independent", (size, 4), dtype="i4")  # creation is collective
    collective = f.create_dataset("collective", (size, 8), dtype="f8")
    grp = f.create_group("group")
    grp.attrs["ranks"] = size
    independent[rank] = np.arange(4, dtype="i4") + 10 * rank
    with collective.collective:
        collective[rank] = np.linspace(0, 1, 8) * (rank + 1)
    f.atomic = True
    check("atomic mode", f.atomic, True)

comm.Barrier()
with h5py.File("parallel.h5", "r", driver="mpio", comm=comm) as f:
    check("independent rows", f["independent"][...].tolist(),
          [[10 * r + i for i in range(4)] for r in range(size)])
    with f["collective"].collective:
        mine = f["collective"][rank]
    check("collective row", mine.tolist(), (np.linspace(0, 1, 8) * (rank + 1)).tolist())
    check("group attribute", int(f["group"].attrs["ranks"]), size)
    check("names", sorted(f.keys()), ["collective", "group", "independent"])

if failures:
    for f in failures:
        print(f"rank {rank}: FAILED {f}", file=sys.stderr)
    sys.exit(1)
print("done", flush=True)
