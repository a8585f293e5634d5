"""Where an installed torch_fl came from: its commit, dirty flag and compiled extension.

The package records no commit itself (TORCH_FL_FACTS: version 0.1.0 plus a local segment).
What does: PEP 610's ``direct_url.json`` in its dist-info (a VCS install's ``commit_id``; an
editable install's checkout folder), the git checkout holding the package, and the md5 of
its ``_C`` extension, which tells two builds of one commit apart. Used in child processes
by the survey's provenance and the report's environment; standard library only.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess

#: Seconds for one git command: a report or a survey must not hang on a slow filesystem.
GIT_TIMEOUT = 10


def _git(folder: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checkout_of(folder: str) -> dict:
    """Commit, branch and dirty flag of the git checkout holding ``folder``; {} if none."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if not top:
        return {}
    status = _git(top, "status", "--porcelain", "--untracked-files=no")
    return {
        "checkout": top,
        "commit": _git(top, "rev-parse", "HEAD"),
        "branch": _git(top, "rev-parse", "--abbrev-ref", "HEAD"),
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
    # An editable install, or a checkout on PYTHONPATH: ask git about the folder itself.
    for folder in (editable_folder, package_dir):
        if folder and os.path.isdir(folder) and not details["commit"]:
            found = checkout_of(folder)
            if found.get("commit"):
                details.update(found, commit_source=f"git checkout {found['checkout']}")
    if package_dir and os.path.isdir(package_dir):
        extensions = sorted(glob.glob(os.path.join(package_dir, "_C*.so")) + glob.glob(os.path.join(package_dir, "_C*.pyd")))
        if extensions:
            details["extension"] = os.path.basename(extensions[0])
            details["extension_md5"] = file_md5(extensions[0])
    return details
