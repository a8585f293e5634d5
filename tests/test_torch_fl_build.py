"""``python -m flagos_doctor.torch_fl_build``: what it builds from, where the build goes, and
the recipe's steps, on real git checkouts and tarballs; the real build itself (made by
``.ci/run``) is found again without building."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import REPO_ROOT, TORCH_FL_BUILD_ARGS, TORCH_FL_TARBALL, real_torch_fl
from flagos_doctor.compare.build import announced_import_path
from flagos_doctor.errors import BadInput
from flagos_doctor.torch_fl_build import (
    RECORD_NAME, apply_kineto_patch, build_key, check_import, fix_nvrtc_cache, resolve_source, tarball_commit,
)

FACTS = {"python": "3.11.7", "torch": "2.13.0+cpu"}


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def small_source(root):
    """A git checkout shaped like torch_fl's (setup.py, torch_fl/__init__.py), two commits."""
    root.mkdir()
    (root / "torch_fl").mkdir()
    (root / "setup.py").write_text("raise SystemExit('not for building here')\n")
    (root / "torch_fl" / "__init__.py").write_text("VALUE = 1\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    first = git(root, "rev-parse", "HEAD")
    (root / "torch_fl" / "__init__.py").write_text("VALUE = 2\n")
    git(root, "commit", "-q", "-am", "two")
    return first, git(root, "rev-parse", "HEAD")


def test_a_git_archive_tarball_gives_its_commit(tmp_path):
    first, _ = small_source(tmp_path / "src")
    tarball = tmp_path / "src.tar.gz"
    subprocess.run(["git", "-C", str(tmp_path / "src"), "archive", "--format=tar.gz", "-o", str(tarball), first], check=True)
    assert tarball_commit(str(tarball)) == first
    source = resolve_source(str(tarball))
    assert (source.kind, source.commit, source.dirty) == ("tarball", first, False)
    assert build_key(source, FACTS) == f"{first[:12]}-torch2.13.0+cpu-py3.11"
    source.materialize(str(tmp_path / "out"))
    assert (tmp_path / "out" / "torch_fl" / "__init__.py").read_text() == "VALUE = 1\n"


def test_the_tarballs_commit_is_read_wherever_the_clone_lives(tmp_path, monkeypatch):
    # scripts/run-tests builds from the clone's folder: a clone at a long path is a user's.
    first, _ = small_source(tmp_path / "src")
    tarball = tmp_path / "src.tar.gz"
    subprocess.run(["git", "-C", str(tmp_path / "src"), "archive", "--format=tar.gz", "-o", str(tarball), first], check=True)
    deep = tmp_path / ("a-long-folder-name-" * 12)
    deep.mkdir()
    monkeypatch.chdir(deep)
    assert len(os.getcwd()) > 200 and tarball_commit(str(tarball)) == first


def test_a_plain_tarball_is_keyed_by_its_digest(tmp_path):
    (tmp_path / "tree" / "torch_fl").mkdir(parents=True)
    (tmp_path / "tree" / "torch_fl" / "__init__.py").write_text("")
    tarball = tmp_path / "plain.tar"
    with tarfile.open(tarball, "w") as archive:
        archive.add(tmp_path / "tree", arcname=".")
    source = resolve_source(str(tarball))
    assert source.commit is None and source.ident.startswith("src-")


def test_a_checkout_at_a_commit_builds_that_commit(tmp_path):
    first, second = small_source(tmp_path / "src")
    source = resolve_source(str(tmp_path / "src"), first[:7])
    assert (source.kind, source.commit, source.dirty) == ("commit", first, False)
    source.materialize(str(tmp_path / "out"))
    assert (tmp_path / "out" / "torch_fl" / "__init__.py").read_text() == "VALUE = 1\n"
    with pytest.raises(BadInput):
        resolve_source(str(tmp_path / "src"), "no-such-ref")


def test_a_checkout_as_it_stands_is_clean_or_dirty(tmp_path):
    _, second = small_source(tmp_path / "src")
    clean = resolve_source(str(tmp_path / "src"))
    assert (clean.kind, clean.commit, clean.dirty, clean.ident) == ("checkout", second, False, second[:12])
    (tmp_path / "src" / "torch_fl" / "__init__.py").write_text("VALUE = 3\n")
    dirty = resolve_source(str(tmp_path / "src"))
    assert dirty.commit == second and dirty.dirty is True and dirty.ident.startswith("src-")
    dirty.materialize(str(tmp_path / "out"))
    assert (tmp_path / "out" / "torch_fl" / "__init__.py").read_text() == "VALUE = 3\n"
    (tmp_path / "src" / "torch_fl" / "__init__.py").write_text("VALUE = 4\n")
    assert resolve_source(str(tmp_path / "src")).digest != dirty.digest


def test_a_plain_tree_skips_build_output(tmp_path):
    tree = tmp_path / "tree"
    (tree / "torch_fl").mkdir(parents=True)
    (tree / "torch_fl" / "__init__.py").write_text("")
    before = resolve_source(str(tree))
    (tree / "build").mkdir()
    (tree / "build" / "CMakeCache.txt").write_text("x")
    (tree / "torch_fl" / "_C.so").write_bytes(b"\x7fELF")
    after = resolve_source(str(tree))
    assert before.kind == "tree" and before.commit is None and before.digest == after.digest


def test_not_a_torch_fl_source_exits_2_with_one_line(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "README").write_text("no setup.py here\n")
    done = subprocess.run([sys.executable, "-m", "flagos_doctor.torch_fl_build", str(tree), "--cache", str(tmp_path / "cache")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"torch_fl_build: error: {tree}: not a torch_fl source (no setup.py and torch_fl/__init__.py)"]


def test_nvrtc_entries_are_pointed_at_cu13(tmp_path):
    cache = tmp_path / "build" / "CMakeCache.txt"
    cache.parent.mkdir()
    cache.write_text("CMAKE_BUILD_TYPE:STRING=Release\nCUDA_nvrtc_LIBRARY:FILEPATH=CUDA_nvrtc_LIBRARY-NOTFOUND\n")
    assert fix_nvrtc_cache(str(tmp_path), "/site/nvidia/cu13/lib/libnvrtc.so.13")
    text = cache.read_text()
    assert "CUDA_nvrtc_LIBRARY:FILEPATH=/site/nvidia/cu13/lib/libnvrtc.so.13\n" in text
    assert "CUDA_NVRTC_LIB:FILEPATH=/site/nvidia/cu13/lib/libnvrtc.so.13\n" in text
    assert "CMAKE_BUILD_TYPE:STRING=Release" in text
    assert not fix_nvrtc_cache(str(tmp_path), "/site/nvidia/cu13/lib/libnvrtc.so.13")  # nothing left to change


def test_the_kineto_patch_fits_torch_fls_source_once(tmp_path):
    if not os.path.isfile(TORCH_FL_TARBALL):
        pytest.skip(f"no {TORCH_FL_TARBALL}")
    resolve_source(TORCH_FL_TARBALL).materialize(str(tmp_path / "src"))
    assert apply_kineto_patch(str(tmp_path / "src")) == "applied the torch 2.13 kineto patch"
    assert "[tfl-local patch]" in (tmp_path / "src" / "csrc" / "profiler" / "flagos_kineto_profiler.cc").read_text()
    assert apply_kineto_patch(str(tmp_path / "src")) == "the torch 2.13 kineto change is in the source already"


def test_the_real_build_is_found_again_without_building():
    site = real_torch_fl()
    done = subprocess.run([sys.executable, "-m", "flagos_doctor.torch_fl_build", *TORCH_FL_BUILD_ARGS],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith("torch_fl 1adbc97478fb (torch ") and ", -O0) found built in " in line
    assert line.endswith(f": PYTHONPATH={site}")
    assert announced_import_path(f"compiling...\n{line}\n") == site
    assert "building" not in done.stderr


def test_the_tests_build_compiled_every_source_at_O0_in_a_folder_of_its_own():
    """``--no-optimize`` (the tests' build): CMake's Release flags replaced before the first
    configure, so every C++ compile of the real build ran at -O0 and none at -O3; keyed
    apart from an optimised build of the same source, and recorded."""
    site = real_torch_fl()
    built = os.path.dirname(site)
    with open(os.path.join(built, "src", "build", "compile_commands.json"), encoding="utf-8") as handle:
        compiles = [entry["command"].split() for entry in json.load(handle)]
    assert len(compiles) > 20 and all("-O0" in argv and "-O3" not in argv for argv in compiles)
    with open(os.path.join(built, "src", "torch_fl", RECORD_NAME), encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["optimized"] is False and any("-O0" in done for done in record["steps"])
    source = resolve_source(TORCH_FL_TARBALL)
    assert os.path.basename(built) == build_key(source, FACTS | {"torch": record["torch"], "python": record["python"]},
                                                optimize=False)
    assert build_key(source, FACTS, optimize=False) == build_key(source, FACTS) + "-O0"


def test_a_build_found_in_a_cache_moved_elsewhere_is_imported_from_where_it_is_now(tmp_path):
    """A cache copied to another HOME (or restored by CI to another path) keeps the record
    written where it was built: the line names the folder it was found in (it named the old
    one, gone or not)."""
    site = real_torch_fl()
    built = os.path.dirname(site)
    moved = tmp_path / "cache" / "torch_fl" / os.path.basename(built)
    (moved / "src" / "torch_fl").mkdir(parents=True)
    with open(os.path.join(built, "src", "torch_fl", RECORD_NAME), encoding="utf-8") as handle:
        record = json.load(handle)
    (moved / "src" / "torch_fl" / RECORD_NAME).write_text(json.dumps(record))
    done = subprocess.run([sys.executable, "-m", "flagos_doctor.torch_fl_build", "--cache", str(tmp_path / "cache"),
                           *TORCH_FL_BUILD_ARGS], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert f" found built in {moved}: PYTHONPATH={moved / 'site'}" in line and line.endswith(str(moved / "site"))


def test_a_build_command_line_names_its_import_path(tmp_path):
    assert announced_import_path(f"x\nbuilt: PYTHONPATH={tmp_path}\n\n") == str(tmp_path)
    assert announced_import_path(f"PYTHONPATH={tmp_path}\nmore output\n") is None  # only the last line
    assert announced_import_path(f"PYTHONPATH={tmp_path}/missing\n") is None


def test_compare_imports_what_the_build_command_announces_ahead_of_the_worktree(tmp_path, cli):
    """The worktree holds an unbuilt stack that cannot be imported; the build command puts the
    built one outside the worktree and names it on its last line, as torch_fl_build does."""
    from test_compare_survey import BROKEN, GOOD, OPS, commit, git
    from flagos_doctor.stacks.demo import DEMO_CONF

    unbuilt = "raise ImportError('not built: the build command makes the importable copy')\n"
    repo = tmp_path / "stack-repo"
    repo.mkdir()
    git(repo, "init", "-q")
    good = commit(repo, unbuilt + GOOD, "demo variant")
    broken = commit(repo, unbuilt + BROKEN, "neg: off by one")
    build = ("mkdir -p ../built && grep -v '^raise ImportError' variant_stack.py > ../built/variant_stack.py "
             "&& echo \"variant_stack built: PYTHONPATH=$(cd ../built && pwd)\"")
    done = cli("survey", "--compare", good[:7], broken[:7], "--repo", str(repo), "--build-cmd", build,
               "--stack", "variant_stack", "--conf", DEMO_CONF, "--ops", OPS, "--store", str(tmp_path / "store"),
               "--json", str(tmp_path / "cmp.json"), cwd=str(tmp_path))
    assert done.returncode == 1, done.stderr
    assert "importing the build from " in done.stderr
    import json

    comparison = json.loads((tmp_path / "cmp.json").read_text())
    assert [(t["overload"], t["kind"]) for t in comparison["transitions"]] == [("neg", "regression")]


def test_the_nvrtc_fix_applies_where_the_interpreter_has_cu13s_nvrtc(tmp_path):
    from flagos_doctor.torch_fl_build import nvrtc_fix

    site = tmp_path / "site-packages"
    library = site / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF")
    src = tmp_path / "src"
    (src / "build").mkdir(parents=True)
    (src / "build" / "CMakeCache.txt").write_text("CUDA_nvrtc_LIBRARY:FILEPATH=/usr/lib/libnvrtc.so.12\n")
    with open(tmp_path / "build.log", "wb") as log:
        assert nvrtc_fix(str(src), {"site": [str(tmp_path / "elsewhere")]}, log) is None or cuda13_toolkit()
        step = nvrtc_fix(str(src), {"site": [str(site)]}, log)
    assert step == f"build/CMakeCache.txt: CUDA_nvrtc_LIBRARY, CUDA_NVRTC_LIB = {library}; built again"
    assert f"CUDA_nvrtc_LIBRARY:FILEPATH={library}\n" in (src / "build" / "CMakeCache.txt").read_text()
    assert str(library) in (tmp_path / "build.log").read_text()


def cuda13_toolkit() -> bool:
    """This machine's CUDA toolkit has its own libnvrtc.so.13 (then the fix finds that one)."""
    from flagos_doctor.torch_fl_build import cuda_home

    home = cuda_home()
    return bool(home) and any(os.path.isfile(os.path.join(home, d, "libnvrtc.so.13")) for d in ("lib64", "lib"))


def test_the_import_check_imports_the_build_not_the_unbuilt_tree_it_runs_in(tmp_path, monkeypatch):
    # A build command runs in the source tree (survey --compare --build-cmd, in a worktree):
    # the unbuilt torch_fl/ there must not shadow the build being checked.
    site = tmp_path / "site" / "torch_fl"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    tree = tmp_path / "tree" / "torch_fl"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("from torch_fl import _C  # not built here\n")
    monkeypatch.chdir(tmp_path / "tree")
    found = check_import(str(tmp_path / "site"), sys.executable)
    assert found == str(site / "__init__.py")


def test_each_step_is_said_with_its_usual_time_and_a_failed_compile_names_its_log(tmp_path):
    # A source shaped like torch_fl's whose setup.py fails: the steps said before it, then the failure.
    small_source(tmp_path / "src")
    done = subprocess.run([sys.executable, "-m", "flagos_doctor.torch_fl_build", str(tmp_path / "src"), "--codegen", "never",
                           "--jobs", "3", "--cache", str(tmp_path / "cache")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    said = done.stderr.splitlines()
    assert said[0].startswith("torch_fl_build: building torch_fl from ")
    assert said[1] == "torch_fl_build: compiling torch_fl's C++ sources (3 jobs) (usually 3 to 7 min on 2 cores)"
    assert said[-1].startswith("torch_fl_build: build failed: setup.py build_ext exited with 1 (log: ")


def test_a_long_step_is_relayed_with_the_logs_last_progress_line(tmp_path, capfd, monkeypatch):
    import time

    from flagos_doctor import torch_fl_build

    monkeypatch.setattr(torch_fl_build, "RELAY_SECONDS", 0.05)
    log = tmp_path / "build.log"
    log.write_text("-- Configuring done\n[ 12%] Building CXX object a.o\n[ 45%] Building CXX object b.o\nwarning: x\n")
    said = ""
    with torch_fl_build.step("compiling", "about 7 min", str(log)):
        deadline = time.monotonic() + 120  # waits for the relay however busy the machine; never that long
        while "so far" not in said and time.monotonic() < deadline:
            time.sleep(0.05)
            said += capfd.readouterr().err
    said += capfd.readouterr().err
    lines = said.splitlines()
    assert lines[0] == "torch_fl_build: compiling (usually about 7 min)"
    relayed = [line for line in lines if "so far" in line]
    assert relayed and relayed[0].endswith(" so far (usually about 7 min); the log: [ 45%] Building CXX object b.o")
    assert lines[-1].startswith("torch_fl_build: compiling: done in ")
    assert torch_fl_build.last_progress(str(tmp_path / "missing.log")) is None
    log.write_text("[3/80] Building CXX object c.o\n")
    assert torch_fl_build.last_progress(str(log)) == "[3/80] Building CXX object c.o"
