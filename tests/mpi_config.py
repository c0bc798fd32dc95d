"""What the tests need to know about the MPI library a build is for.

The build writes lib/attrcheck/mpi-build.json (the library, its version as mpi.h says, and its
launcher); the profile itself (the launcher's exit status without MPI_Finalize, and the release
series' known divergences, behaviours and error classes) is parsed from src/runtime/profile/mpi_profile.def,
the file the runtime is compiled from. The release series is chosen from the version as the
runtime chooses it from MPI_Get_library_version (release_for in src/runtime/profile/mpi_profile.cpp).

    cfg = mpi_config.load(BUILD_DIR)
    cfg.mpiexec(2, "./app")          -> ["/usr/bin/mpiexec.mpich", "-n", "2", "./app"]
    cfg.library, cfg.release, cfg.profile["exit_without_finalize"], cfg.divergences (ids)
    cfg.profile["world-attributes-deleted-at-finalize"]   a behaviour: True / False
"""
import json
import os
import re
import shlex
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
DEF = os.path.join(HERE, "..", "src", "runtime", "profile", "mpi_profile.def")

# What every test's environment carries. Open MPI refuses to run as root and to oversubscribe
# the 2 cores without these (Open MPI 4's mpirun reads rmaps_base_oversubscribe; Open MPI 5's
# launcher, PRRTE, has its own parameter, rmaps_default_mapping_policy, and each ignores the
# other's), and its default one-sided component cannot create windows here; MPICH ignores them.
# Open MPI's libfabric transport (btl ofi) finds no fabric here but spends a second per rank on
# looking (Open MPI 6.0: 1.8 s for a two-rank MPI_Init + MPI_Finalize with it, 0.7 s without;
# Open MPI 4.1 and 5.0: no difference); the tests leave it out. So do they the matching
# transports' probes for libfabric and Omni-Path (mtl ofi, psm, psm2: Open MPI 6.0.0rc2, a
# two-rank start of tests/stacking/stack_app, 1.40-1.44 s with them, 0.80-1.00 s without, three
# interleaved rounds). An exclusion may name a component the library lacks.
ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
    "OMPI_MCA_osc": "^ucx",
    "OMPI_MCA_btl": "^ofi",
    "OMPI_MCA_mtl": "^ofi,psm,psm2",
}

_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*)|(\))|(,)|(\s+)|(-?[0-9]+)', re.S)


def parse_def(path=DEF):
    """[(statement, [args...])] of mpi_profile.def: strings, identifiers, True / False."""
    text = re.sub(r"//[^\n]*", "", open(path).read())
    out = []
    for m in re.finditer(r"\b(LIBRARY|RELEASE|DIVERGENCE|BEHAVIOUR|SEEN|ERROR_CLASS)\(", text):
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


def _version(text):
    return tuple(int(p) for p in re.findall(r"[0-9]+", text or ""))


def profiles(path=DEF):
    """{release id: {"library", "release", "name", "from", "probed", the library's fields
    ("null_callbacks_are_null", ..., "exit_without_finalize"), "divergences": {id: {...}},
    "error_classes": {situation: class}, and each behaviour's id: True / False}}, plus each
    library's id ("openmpi") for its newest release."""
    libs, releases, divergences, behaviours, seen, classes = {}, {}, {}, {}, [], []
    for kind, a in parse_def(path):
        if kind == "LIBRARY":
            libs[a[0]] = {"library": a[1], "library_name": a[2], "marker": a[3], "null_callbacks_are_null": a[4],
                          "fortran_enters_through_c": a[5], "fortran_predefined_key_offset": a[6],
                          "exit_without_finalize": a[7], "f08_profiling_prefix": a[8]}
        elif kind == "RELEASE":
            releases[a[0]] = dict(libs[a[1]], enum=a[0], id=a[2], release=a[2], name=a[3], **{"from": a[4]},
                                  probed=a[5], divergences={}, error_classes={})
        elif kind == "DIVERGENCE":
            d = divergences.setdefault(a[0], {"sites": [], "call": a[2], "behaviour": a[3], "standard": a[4]})
            d["sites"].append(a[1])
        elif kind == "BEHAVIOUR":
            behaviours[a[0]] = a[1]
        elif kind == "SEEN":
            seen.append((a[0], a[1]))
        else:
            classes.append(a)
    for r in releases.values():
        for b in behaviours:
            r[b] = False
    for rel, ident in seen:
        if ident in divergences:
            releases[rel]["divergences"][ident] = divergences[ident]
        elif ident in behaviours:
            releases[rel][ident] = True
        else:
            raise ValueError(f"{path}: SEEN({rel}, {ident!r}) names no divergence or behaviour")
    for rel, situation, cls in classes:
        releases[rel]["error_classes"][situation] = cls
    out = {r["id"]: r for r in releases.values()}
    for r in sorted(releases.values(), key=lambda r: _version(r["from"])):
        out[r["library"]] = r
    return out


def release_for(library, version, path=DEF):
    """The release series of `library` that `version` ("5.0.7") belongs to: the one with the highest
    "from" at or below it, the oldest if the version cannot be read (as the runtime chooses)."""
    series = [r for r in profiles(path).values() if r["library"] == library and r["id"] != library]
    if not series:
        return None
    series.sort(key=lambda r: _version(r["from"]))
    best = series[0]
    if _version(version):
        for r in series:
            if _version(r["from"]) <= _version(version):
                best = r
    return best


class Config:
    def __init__(self, build):
        with open(os.path.join(build, "lib", "attrcheck", "mpi-build.json")) as f:
            b = json.load(f)
        self.library = b["library"]
        self.version = b.get("library_version", "")
        self.launcher = b["mpiexec"] or "mpiexec"
        self.numproc_flag = b.get("numproc_flag") or "-n"
        self.profile = release_for(self.library, self.version) or {
            "id": self.library, "library": self.library, "release": self.library, "name": self.library,
            "exit_without_finalize": "nonzero", "divergences": {}, "error_classes": {}}
        self.release = self.profile["release"]
        self.divergences = set(self.profile["divergences"])
        # The MPI standard ABI's libraries here, where the build made lib/libattrcheck_abi.so.
        self.standard_abi_libraries = b.get("standard_abi_libraries", [])
        self.standard_abi_program = b.get("standard_abi_program")  # {"include", "library"}
        self.standard_abi = False  # (for_standard_abi)

    def standard_abi_library(self, library=None):
        """This machine's libmpi_abi of `library` (default: the build's), as the build found it
        (Debian's /usr/lib/ARCH/libmpi_abi_openmpi.so.1.0.0, ..._mpich...), or None."""
        library = library or self.library
        return next((p for p in self.standard_abi_libraries
                     if re.match(rf"libmpi_abi_{library}\.so", os.path.basename(p))), None)

    def standard_abi_env(self, directory, library=None):
        """The environment that makes a program linked against libmpi_abi.so.1 load `library`'s:
        both libraries' files have that SONAME and ldconfig links it to one of them, so a directory
        of the caller's (made here) holds the link, first on LD_LIBRARY_PATH (the README's way)."""
        found = self.standard_abi_library(library)
        if found is None:
            raise FileNotFoundError(f"no MPI standard ABI library of {library or self.library} here")
        os.makedirs(directory, exist_ok=True)
        link = os.path.join(directory, "libmpi_abi.so.1")
        if os.path.islink(link):
            os.unlink(link)
        os.symlink(found, link)
        return {"LD_LIBRARY_PATH": directory}

    def standard_abi_compile(self, source, exe, *flags):
        """The command that compiles a C program for the standard ABI as the suite's cases are:
        against the header that declares the most, linked by the SONAME libmpi_abi.so.1."""
        prog = self.standard_abi_program
        return ["gcc", *flags, f"-I{prog['include']}", "-o", exe, source, prog["library"]]

    def standard_abi_defines(self, symbol, library=None):
        """Whether `library`'s libmpi_abi (default: the build's) defines `symbol` (Open MPI's leaves
        out the MPI-1 caching calls)."""
        return symbol in dynamic_symbols(self.standard_abi_library(library))

    def for_standard_abi(self):
        """The profile a program of the standard ABI runs under on this library: its release's
        divergences, behaviours and error classes, with what the ABI fixes for every library (MPI
        5.0, the ABI's mpi.h): every null callback is the sentinel 0x0 (so NULL is the predefined
        one) and there is no Fortran binding (libattrcheck_abi's kAbiProfile, mpi_profile.hpp)."""
        self.profile = dict(self.profile, null_callbacks_are_null=True, fortran_enters_through_c=False,
                            name=f"{self.profile['name']} (the MPI standard ABI)")
        self.standard_abi = True
        return self

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
        them apart (docs/rules.md, deprecated.constant): two findings fewer there. Its two MPI-1
        calls each draw portability.standard-abi-lacks-mpi1-calls too (info)."""
        constants = not self.profile.get("null_callbacks_are_null", False)
        return constants, 10 if constants else 8, 12 if constants else 8


def dynamic_symbols(path, undefined=False):
    """The names (versions stripped) of the symbols an ELF file's dynamic symbol table defines, or
    with undefined=True the ones it needs (nm -D)."""
    out = subprocess.run(["nm", "-D", "--undefined-only" if undefined else "--defined-only", path],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines() if line.split()}


def load(build):
    return Config(build)
