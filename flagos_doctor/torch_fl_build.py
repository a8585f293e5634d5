"""Build torch_fl from source for a given interpreter's torch, outside any clone, once.

``python -m flagos_doctor.torch_fl_build SOURCE [--commit REF] [--python PY]`` where SOURCE
is a torch_fl source tree, a git checkout (``--commit`` picks a commit of it; without it the
working tree is built as it stands) or a ``git archive`` tarball. The build lives in a
cache folder (``$FLAGOS_DOCTOR_CACHE``, default ``~/.cache/flagos-doctor``) keyed by what was
built (the commit, or a digest of the source when no clean commit vouches for it), the
torch version and the Python version; nothing is installed into the interpreter's
environment: the build is imported through ``PYTHONPATH``. A second call with the same
inputs finds the finished build and returns at once. The output is one line: where the
build is and how to import it (the last ``PYTHONPATH=...`` of that line is what
``survey --compare --build-cmd`` puts first on the arm's import path).

The recipe is ``shared/torch-fl/README.md``'s, for both kinds of machine seen so far:

- torch newer than the bindings torch_fl ships (2.13 on CPU machines): regenerate the ATen
  bindings with torch_fl's own ``scripts/codegen_ops.py`` against this torch's schema,
  keeping the shipped ``flaggems_python_kernels.cc`` (the generator empties it when it
  cannot import a built torch_fl and flag_gems, which it never can before the build);
- torch 2.13: the kineto patch (``torch_fl_patches/torch-2.13-kineto.patch``);
- a CPU torch: ``libtorch_fl.so`` needs ``libc10_cuda.so`` of the same torch version at
  import; torch's CUDA libraries are taken from PyPI's CUDA wheel of that version (526 MB
  for 2.13.0, downloaded once; only the extracted libraries are kept, under the cache) and
  put into ``torch_fl/lib/``, where setup.py's own bundling puts them;
- a cu13 torch (the H200 image): setup.py looks only for cu12's ``libnvrtc.so.12``; when
  the first build fails, ``CUDA_nvrtc_LIBRARY`` and ``CUDA_NVRTC_LIB`` in
  ``build/CMakeCache.txt`` are pointed at cu13's ``libnvrtc.so.13`` and the build rerun.

``--no-optimize`` compiles the C++ at ``-O0`` instead of CMake's Release ``-O3`` (a third
less compile time; keyed apart, ``...-O0``): the tests' build, where torch_fl's own C++ is
imported and routed through but never timed.

What was built from is recorded in the build (``torch_fl/flagos_doctor_build.json``, see
:data:`RECORD_NAME`), where :mod:`flagos_doctor.torch_fl_source` finds it for the survey's
provenance and the report. Standard library only; torch is never imported here, only in
the interpreter under build.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile

from flagos_doctor import git
from flagos_doctor.errors import EXIT_BAD_INPUT, BadInput
from flagos_doctor.files import atomic_write_text

SCHEMA = "flagos-doctor.torch-fl-build/1"
#: The build's own record of what it was built from, inside the built package.
RECORD_NAME = "flagos_doctor_build.json"
#: Newest torch (major, minor) the bindings torch_fl ships compile against (recipe B: 2.11).
SHIPPED_BINDINGS_UP_TO = (2, 11)
#: The one generated file the regeneration empties before a built torch_fl exists.
KEPT_GENERATED = "csrc/aten/generated/flaggems_python_kernels.cc"
KINETO_PATCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_fl_patches", "torch-2.13-kineto.patch")
#: torch's CUDA libraries a CPU torch lacks; torch_fl links some of them.
TORCH_CUDA_LIBS = ("libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so", "libtorch_nvshmem.so",
                   "libcaffe2_nvrtc.so")
#: Where the CUDA wheel comes from; --isolated, because a machine's pip config may point elsewhere.
TORCH_INDEX = "https://pypi.org/simple"
#: Folders never copied from a plain source tree (build output, caches).
SKIPPED_FOLDERS = {".git", "build", "__pycache__", ".eggs", "dist"}


def cache_root() -> str:
    """``$FLAGOS_DOCTOR_CACHE``, else ``$XDG_CACHE_HOME/flagos-doctor``, else ``~/.cache/flagos-doctor``."""
    if os.environ.get("FLAGOS_DOCTOR_CACHE"):
        return os.path.abspath(os.environ["FLAGOS_DOCTOR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flagos-doctor")


def say(line: str) -> None:
    """Progress, on stderr: stdout carries only the one result line."""
    print(f"torch_fl_build: {line}", file=sys.stderr, flush=True)


#: While a step runs, a line at least this often: how long so far, and the build log's last progress.
RELAY_SECONDS = 30
#: A compiler's progress line in the build log: make's ``[ 45%] Building ...``, ninja's ``[12/80] ...``.
PROGRESS_LINE = re.compile(r"^\[\s*\d+(%|/\d+)\]")


def last_progress(log_path: str | None) -> str | None:
    """The build log's last progress line (of its last 64 KiB), or None."""
    if not log_path or not os.path.isfile(log_path):
        return None
    with open(log_path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(log_path) - 65536))
        lines = handle.read().decode(errors="replace").splitlines()
    return next((line.strip()[:160] for line in reversed(lines) if PROGRESS_LINE.match(line)), None)


@contextlib.contextmanager
def step(what: str, usually: str, log_path: str | None = None):
    """Say ``what`` as it starts, with how long it usually takes; while it runs, every
    :data:`RELAY_SECONDS`, the time so far and the log's last progress line; then its time."""
    began, stop = time.monotonic(), threading.Event()

    def relay():
        while not stop.wait(RELAY_SECONDS):
            progress = last_progress(log_path)
            say(f"{what}: {_duration(time.monotonic() - began)} so far (usually {usually})"
                + (f"; the log: {progress}" if progress else ""))

    say(f"{what} (usually {usually})")
    thread = threading.Thread(target=relay, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    say(f"{what}: done in {_duration(time.monotonic() - began)}")


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def _run(argv: list[str], cwd: str | None = None, env: dict | None = None, timeout: float | None = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


# -- the interpreter ----------------------------------------------------------------------------

_FACTS = r"""
import json, os, sys, sysconfig, site
out = {"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
       "site": [p for p in (site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()["purelib"]]) if os.path.isdir(p)]}
try:
    import torch
    out.update(torch=torch.__version__, torch_cuda=torch.version.cuda, torch_lib=os.path.join(os.path.dirname(torch.__file__), "lib"))
except Exception as exc:
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def interpreter_facts(python: str) -> dict:
    """Python version, torch version, torch's CUDA version and library folder of ``python``."""
    try:
        done = _run([python, "-c", _FACTS], timeout=300)
    except OSError as exc:
        raise BadInput(f"cannot run the interpreter: {exc.strerror}", f"--python {python}")
    if done.returncode != 0:
        raise BadInput(f"the interpreter failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}", f"--python {python}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    if "torch" not in facts:
        raise BadInput(f"torch is not importable: {facts.get('torch_error')}", f"--python {python}")
    return facts


def torch_release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as ``2.13.0+cpu``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


# -- the source -----------------------------------------------------------------------------------

def tarball_commit(path: str) -> str | None:
    """The commit ``git archive`` recorded in a tarball (``git get-tar-commit-id``), or None."""
    opener = gzip.open if path.endswith((".gz", ".tgz")) else open
    try:
        with opener(path, "rb") as handle:
            head = handle.read(64 * 1024)
        # From "/": git 2.39 in a folder whose path is over 128 characters (getcwd's first
        # buffer) reads the header and exits 1, saying nothing; the archive comes on stdin.
        done = subprocess.run(["git", "get-tar-commit-id"], input=head, capture_output=True, timeout=60, cwd="/")
    except (OSError, EOFError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.decode(errors="replace").strip()
    return commit if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", commit) else None


def tree_digest(folder: str, files: list[str]) -> str:
    """sha256 over the relative paths and contents of ``files`` under ``folder``."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        full = os.path.join(folder, rel)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        digest.update(rel.encode() + b"\0")
        with open(full, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def _plain_files(folder: str) -> list[str]:
    found = []
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS)
        for name in names:
            if name.endswith((".so", ".pyc")):
                continue
            found.append(os.path.relpath(os.path.join(top, name), folder))
    return found


class Source:
    """What is built: ``kind`` (tarball, commit, checkout, tree), ``commit`` (or None),
    ``dirty`` (or None), ``digest`` (when no clean commit names the source) and where from."""

    def __init__(self, kind: str, origin: str, commit: str | None = None, dirty: bool | None = None,
                 digest: str | None = None, files: list[str] | None = None):
        self.kind, self.origin, self.commit, self.dirty, self.digest = kind, origin, commit, dirty, digest
        self.files = files  # a working tree's files to copy (dirty checkout, plain tree)

    @property
    def ident(self) -> str:
        """The cache key's source part: a clean commit, else the source digest."""
        if self.commit and not self.dirty:
            return self.commit[:12]
        return f"src-{self.digest[:12]}"

    def record(self) -> dict:
        return {"kind": self.kind, "origin": self.origin, "commit": self.commit, "dirty": self.dirty,
                "digest": self.digest}

    def materialize(self, into: str) -> None:
        """Write the source files into the empty folder ``into``."""
        os.makedirs(into, exist_ok=True)
        if self.kind == "tarball":
            with tarfile.open(self.origin) as archive:
                archive.extractall(into, filter="data") if hasattr(tarfile, "data_filter") else archive.extractall(into)
        elif self.files is None:  # a clean commit of a checkout
            archive = subprocess.run(["git", "-C", self.origin, "archive", "--format=tar", self.commit],
                                     capture_output=True, timeout=600)
            if archive.returncode != 0:
                raise BadInput(f"git archive failed: {archive.stderr.decode(errors='replace').strip()[:200]}", self.origin)
            subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True, timeout=600)
        else:
            for rel in self.files:
                full = os.path.join(self.origin, rel)
                if os.path.isfile(full):
                    os.makedirs(os.path.dirname(os.path.join(into, rel)), exist_ok=True)
                    shutil.copy2(full, os.path.join(into, rel))


def resolve_source(path: str, commit: str | None = None) -> Source:
    """The :class:`Source` that ``path`` (and ``--commit``) name; BadInput when it names none."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        if commit:
            raise BadInput("--commit needs a git checkout, not a file", path)
        if not tarfile.is_tarfile(path):
            raise BadInput("not a tar archive (a git archive tarball, a source tree or a checkout)", path)
        recorded = tarball_commit(path)
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        return Source("tarball", path, commit=recorded, dirty=False if recorded else None, digest=digest)
    if not os.path.isdir(path):
        raise BadInput("no such file or directory", path)
    top = git.output(path, "rev-parse", "--show-toplevel", timeout=git.SLOW)
    if commit:
        if not top:
            raise BadInput("--commit needs a git checkout", path)
        full = git.output(top, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", timeout=git.SLOW)
        if not full:
            raise BadInput(f"{commit!r} names no commit of this checkout", top)
        return Source("commit", top, commit=full, dirty=False)
    if top and os.path.realpath(top) == os.path.realpath(path):
        head = git.output(top, "rev-parse", "HEAD", timeout=git.SLOW)
        status = git.output(top, "status", "--porcelain", "--untracked-files=no", timeout=git.SLOW)
        if head and status == "":
            return Source("checkout", top, commit=head, dirty=False)
        files = (git.output(top, "ls-files", "-z", timeout=git.SLOW) or "").split("\0")
        files = [f for f in files if f]
        return Source("checkout", top, commit=head, dirty=True, digest=tree_digest(top, files), files=files)
    files = _plain_files(path)
    return Source("tree", path, digest=tree_digest(path, files), files=files)


# -- the cache ------------------------------------------------------------------------------------

def build_key(source: Source, facts: dict, accelerator: str = "cuda", optimize: bool = True) -> str:
    """The folder name of a build: source, torch version, Python version (and a vendor
    other than the default, and ``-O0`` for a build compiled without optimisation)."""
    python = ".".join(facts["python"].split(".")[:2])
    vendor = "" if accelerator == "cuda" else f"-{accelerator}"
    return f"{source.ident}-torch{facts['torch']}-py{python}{vendor}{'' if optimize else '-O0'}"


def build_folder(source: Source, facts: dict, root: str | None = None, accelerator: str = "cuda",
                 optimize: bool = True) -> str:
    return os.path.join(root or cache_root(), "torch_fl", build_key(source, facts, accelerator, optimize))


def import_path(folder: str) -> str:
    """The folder to put on ``PYTHONPATH``: it holds the built ``torch_fl`` package only."""
    return os.path.join(folder, "site")


def finished(folder: str) -> dict | None:
    """The build record of a finished build in ``folder``, or None."""
    try:
        with open(os.path.join(folder, "src", "torch_fl", RECORD_NAME), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if record.get("schema") == SCHEMA else None


def find_build(source_path: str, python: str = sys.executable, commit: str | None = None,
               accelerator: str = "cuda", optimize: bool = True) -> str | None:
    """The import path of a finished build of ``source_path`` for ``python``, or None: no build."""
    folder = build_folder(resolve_source(source_path, commit), interpreter_facts(python), accelerator=accelerator,
                          optimize=optimize)
    return import_path(folder) if finished(folder) else None


@contextlib.contextmanager
def _locked(folder: str):
    """One build of a key at a time (CI and a test run may ask at once)."""
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- the recipe -----------------------------------------------------------------------------------

def _python_env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGOS_", "GEMS_", "FLAGGEMS_"))}
    env.update(extra)
    return env


def regenerate_bindings(src: str, python: str, log) -> str:
    """Run torch_fl's ``scripts/codegen_ops.py`` against this torch; keep the one file it empties."""
    script = os.path.join(src, "scripts", "codegen_ops.py")
    if not os.path.isfile(script):
        raise BadInput("this torch needs regenerated bindings, but the source has no scripts/codegen_ops.py", src)
    kept = os.path.join(src, KEPT_GENERATED)
    original = open(kept, "rb").read() if os.path.isfile(kept) else None
    done = subprocess.run([python, script], cwd=src, env=_python_env({}), stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=1800)
    if done.returncode != 0:
        raise BuildFailed(f"scripts/codegen_ops.py exited with {done.returncode}")
    if original is not None:
        with open(kept, "wb") as handle:
            handle.write(original)
    return f"regenerated the ATen bindings with scripts/codegen_ops.py, kept the shipped {os.path.basename(KEPT_GENERATED)}"


def apply_kineto_patch(src: str) -> str:
    """Apply the torch 2.13 kineto patch; say whether it applied, was there already, or did not fit."""
    def patch(*args: str) -> int:
        return subprocess.run(["patch", "-p0", "--batch", "--silent", *args, "-i", KINETO_PATCH], cwd=src,
                              capture_output=True, stdin=subprocess.DEVNULL).returncode
    if patch("-N", "--dry-run") == 0:
        if patch("-N") != 0:
            raise BuildFailed("the kineto patch applied in a dry run but not for real")
        return "applied the torch 2.13 kineto patch"
    if patch("-R", "--dry-run") == 0:
        return "the torch 2.13 kineto change is in the source already"
    return "the torch 2.13 kineto patch does not fit this source (left as is)"


def cuda_home() -> str | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if candidate and os.path.isdir(candidate):
            return candidate
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        if os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else None


def nvrtc13(facts: dict) -> str | None:
    """cu13's ``libnvrtc.so.13``: from the interpreter's nvidia wheels, else the toolkit."""
    candidates = []
    for site in facts.get("site") or []:
        candidates += [os.path.join(site, "nvidia", "cu13", "lib", "libnvrtc.so.13"),
                       os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.13")]
    home = cuda_home()
    if home:
        candidates += [os.path.join(home, sub, "libnvrtc.so.13") for sub in ("lib64", "lib")]
    return next((c for c in candidates if os.path.isfile(c)), None)


def fix_nvrtc_cache(src: str, library: str) -> bool:
    """Point ``CUDA_nvrtc_LIBRARY`` and ``CUDA_NVRTC_LIB`` in build/CMakeCache.txt at ``library``;
    True when something changed."""
    cache = os.path.join(src, "build", "CMakeCache.txt")
    if not os.path.isfile(cache):
        return False
    text = open(cache, encoding="utf-8", errors="replace").read()
    fixed = text
    for name in ("CUDA_nvrtc_LIBRARY", "CUDA_NVRTC_LIB"):
        line = re.compile(rf"^{name}:(\w+)=.*$", re.M)
        if line.search(fixed):
            fixed = line.sub(lambda m: f"{name}:{m.group(1)}={library}", fixed)
        else:
            fixed += f"\n{name}:FILEPATH={library}\n"
    if fixed == text:
        return False
    atomic_write_text(cache, fixed, scrub=False)  # a source file: written as patched
    return True


class BuildFailed(Exception):
    """The build of torch_fl itself failed (exit 1); the log says why."""


def _setup_py(src: str, python: str, jobs: int, accelerator: str, log) -> int:
    """One ``setup.py build_ext --inplace`` with recipe A/B's switches; its exit status."""
    env = _python_env({
        "ACCELERATOR": accelerator, "FLAGGEMS_KERNEL": "0", "FLAGGEMS_PYTHON": "1",
        "FLAGOS_SKIP_CUDA_ASSETS": "1", "MAX_JOBS": str(jobs), "FLAGOS_BUILD_JOBS": str(jobs),
    })
    if cuda_home():
        env["CUDA_HOME"] = cuda_home()
    return subprocess.run([python, "setup.py", "build_ext", "--inplace"], cwd=src, env=env, stdout=log,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode


def nvrtc_fix(src: str, facts: dict, log) -> str | None:
    """Recipe B's fix, when it applies and changes something: the step taken, else None."""
    library = nvrtc13(facts)
    if not library or not fix_nvrtc_cache(src, library):
        return None
    log.write(f"\n[torch_fl_build] pointed CUDA_nvrtc_LIBRARY and CUDA_NVRTC_LIB at {library}; again\n".encode())
    log.flush()
    return f"build/CMakeCache.txt: CUDA_nvrtc_LIBRARY, CUDA_NVRTC_LIB = {library}; built again"


#: What a build without optimisation changes: torch_fl's CMakeLists forces CMake's Release
#: build type, whose C++ flags (``-O3 -DNDEBUG``) come after any ``CXXFLAGS``; a cache entry
#: written before the first configure replaces them (asserts stay off, as in Release).
UNOPTIMIZED_CACHE = "CMAKE_CXX_FLAGS_RELEASE:STRING=-O0 -DNDEBUG\n"


def unoptimized(src: str) -> str:
    """Seed ``build/CMakeCache.txt`` so that the C++ compiles at ``-O0``: the step taken."""
    os.makedirs(os.path.join(src, "build"), exist_ok=True)
    atomic_write_text(os.path.join(src, "build", "CMakeCache.txt"), UNOPTIMIZED_CACHE, scrub=False)
    return "build/CMakeCache.txt: CMAKE_CXX_FLAGS_RELEASE = -O0 -DNDEBUG (--no-optimize)"


def compile_in_place(src: str, python: str, facts: dict, jobs: int, accelerator: str, log,
                     optimize: bool = True) -> list[str]:
    """``setup.py build_ext --inplace``; when it fails, the nvrtc fix and once again."""
    steps = [] if optimize else [unoptimized(src)]
    steps.append(f"setup.py build_ext --inplace (ACCELERATOR={accelerator}, FLAGGEMS_KERNEL=0, FLAGGEMS_PYTHON=1, "
                 f"CUDA_HOME={cuda_home()}, {jobs} jobs)")
    code = _setup_py(src, python, jobs, accelerator, log)
    if code != 0:
        fixed = nvrtc_fix(src, facts, log)
        if fixed:
            steps.append(fixed)
            code = _setup_py(src, python, jobs, accelerator, log)
    if code != 0:
        raise BuildFailed(f"setup.py build_ext exited with {code}")
    return steps


def torch_cuda_libs(version: str, root: str) -> str:
    """A folder holding :data:`TORCH_CUDA_LIBS` of PyPI's torch ``version`` (the Linux CUDA
    wheel): extracted once into the cache, the wheel deleted afterwards."""
    release = version.split("+")[0]
    folder = os.path.join(root, "torch-cuda-libs", release)
    if os.path.isfile(os.path.join(folder, "complete")):
        return folder
    with _locked(folder):
        if os.path.isfile(os.path.join(folder, "complete")):
            return folder
        wheel = os.environ.get("FLAGOS_DOCTOR_TORCH_CUDA_WHEEL")
        downloads = os.path.join(root, "downloads")
        if not wheel:
            found = glob.glob(os.path.join(downloads, f"torch-{release}-*manylinux*x86_64.whl"))
            wheel = found[0] if found else None
        if not wheel:
            os.makedirs(downloads, exist_ok=True)
            say(f"downloading PyPI's torch=={release} CUDA wheel for libc10_cuda.so and friends (once; about 0.5 GB)")
            done = _run([sys.executable, "-m", "pip", "download", "--isolated", "--no-deps", "--only-binary=:all:",
                         "--index-url", os.environ.get("FLAGOS_DOCTOR_TORCH_INDEX", TORCH_INDEX),
                         "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp",
                         "-d", downloads, f"torch=={release}"], timeout=3600)
            found = glob.glob(os.path.join(downloads, f"torch-{release}-*.whl"))
            if done.returncode != 0 or not found:
                tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                raise BuildFailed(f"could not download torch=={release} from PyPI ({tail}); "
                                  f"set FLAGOS_DOCTOR_TORCH_CUDA_WHEEL to a local copy of the wheel")
            wheel = found[0]
        os.makedirs(folder, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            for name in TORCH_CUDA_LIBS:
                try:
                    data = archive.read(f"torch/lib/{name}")
                except KeyError:
                    continue
                with open(os.path.join(folder, name + ".part"), "wb") as handle:
                    handle.write(data)
                os.replace(os.path.join(folder, name + ".part"), os.path.join(folder, name))
        atomic_write_text(os.path.join(folder, "complete"), f"{os.path.basename(wheel)}\n")
        if wheel.startswith(downloads + os.sep):
            os.remove(wheel)
    return folder


def bundle_torch_libraries(package: str, facts: dict, root: str) -> list[str]:
    """Put torch's CUDA libraries into ``torch_fl/lib`` when this torch lacks them (a CPU torch).

    ``libtorch_fl.so`` uses ``libc10_cuda.so``'s symbols without naming it as a dependency;
    torch_fl's own import preloads the CUDA libraries it finds in ``torch_fl/lib``, but only
    when ``libtorch_cuda.so`` is among them. So all of :data:`TORCH_CUDA_LIBS` go there, as
    setup.py's bundling would put them (hard links to the cache's copy where possible).
    """
    torch_lib = facts.get("torch_lib") or ""
    if os.path.isfile(os.path.join(torch_lib, "libc10_cuda.so")):
        return []  # a CUDA torch: its own libraries serve
    folder = torch_cuda_libs(facts["torch"], root)
    placed = []
    for name in TORCH_CUDA_LIBS:
        source = os.path.join(folder, name)
        if not os.path.isfile(source):
            continue
        target = os.path.join(package, "lib", name)
        if os.path.exists(target):
            os.remove(target)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
        placed.append(name)
    if "libc10_cuda.so" not in placed:
        raise BuildFailed(f"libc10_cuda.so is not in torch=={facts['torch']}'s CUDA wheel")
    return [f"put {', '.join(placed)} of PyPI's torch=={facts['torch'].split('+')[0]} (CUDA wheel) into torch_fl/lib"]


def check_import(site: str, python: str) -> str:
    """Import the build in a fresh interpreter; BuildFailed with the error's last line if it fails."""
    env = _python_env({"PYTHONPATH": site})
    # cwd=site: ``python -c`` puts the working directory first on sys.path, and a build
    # command runs in the source tree (``--build-cmd`` in a worktree), whose unbuilt
    # torch_fl/ would be imported instead of the build (seen on the H200: "No module
    # named 'torch_fl._C'").
    done = _run([python, "-c", "import torch_fl, sys; print(torch_fl.__file__)"], cwd=site, env=env, timeout=600)
    if done.returncode != 0:
        raise BuildFailed(f"import torch_fl failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout.strip().splitlines()[-1]


def setup_version(src: str, python: str) -> str | None:
    """The version torch_fl's setup.py gives this build (``setup.py --version``), or None."""
    try:
        done = _run([python, "setup.py", "--version"], cwd=src, env=_python_env({}), timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return lines[-1] if done.returncode == 0 and lines and re.match(r"^\d+(\.\d+)*", lines[-1]) else None


def compile_steps(src: str, python: str, facts: dict, jobs: int, accelerator: str, codegen: str,
                  log_path: str, optimize: bool = True) -> list[str]:
    """The bindings (regenerated where this torch needs it), the kineto patch, the compile;
    each said as it starts and relayed while it runs."""
    steps = []
    release = torch_release(facts["torch"])
    with open(log_path, "wb") as log:
        if codegen == "always" or (codegen == "auto" and release > SHIPPED_BINDINGS_UP_TO):
            with step("regenerating the ATen bindings (scripts/codegen_ops.py)", "seconds", log_path):
                steps.append(regenerate_bindings(src, python, log))
        if release >= (2, 13):
            steps.append(apply_kineto_patch(src))
        what = f"compiling torch_fl's C++ sources ({jobs} jobs{'' if optimize else ', -O0'})"
        with step(what, "3 to 7 min on 2 cores" if optimize else "2 to 4 min on 2 cores", log_path):
            steps += compile_in_place(src, python, facts, jobs, accelerator, log, optimize)
    return steps


def import_or_fix(src: str, site: str, python: str, facts: dict, jobs: int, accelerator: str, log_path: str) -> list[str]:
    """Import the build; where that fails, recipe B's nvrtc fix (the link problem may show only
    at import: libnvrtc.so.12 not found), a rebuild and the import again. The steps taken."""
    try:
        check_import(site, python)
        return []
    except BuildFailed:
        with open(log_path, "ab") as log:
            fixed = nvrtc_fix(src, facts, log)
            if not fixed or _setup_py(src, python, jobs, accelerator, log) != 0:
                raise
    check_import(site, python)
    return [fixed]


def build(source: Source, python: str, jobs: int, accelerator: str = "cuda", root: str | None = None,
          codegen: str = "auto", optimize: bool = True) -> tuple[str, dict, bool]:
    """Build ``source`` for ``python`` (or find it built); return (folder, record, reused).
    ``optimize=False`` compiles at ``-O0`` (:func:`unoptimized`), in a folder of its own."""
    root = root or cache_root()
    facts = interpreter_facts(python)
    folder = build_folder(source, facts, root, accelerator, optimize)
    record = finished(folder)
    if record:
        return folder, record, True
    with _locked(folder):
        record = finished(folder)
        if record:
            return folder, record, True
        shutil.rmtree(folder, ignore_errors=True)  # an unfinished earlier attempt
        src = os.path.join(folder, "src")
        source.materialize(src)
        if not os.path.isfile(os.path.join(src, "torch_fl", "__init__.py")) or not os.path.isfile(os.path.join(src, "setup.py")):
            shutil.rmtree(folder, ignore_errors=True)
            raise BadInput("not a torch_fl source (no setup.py and torch_fl/__init__.py)", source.origin)
        say(f"building torch_fl from {source.origin} in {folder} (log: {folder}/build.log)")
        steps = compile_steps(src, python, facts, jobs, accelerator, codegen, os.path.join(folder, "build.log"), optimize)
        package = os.path.join(src, "torch_fl")
        with step("torch's CUDA libraries for a CPU torch", "under a minute; the first time, a 0.5 GB download too"):
            steps += bundle_torch_libraries(package, facts, root)
        site = import_path(folder)
        os.makedirs(site, exist_ok=True)
        if not os.path.islink(os.path.join(site, "torch_fl")):
            os.symlink(os.path.join("..", "src", "torch_fl"), os.path.join(site, "torch_fl"))
        with step("checking that the build imports", "under a minute"):
            steps += import_or_fix(src, site, python, facts, jobs, accelerator, os.path.join(folder, "build.log"))
        record = {
            "schema": SCHEMA,
            "version": setup_version(src, python),
            "source": source.record(),
            "torch": facts["torch"],
            "torch_cuda": facts.get("torch_cuda"),
            "python": facts["python"],
            "python_executable": facts["executable"],
            "accelerator": accelerator,
            "optimized": optimize,
            "steps": steps,
            "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "import_path": site,
        }
        atomic_write_text(os.path.join(package, RECORD_NAME), json.dumps(record, indent=2) + "\n")
        return folder, record, False


def result_line(folder: str, record: dict, reused: bool) -> str:
    """The one output line: what, where, and how to import it."""
    source = record["source"]
    if source.get("commit"):
        what = source["commit"][:12] + (" with uncommitted changes" if source.get("dirty") else "")
    else:
        what = f"source digest {source['digest'][:12]} (no commit recorded)"
    verb = "found built" if reused else "built"
    # the folder's own import path, not the record's: a cache moved or restored elsewhere
    # (a copied HOME, CI's cache) still records where it was built
    level = ", -O0" if record.get("optimized") is False else ""  # a record from before the field: optimised
    return (f"torch_fl {what} (torch {record['torch']}, Python {record['python']}{level}) {verb} in {folder}: "
            f"PYTHONPATH={import_path(folder)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flagos_doctor.torch_fl_build", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", nargs="?", default=".",
                        help="torch_fl source tree, git checkout or git-archive tarball (default: .)")
    parser.add_argument("--commit", help="build this commit of the checkout SOURCE (default: its working tree)")
    parser.add_argument("--python", default=sys.executable, help="interpreter whose torch to build for")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs")
    parser.add_argument("--accelerator", default="cuda", help="torch_fl's ACCELERATOR switch (default: cuda)")
    parser.add_argument("--codegen", choices=("auto", "always", "never"), default="auto",
                        help=f"regenerate the ATen bindings (auto: for torch newer than {'.'.join(map(str, SHIPPED_BINDINGS_UP_TO))})")
    parser.add_argument("--cache", help="cache folder (default: $FLAGOS_DOCTOR_CACHE or ~/.cache/flagos-doctor)")
    parser.add_argument("--no-optimize", dest="optimize", action="store_false",
                        help="compile the C++ at -O0, not Release's -O3 (a third less compile time; scripts/run-tests "
                             "builds so: the tests never time torch_fl's own C++); a build folder of its own")
    args = parser.parse_args(argv)
    try:
        source = resolve_source(args.source, args.commit)
        folder, record, reused = build(source, args.python, max(1, args.jobs), args.accelerator,
                                       os.path.abspath(args.cache) if args.cache else None, args.codegen, args.optimize)
    except BadInput as exc:
        print(f"torch_fl_build: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BuildFailed as exc:
        log = os.path.join(build_folder(source, interpreter_facts(args.python),
                                        os.path.abspath(args.cache) if args.cache else None, args.accelerator,
                                        args.optimize), "build.log")
        print(f"torch_fl_build: build failed: {exc} (log: {log})", file=sys.stderr)
        return 1
    print(result_line(folder, record, reused))
    return 0


if __name__ == "__main__":
    sys.exit(main())
