"""Mismatch classes already known, so that a run can tell them from new ones.

Each entry: id; owner ("attrcheck": a bug of the tool, "library": the MPI library departs from
what the model predicts); the library it happens on (None: any); a regular expression matched
against the mismatch class (fuzz.py `classify`); the divergence of mpi_profile.def it is, where
the profile lists it ("profile": shadow mode must then note it, and an impl.divergence at the call
is attrcheck's failure); the generator switch (program.AVOIDABLE) that leaves out the construct
that runs into it (`fuzz.py --avoid ID`), and what it is.
A class that matches a known entry is reported as known and fails nothing; `--strict` makes known
attrcheck bugs fail the run too. No attrcheck bug is listed: the tester found two (a replacing set
whose old value's delete callback frees its own keyval; window constructors duplicating their
communicator with its attributes), both fixed, and a class of theirs fails the run again.
"""
KNOWN = [
    {"id": "mpich-replace-keeps-both", "owner": "library", "library": "mpich",
     "match": r"^(native|shadow): MPI_(Type|Win)_(set_attr|dup|free|delete_attr|get_attr): ",
     "profile": "replacing-set-attr-keeps-old-value",
     "avoid": "type-win-replace",
     "what": "MPICH 4.0.2: a replacing MPI_Type_set_attr / MPI_Win_set_attr sometimes runs no delete callback "
             "and keeps both values"},
    {"id": "mpich-win-allocate-base", "owner": "library", "library": "mpich",
     "match": r"^(native|shadow|emulate): MPI_Win_allocate: result differs",
     "profile": "win-allocate-base-attribute-differs",
     "avoid": "win-allocate",
     "what": "MPICH 4.0.2 at 2 ranks: MPI_Win_allocate of 8 bytes gives rank 1 an MPI_WIN_BASE 8 bytes below "
             "the base pointer"},
]
