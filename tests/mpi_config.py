"""What the tests need to know about the MPI library a build is for.

The build writes lib/attrcheck/mpi-build.json (the library's profile id and its launcher); the
profile itself (known divergences, the launcher's exit status without MPI_Finalize, error classes)
is parsed from src/runtime/mpi_profile.def, the file the runtime is compiled from.

    cfg = mpi_config.load(BUILD_DIR)
    cfg.mpiexec(2, "./app")          -> ["/usr/bin/mpiexec.mpich", "-n", "2", "./app"]
    cfg.library, cfg.profile["exit_without_finalize"], cfg.divergences (ids)
"""
import json
import os
import re
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))
DEF = os.path.join(HERE, "..", "src", "runtime", "mpi_profile.def")

# What every test's environment carries. Open MPI refuses to run as root and to oversubscribe
# the 2 cores without these (Open MPI 4's mpirun reads rmaps_base_oversubscribe; Open MPI 5's
# launcher, PRRTE, has its own parameter, rmaps_default_mapping_policy, and each ignores the
# other's), and its default one-sided component cannot create windows here; MPICH ignores them.
ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
    "OMPI_MCA_osc": "^ucx",
}

_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*)|(\))|(,)|(\s+)|(-?[0-9]+)', re.S)


def parse_def(path=DEF):
    """[(statement, [args...])] of mpi_profile.def: strings, identifiers, True / False."""
    text = re.sub(r"//[^\n]*", "", open(path).read())
    out = []
    for m in re.finditer(r"\b(LIBRARY|DIVERGENCE|ERROR_CLASS)\(", text):
        pos, args = m.end(), []
        while True:
            t = _TOKEN.match(text, pos)
            if not t:
                raise ValueError(f"{path}: cannot parse {m.group(1)} near {text[pos:pos + 40]!r}")
            pos = t.end()
            if t.group(1) is not None:
                args.append(t.group(1))
            elif t.group(2) is not None:
                args.append({"true": True, "false": False}.get(t.group(2), t.group(2)))
            elif t.group(6) is not None:
                args.append(int(t.group(6)))
            elif t.group(3):
                break
        out.append((m.group(1), args))
    return out


def profiles(path=DEF):
    """{library id: {"enum", "name", "null_callbacks_are_null", ..., "divergences": {id: {...}},
    "error_classes": {situation: class}}}."""
    libs, by_enum = {}, {}
    for kind, a in parse_def(path):
        if kind == "LIBRARY":
            p = {"enum": a[0], "id": a[1], "name": a[2], "marker": a[3], "null_callbacks_are_null": a[4],
                 "fortran_enters_through_c": a[5], "fortran_predefined_key_offset": a[6],
                 "exit_without_finalize": a[7], "f08_profiling_prefix": a[8], "divergences": {},
                 "error_classes": {}}
            libs[a[1]] = by_enum[a[0]] = p
        elif kind == "DIVERGENCE":
            d = by_enum[a[0]]["divergences"].setdefault(a[1], {"sites": [], "call": a[3], "versions": a[4],
                                                                "behaviour": a[5], "standard": a[6]})
            d["sites"].append(a[2])
        else:
            by_enum[a[0]]["error_classes"][a[1]] = a[2]
    return libs


class Config:
    def __init__(self, build):
        with open(os.path.join(build, "lib", "attrcheck", "mpi-build.json")) as f:
            b = json.load(f)
        self.library = b["library"]
        self.launcher = b["mpiexec"] or "mpiexec"
        self.numproc_flag = b.get("numproc_flag") or "-n"
        self.profile = profiles().get(self.library, {"id": self.library, "exit_without_finalize": "nonzero",
                                                     "divergences": {}, "error_classes": {}})
        self.divergences = set(self.profile["divergences"])

    def mpiexec(self, np, *command):
        return [self.launcher, self.numproc_flag, str(np), *command]

    def per_rank_command(self, directory, np, command):
        """The launcher's command that starts `command` on `np` ranks, each writing its stdout to a
        file of its own under `directory` (read back with rank_stdout): interleaved ranks cannot
        garble each other's lines there. (Open MPI's --tag-output would not do: it tags each chunk
        a rank writes, even mid-line.) Hydra (MPICH) writes the files itself (-outfile-pattern).
        Open MPI's --output-filename is not used: with Open MPI 5.0.7 (PMIx 5.0.7) each rank's
        stream tries to create the directory, all but the first fail ("PMIX_ERR_EXISTS in file
        pmix_iof.c") and their output is lost; so each rank is started through `sh`, which sends
        its stdout to DIR/rank.N.stdout (N: OMPI_COMM_WORLD_RANK, which Open MPI 4 and 5 set)
        before it becomes the program (exec). Jobs the program spawns are started without it, as
        the program asks. Makes `directory`."""
        os.makedirs(directory, exist_ok=True)
        if self.library == "openmpi":
            target = shlex.quote(os.path.join(directory, "rank."))
            script = f'exec "$@" >{target}"$OMPI_COMM_WORLD_RANK".stdout'
            return [self.launcher, self.numproc_flag, str(np), "sh", "-c", script, "sh", *command]
        return [self.launcher, "-outfile-pattern", os.path.join(directory, "rank.%r.stdout"),  # Hydra's
                self.numproc_flag, str(np), *command]

    def rank_stdout(self, directory):
        """{rank: text} of what per_rank_command(directory, ...) made the ranks write: DIR/rank.N.stdout
        (the first job's only: jobs a program spawns are not its ranks)."""
        ranks = {}
        if not os.path.isdir(directory):
            return ranks
        files = {int(m.group(1)): os.path.join(directory, e) for e in os.listdir(directory)
                 for m in [re.fullmatch(r"rank\.(\d+)\.stdout", e)] if m}
        for rank, path in files.items():
            with open(path, errors="replace") as f:
                ranks[rank] = f.read()
        return ranks

    def env(self, **extra):
        return dict(os.environ, **ENV, **extra)

    def demo_expectations(self):
        """(whether deprecated constants are seen, findings, warnings) of examples/demo.c's run.
        The demo passes two deprecated MPI-1 constants (MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN): in
        MPICH's mpi.h they are null pointers like their replacements, so nothing at run time tells
        them apart (docs/rules.md, deprecated.constant): two findings fewer there."""
        constants = not self.profile.get("null_callbacks_are_null", False)
        return constants, 8 if constants else 6, 12 if constants else 8


def load(build):
    return Config(build)
