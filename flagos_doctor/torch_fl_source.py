"""Where an installed torch_fl came from: its commit, dirty flag and compiled extension.

The package records no commit itself (TORCH_FL_FACTS: version 0.1.0 plus a local segment).
What does, in this order of trust: PEP 610's ``direct_url.json`` in its dist-info (a VCS
install's ``commit_id``; an editable install's checkout folder); the record that
:mod:`flagos_doctor.torch_fl_build` leaves in a build (a tarball's or a checkout's commit,
the dirty flag, or only a source digest); the git checkout holding the package, but only
when that checkout tracks the package at that path (a plain folder that happens to sit
inside an unrelated repository says nothing about torch_fl). The md5 of the ``_C``
extension tells two builds of one commit apart. When nothing vouches for a commit,
``commit`` is None and ``commit_source`` says plainly that it is unknown and why; the user
may name it (``--torch-fl-commit``, :func:`with_commit`). Used in child processes by the
survey's provenance and the report's environment; standard library only.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

from flagos_doctor import git

#: The record a flagos-doctor build leaves in the package (torch_fl_build.RECORD_NAME).
BUILD_RECORD = "flagos_doctor_build.json"


def checkout_of(folder: str) -> dict:
    """Commit, branch and dirty flag of the git checkout holding ``folder``; {} if none, and
    ``{"not_tracked": top}`` when a checkout holds the folder without tracking its
    ``__init__.py`` (an unrelated repository around a plain folder vouches for nothing)."""
    top = git.output(folder, "rev-parse", "--show-toplevel")
    if not top:
        return {}
    marker = os.path.join(folder, "__init__.py") if os.path.isdir(folder) else folder
    if git.output(top, "ls-files", "--error-unmatch", "--", os.path.relpath(os.path.realpath(marker), os.path.realpath(top))) is None:
        return {"not_tracked": top}
    status = git.output(top, "status", "--porcelain", "--untracked-files=no")
    return {
        "checkout": top,
        "commit": git.output(top, "rev-parse", "HEAD"),
        "branch": git.output(top, "rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": None if status is None else bool(status),
    }


def file_md5(path: str) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_details(package_dir: str | None, dist) -> dict:
    """``direct_url``, ``source``, ``commit``, ``branch``, ``dirty``, ``commit_source``,
    ``checkout``, ``extension`` and ``extension_md5`` of the torch_fl at ``package_dir``
    (its distribution ``dist``, or None)."""
    details: dict = {"direct_url": None, "source": None, "commit": None, "dirty": None,
                     "extension": None, "extension_md5": None}
    direct = None
    if dist is not None:
        try:
            text = dist.read_text("direct_url.json")
            direct = json.loads(text) if text else None
        except (OSError, ValueError):
            direct = None
    details["direct_url"] = direct
    editable_folder = None
    if direct:
        details["source"] = direct.get("url")
        vcs = direct.get("vcs_info") or {}
        if vcs.get("commit_id"):
            details.update(commit=vcs["commit_id"], branch=vcs.get("requested_revision"), dirty=False,
                           commit_source="direct_url.json vcs_info")
        url = direct.get("url", "")
        if url.startswith("file://") and (direct.get("dir_info") or {}).get("editable"):
            editable_folder = url[len("file://"):]
    if package_dir and not details["commit"]:
        recorded = _from_build_record(package_dir)
        if dist is None and recorded.get("build", {}).get("version"):
            details["version"] = recorded["build"]["version"]  # no dist-info: the build says
        details.update(recorded)
    # An editable install, or a checkout on PYTHONPATH: ask git about the package folder.
    unknown = []
    for folder in (os.path.join(editable_folder, "torch_fl") if editable_folder else None, package_dir):
        if folder and os.path.isdir(folder) and not details["commit"]:
            found = checkout_of(folder)
            if found.get("commit"):
                details.update(found, commit_source=f"git checkout {found['checkout']}")
            elif found.get("not_tracked"):
                unknown.append(f"the git checkout {found['not_tracked']} around it does not track it")
    if not details["commit"] and not details.get("commit_source"):
        if not unknown:
            unknown.append("not in a git checkout")
        reasons = ["no direct_url.json commit", "no flagos-doctor build record", *unknown]
        details["commit_source"] = f"unknown ({'; '.join(reasons)})"
    if package_dir and os.path.isdir(package_dir):
        extensions = sorted(glob.glob(os.path.join(package_dir, "_C*.so")) + glob.glob(os.path.join(package_dir, "_C*.pyd")))
        if extensions:
            details["extension"] = os.path.basename(extensions[0])
            details["extension_md5"] = file_md5(extensions[0])
    return details


def _from_build_record(package_dir: str) -> dict:
    """What a flagos-doctor build recorded about its source; {} when there is no record."""
    try:
        with open(os.path.join(package_dir, BUILD_RECORD), encoding="utf-8") as handle:
            record = json.load(handle)
        source = record["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    found = {"build": {"version": record.get("version"), "source": source, "torch": record.get("torch"), "python": record.get("python"),
                       "steps": record.get("steps"), "built": record.get("built")}}
    where = f"{source.get('kind')} {source.get('origin')}"
    if source.get("commit"):
        found.update(commit=source["commit"], dirty=source.get("dirty"),
                     commit_source=f"flagos-doctor build record ({where})")
    else:
        found["commit_source"] = (f"unknown (built by flagos-doctor from {where}, which names no commit; "
                                  f"source digest {str(source.get('digest'))[:12]})")
    return found


def with_commit(torch_fl: dict | None, commit: str | None) -> dict | None:
    """``torch_fl`` provenance with the commit the user named (``--torch-fl-commit``) in force.

    For a build that records nothing (the ready H200 build). What the build itself said, if
    it disagrees, stays in ``commit_found``; the dirty flag is unknown unless it said so.
    """
    if not commit or torch_fl is None:
        return torch_fl
    out = dict(torch_fl)
    found = out.get("commit")
    if found and (found.startswith(commit) or commit.startswith(found)):
        return out  # the build vouches for the same commit already
    if found:
        out["commit_found"], out["commit_found_source"] = found, out.get("commit_source")
    out.update(commit=commit, dirty=None, branch=None, commit_source="given by the user (--torch-fl-commit)")
    return out
