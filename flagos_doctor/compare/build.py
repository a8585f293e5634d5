"""Survey arms: what ``survey --compare`` reads, how it surveys a commit it builds, and the
comparison document of two arms (:func:`build_comparison`, which ``report`` also attaches).

The flow (a file, a commit of ``--repo`` built in a temporary worktree, a run in the store)
is :mod:`flagos_doctor.arms`'s; a survey arm adds:

* a file is a survey results file (:func:`flagos_doctor.results.document.load`);
* a commit's run in the store is the newest filed under it, whatever its fingerprint (the
  fingerprint depends on what the survey finds, torch's version and the device type; a run
  of another setup is then refused by the comparison, naming the fields);
* in the built worktree, a child ``python -m flagos_doctor.survey.arm`` runs the survey
  with the user's survey options as JSON (every option carried, :func:`arm_options`), the
  worktree first on ``PYTHONPATH``. A build command whose last line ends in
  ``PYTHONPATH=<folder>`` (what ``python -m flagos_doctor.torch_fl_build`` prints: it builds
  outside the worktree, in its cache) puts that folder ahead of the worktree;
* the results are filed under the full commit and their fingerprint
  (:func:`flagos_doctor.results.comparable.fingerprint`), so the next comparison finds them.

Nothing is installed anywhere unless the build command does it: a build command that runs
``pip install`` installs into whatever interpreter it names, so it should name a virtual
environment (and ``--python`` that environment's interpreter), or build in place
(``python setup.py build_ext --inplace``) and rely on ``PYTHONPATH``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys

from flagos_doctor import arms, childproc
from flagos_doctor.arms import ArmKind
from flagos_doctor.compare.diff import compare
from flagos_doctor.errors import BadInput
from flagos_doctor.options import CompareOptions, SurveyOptions, options_json
from flagos_doctor.store import SURVEY_KIND, Store
from flagos_doctor.results import comparable, document as results

#: Survey options an arm sets for itself (and ``output``: the results file, in the worktree's
#: scratch folder); every other option is the user's, carried as given. The arm files its
#: run itself, under the commit; the child's output goes to the arm's log.
ARM_OWN = {"json_path": None, "census_path": None, "rerun": False, "store": None, "no_store": True,
           "quiet": True}
#: The survey of a built arm, run by module name (a command never imports another).
ARM_SURVEY_MODULE = "flagos_doctor.survey.arm"
#: Path options, made absolute: the child runs in another folder.
PATHS = ("conf", "spec", "hints")


def arm_options(options: SurveyOptions, output: str) -> SurveyOptions:
    """The survey options of one arm: the user's, but ``output`` and those in ARM_OWN, paths
    made absolute."""
    paths = {name: os.path.abspath(getattr(options, name)) for name in PATHS if getattr(options, name)}
    return dataclasses.replace(options, output=output, **ARM_OWN, **paths)


def announced_import_path(log_text: str) -> str | None:
    """The folder a build command's last line names as ``PYTHONPATH=<folder>``, or None."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    match = re.search(r"PYTHONPATH=(\S+)$", lines[-1]) if lines else None
    return match.group(1) if match and os.path.isdir(match.group(1)) else None


class SurveyArms(ArmKind):
    """Survey arms, built ones surveyed with ``survey`` (the user's survey options)."""

    store_kind = SURVEY_KIND

    def __init__(self, survey: SurveyOptions):
        self.survey = survey

    def load(self, path: str) -> dict:
        return results.load(path)

    def filed(self, store: Store, commit: str) -> str | None:
        filed = [e for e in store.entries(self.store_kind) if e.key == commit]
        return max(filed, key=lambda e: os.path.getmtime(e.path)).path if filed else None

    def import_path(self, tree: str) -> list[str]:
        # This flagos_doctor after the worktree (the repository built is the stack's, not
        # ours), under the children's one policy: a folder holding only a link to it.
        return [tree, childproc.package_folder()]

    def make(self, ref, commit, tree, scratch, env, build_output, log, say) -> str:
        survey_cwd = tree
        built = announced_import_path(build_output)
        if built:
            say(f"{commit[:10]}: importing the build from {built}")
            env = {**env, "PYTHONPATH": os.pathsep.join([built, env["PYTHONPATH"]])}
            survey_cwd = scratch  # ``python -m`` puts its folder first: the unbuilt tree must not shadow the build
        output = os.path.join(scratch, "results.json")
        say(f"{commit[:10]}: surveying ({self.survey.stack})")
        # In the worktree: ``python -m`` puts the working folder first on sys.path, and the
        # user's own checkout (often where they run this) must not shadow it.
        code, printed = log.run([sys.executable, "-m", ARM_SURVEY_MODULE, options_json(arm_options(self.survey, output))],
                                survey_cwd, env)
        if not os.path.isfile(output):
            raise log.failure("the survey", code, printed, commit, ref, why=" and wrote no results")
        return output

    def file(self, store: Store, commit: str, path: str) -> str:
        return store.file(self.store_kind, commit, comparable.fingerprint(results.load(path)["comparable"]), path)


def describe(arm) -> dict:
    """What the comparison document says of a survey arm."""
    return {"ref": arm.ref, "path": arm.path, "source": arm.source.value, "commit": arm.commit}


def load_arms(options: CompareOptions, say=None) -> tuple[arms.Arm, arms.Arm]:
    """Both arms of ``options`` (:func:`flagos_doctor.arms.resolve`), building missing ones
    when ``--repo`` is given."""
    if options.build_cmd and not options.repo:
        raise BadInput("--build-cmd needs --repo (the checkout to build the commits from)")
    store = Store(options.store)
    kind = SurveyArms(options.survey or SurveyOptions())
    # a branch as the base is its merge base with the head; the second arm builds while the
    # first is surveyed
    base = arms.merge_base(options.repo, options.a, options.b, say)
    return arms.resolve_both((base, options.b), kind, store, options.repo, options.build_cmd, say)


def build_comparison(options: CompareOptions, say=None) -> dict:
    """The comparison document for ``options`` (arms found or built); never refuses."""
    arm_a, arm_b = load_arms(options, say=say)
    comparison = compare(arm_a.content, arm_b.content, label_a=options.a, label_b=options.b, force=options.force)
    comparison["arms"]["a"].update(describe(arm_a))
    comparison["arms"]["b"].update(describe(arm_b))
    return comparison


def short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def not_comparable_message(comparison: dict) -> str:
    """Why two runs are not compared, naming the fields that differ."""
    fields = ", ".join(f"{d['field']} ({short(d['a'])} vs {short(d['b'])})" for d in comparison["differences"])
    return f"runs are not comparable: {fields}; --force compares anyway"
