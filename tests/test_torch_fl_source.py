"""Where torch_fl came from, for the survey's provenance and the report: a real git
checkout, a real PEP 610 direct_url.json, a compiled-extension stand-in."""

from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import metadata

from flagos_doctor.torch_fl_source import BUILD_RECORD, source_details, with_commit


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _checkout(tmp_path):
    repo = tmp_path / "Torch-FL"
    package = repo / "torch_fl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0.1.0'\n")
    extension = package / "_C.cpython-311-x86_64-linux-gnu.so"
    extension.write_bytes(b"\x7fELF not really an extension")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", "torch_fl/__init__.py")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one")
    return repo, package, extension


def _dist(tmp_path, direct_url: dict):
    """A real installed distribution (a dist-info folder) with a PEP 610 record."""
    site = tmp_path / "site"
    info = site / "torch_fl-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_fl\nVersion: 0.1.0\n")
    (info / "direct_url.json").write_text(json.dumps(direct_url))
    (dist,) = list(metadata.distributions(path=[str(site)]))
    return dist


def test_editable_install_gives_the_checkouts_commit_dirty_flag_and_extension_md5(tmp_path):
    repo, package, extension = _checkout(tmp_path)
    dist = _dist(tmp_path, {"url": f"file://{repo}", "dir_info": {"editable": True}})
    details = source_details(str(package), dist)
    assert details["commit"] == _git(repo, "rev-parse", "HEAD")
    assert details["branch"] == "main" and details["dirty"] is False
    assert details["checkout"] == str(repo) and details["source"] == f"file://{repo}"
    assert details["extension"] == extension.name
    assert details["extension_md5"] == hashlib.md5(extension.read_bytes()).hexdigest()
    (package / "__init__.py").write_text("__version__ = '0.1.1'\n")  # an uncommitted change
    assert source_details(str(package), dist)["dirty"] is True


def test_vcs_install_keeps_the_recorded_commit(tmp_path):
    _, package, _ = _checkout(tmp_path)
    commit = "1adbc97478fb3f40dffdbd19232346727a6c0953"
    dist = _dist(tmp_path, {"url": "https://github.com/flagos-ai/Torch-FL", "vcs_info": {"vcs": "git", "commit_id": commit}})
    details = source_details(str(package), dist)
    assert details["commit"] == commit and details["commit_source"] == "direct_url.json vcs_info"


def test_no_checkout_and_no_record_says_nothing_it_does_not_know(tmp_path):
    package = tmp_path / "torch_fl"
    package.mkdir()
    details = source_details(str(package), None)
    assert details["commit"] is None and details["dirty"] is None and details["extension_md5"] is None
    assert details["commit_source"].startswith("unknown (") and "not in a git checkout" in details["commit_source"]


def test_a_plain_folder_inside_an_unrelated_checkout_vouches_for_nothing(tmp_path):
    """Seen on the H200: torch_fl unpacked into a folder of another repository was given
    that repository's commit, branch and dirty flag."""
    repo = tmp_path / "unrelated"
    repo.mkdir()
    (repo / "README").write_text("another project\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "add", "README")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one")
    package = repo / "unpacked" / "torch_fl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    details = source_details(str(package), None)
    assert details["commit"] is None and details["dirty"] is None and "branch" not in details
    assert f"the git checkout {repo} around it does not track it" in details["commit_source"]


def test_the_build_record_names_the_tarball_commit(tmp_path):
    package = tmp_path / "build" / "torch_fl"
    package.mkdir(parents=True)
    commit = "1adbc97478fb3f40dffdbd19232346727a6c0953"
    (package / BUILD_RECORD).write_text(json.dumps({
        "schema": "flagos-doctor.torch-fl-build/1", "version": "0.1.0", "torch": "2.13.0+cpu", "python": "3.11.7",
        "source": {"kind": "tarball", "origin": "/data/Torch-FL.tar.gz", "commit": commit, "dirty": False, "digest": "ab" * 32},
    }))
    details = source_details(str(package), None)
    assert details["commit"] == commit and details["dirty"] is False and details["version"] == "0.1.0"
    assert details["commit_source"] == "flagos-doctor build record (tarball /data/Torch-FL.tar.gz)"


def test_a_build_of_a_plain_tree_says_its_commit_is_unknown(tmp_path):
    package = tmp_path / "build" / "torch_fl"
    package.mkdir(parents=True)
    (package / BUILD_RECORD).write_text(json.dumps({
        "schema": "flagos-doctor.torch-fl-build/1",
        "source": {"kind": "tree", "origin": "/src/Torch-FL", "commit": None, "dirty": None, "digest": "cd" * 32},
    }))
    details = source_details(str(package), None)
    assert details["commit"] is None
    assert details["commit_source"].startswith("unknown (built by flagos-doctor from tree /src/Torch-FL")


def test_the_users_commit_is_said_as_given_and_what_was_found_is_kept(tmp_path):
    _, package, _ = _checkout(tmp_path)
    found = source_details(str(package), None)
    given = with_commit(found, "5e0f2aa")
    assert given["commit"] == "5e0f2aa" and given["commit_source"] == "given by the user (--torch-fl-commit)"
    assert given["commit_found"] == found["commit"] and given["dirty"] is None
    assert with_commit(found, found["commit"][:7]) == found  # the same commit: nothing to override
    bare = source_details(str(tmp_path / "nowhere"), None)
    assert with_commit(bare, "1adbc97")["commit"] == "1adbc97" and "commit_found" not in with_commit(bare, "1adbc97")
