"""The arms of a comparison (``survey --compare A B``, ``suite --compare A B``), and how to find them.

An arm is made from one of three sources (:class:`ArmSource`), tried in this order for
each reference the user gives:

1. ``file``: a path to a file the kind reads (a survey results file; JUnit XML or a filed
   suite run);
2. with ``--repo``: anything git resolves to a commit there (a prefix, a branch, a tag;
   a branch named as the base, A, stands for its merge base with B, as a pull request's
   base does: :func:`merge_base`).
   The run filed in the store under that commit is used (``store``; the kind says which
   filed run fits: :meth:`ArmKind.filed`); missing, the commit is checked out in a
   temporary worktree (:mod:`.worktree`), ``--build-cmd`` is run there, the kind makes
   its run (a survey, the tests), and the run is filed in the store (``built``);
3. a key prefix in the results store (a commit as git abbreviates it, ``flag_gems-5.0.2``):
   ``store``.

The kinds differ only in what they read, make and file (:class:`ArmKind`); the flow, the
commit resolution, the worktree and the log of an arm's commands are here, once. So is
``--fail-on``: both commands fail on a regression, on any difference, or never.
"""

from __future__ import annotations

import contextlib
import enum
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable

from flagos_doctor import files, git
from flagos_doctor.arms import worktree
from flagos_doctor.errors import EXIT_FINDING, EXIT_OK, BadInput
from flagos_doctor.store import Store


class ArmSource(str, enum.Enum):
    """What an arm was made from (written into the comparison documents as its value)."""

    FILE = "file"  # a file the user named
    STORE = "store"  # a run filed in the results store
    BUILT = "built"  # a commit built and run just now (and filed in the store)


@dataclass
class Arm:
    """One side of a comparison."""

    ref: str  # what the user typed
    source: ArmSource
    path: str  # the file read: the user's, or the run filed in the store
    content: Any  # what the kind read from it (a survey results document, a suite run)
    commit: str | None = None  # the full commit, for an arm resolved through --repo


class ArmKind:
    """What one kind of arm reads, makes and files; :func:`resolve` does the rest."""

    #: The store's folder for this kind (``survey``, ``suite``).
    store_kind: str = ""

    def load(self, path: str) -> Any:
        """The content of a file of this kind; BadInput naming the file when unusable."""
        raise NotImplementedError

    def filed(self, store: Store, commit: str) -> str | None:
        """The run filed in ``store`` under ``commit`` that fits this comparison, or None."""
        raise NotImplementedError

    def import_path(self, tree: str) -> list[str]:
        """Folders put first on ``PYTHONPATH`` for the commands run in the worktree ``tree``."""
        return [tree]

    def env(self, env: dict, scratch: str) -> dict:
        """The environment of the build command (and of what :meth:`make` runs), ``env``
        plus what this kind adds."""
        return env

    def make(self, ref: str, commit: str, tree: str, scratch: str, env: dict, build_output: str,
             log: worktree.Log, say: Callable[[str], None]) -> str:
        """Run what makes this kind's run in the built worktree; return the file it wrote
        (inside ``scratch``). BadInput when it wrote none."""
        raise NotImplementedError

    def file(self, store: Store, commit: str, path: str) -> str:
        """File the run made at ``path`` in ``store`` under ``commit``; return the filed path."""
        raise NotImplementedError


def _quiet(line: str) -> None:
    pass


def resolve(ref: str, kind: ArmKind, store: Store, repo: str | None = None, build_cmd: str | None = None,
            say: Callable[[str], None] | None = None, store_hint: str = "") -> Arm:
    """The arm ``ref`` names (see the module's docstring); BadInput when it names none.

    ``store_hint`` is added to the message of a reference found nowhere without ``--repo``.
    """
    say = say or _quiet
    files.refuse_special(ref)
    if os.path.isfile(ref):
        return Arm(ref, ArmSource.FILE, ref, kind.load(ref))
    if repo is not None:
        commit = worktree.resolve_commit(repo, ref)
        if commit is not None:
            filed = kind.filed(store, commit)
            if filed is not None:
                say(f"{commit[:10]}: filed in the store ({filed})")
                return Arm(ref, ArmSource.STORE, filed, kind.load(filed), commit)
            filed = build(ref, commit, kind, store, repo, build_cmd, say)
            return Arm(ref, ArmSource.BUILT, filed, kind.load(filed), commit)
    if not any(entry.key.startswith(ref) for entry in store.entries(kind.store_kind)):
        if repo is not None:
            raise BadInput(f"neither a file nor a commit of {repo}, nor a {kind.store_kind} run filed in "
                           f"the store {store.root}", ref)
        raise BadInput(f"no file and no {kind.store_kind} run filed under {ref!r} in the store {store.root}"
                       + store_hint, ref)
    path = store.lookup(kind.store_kind, ref)  # BadInput when the prefix is ambiguous
    return Arm(ref, ArmSource.STORE, path, kind.load(path))


def merge_base(repo: str | None, base: str, head: str, say: Callable[[str], None] | None = None) -> str:
    """The reference to resolve for the base arm ``base`` against ``head``: a branch
    (local or remote-tracking) stands for its merge base with ``head``, so a pull request's
    base branch that moved on since the PR branched off compares only the PR's own changes;
    anything else (a commit, a tag, a file, a store key) is ``base`` itself."""
    if repo is None or os.path.isfile(base) or not os.path.isdir(repo):
        return base
    full = git.output(repo, "rev-parse", "--symbolic-full-name", base)
    if not full or not full.startswith(("refs/heads/", "refs/remotes/")):
        return base
    head_commit = worktree.resolve_commit(repo, head)
    found = git.output(repo, "merge-base", full, head_commit) if head_commit else None
    if not found:
        return base
    (say or _quiet)(f"{base}: its merge base with {head} is {found[:10]}")
    return found


def build(ref: str, commit: str, kind: ArmKind, store: Store, repo: str, build_cmd: str | None,
          say: Callable[[str], None]) -> str:
    """Check ``commit`` out in a temporary worktree of ``repo``, build it, make the kind's run
    there and file it in ``store``; return the filed path. The log of every command is kept
    in the store (:meth:`~flagos_doctor.store.Store.log_path`)."""
    with _Build(ref, commit, kind, store, repo, build_cmd, say) as made:
        made.prepare()
        return made.finish()


def resolve_both(refs: tuple[str, str], kind: ArmKind, store: Store, repo: str | None = None,
                 build_cmd: str | None = None, say: Callable[[str], None] | None = None) -> tuple[Arm, Arm]:
    """:func:`resolve` of both ``refs``; when both are commits to build, the second one's
    worktree and build run while the first one's run is made (a survey: on the H200 a
    torch_fl build takes minutes, as a survey does, and a compare paid them in turn). What
    each arm builds, runs and files is what :func:`resolve` gives; the store still lets a
    compare cut short carry on (an arm filed is not built again)."""
    say = say or _quiet
    commits = [_to_build(ref, kind, store, repo) for ref in refs]
    if not build_cmd or None in commits or commits[0] == commits[1]:
        return tuple(resolve(ref, kind, store, repo, build_cmd, say) for ref in refs)
    with _Build(refs[0], commits[0], kind, store, repo, build_cmd, say) as first, \
            _Build(refs[1], commits[1], kind, store, repo, build_cmd, say) as second:
        first.prepare()
        failed: list = []

        def prepare_second() -> None:
            try:
                second.prepare()
            except BaseException as exc:  # said when the second arm's turn comes
                failed.append(exc)

        thread = threading.Thread(target=prepare_second, daemon=True)
        thread.start()
        try:
            paths = [first.finish()]
        finally:
            thread.join()
        if failed:
            raise failed[0]
        paths.append(second.finish())
    return tuple(Arm(ref, ArmSource.BUILT, path, kind.load(path), commit)
                 for ref, path, commit in zip(refs, paths, commits))


def _to_build(ref: str, kind: ArmKind, store: Store, repo: str | None) -> str | None:
    """The commit :func:`resolve` would build for ``ref``, or None (a file, a run filed, no commit)."""
    files.refuse_special(ref)
    if repo is None or os.path.isfile(ref):
        return None
    commit = worktree.resolve_commit(repo, ref)
    return commit if commit is not None and kind.filed(store, commit) is None else None


class _Build:
    """One arm built in a temporary worktree (:meth:`prepare`), its run made and filed
    (:meth:`finish`); the worktree is removed on leaving the ``with``."""

    def __init__(self, ref, commit, kind: ArmKind, store: Store, repo: str, build_cmd, say):
        self.ref, self.commit, self.kind, self.store, self.repo = ref, commit, kind, store, repo
        self.build_cmd, self.say = build_cmd, say
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "_Build":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def prepare(self) -> None:
        self.log = worktree.Log(self.store.log_path(self.kind.store_kind, self.commit))
        self.scratch, self.tree = self._stack.enter_context(worktree.temporary_worktree(
            os.path.abspath(self.repo), self.commit, f"flagos-doctor-{self.kind.store_kind}-"))
        self.env = self.kind.env(worktree.env_with_import_path(self.kind.import_path(self.tree)), self.scratch)
        self.output = ""
        if self.build_cmd:
            self.say(f"{self.commit[:10]}: build: {self.build_cmd}")
            code, self.output = self.log.run(self.build_cmd, self.tree, self.env)
            if code != 0:
                raise self.log.failure("build command", code, self.output, self.commit, self.ref)

    def finish(self) -> str:
        made = self.kind.make(self.ref, self.commit, self.tree, self.scratch, self.env, self.output, self.log, self.say)
        filed = self.kind.file(self.store, self.commit, made)
        self.say(f"{self.commit[:10]}: filed as {filed}")
        return filed


#: ``--fail-on``: what makes a comparison exit 1.
FAIL_ON = ("any", "regression", "never")


def check_fail_on(value: str) -> None:
    if value not in FAIL_ON:
        raise BadInput(f"--fail-on must be one of {', '.join(FAIL_ON)}, not {value!r}")


def exit_code(fail_on: str, regressions: int, differs: bool) -> int:
    """1 when the comparison fails ``--fail-on``: ``regression``, any regression (the
    command counts what one is); ``any``, any difference at all (the command says what
    differs); ``never``, nothing. 0 otherwise."""
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "any":
        return EXIT_FINDING if differs else EXIT_OK
    return EXIT_FINDING if regressions else EXIT_OK
