"""``survey --compare`` on GitHub Actions: a step summary, annotations on the conf, a PR comment.

GitHub mode is on under ``GITHUB_ACTIONS=true`` (``--github`` forces it, ``--no-github``
turns it off) and does three things besides the usual outputs, all rendered from the
comparison document by views registered here:

* the Markdown view appended to ``$GITHUB_STEP_SUMMARY``;
* one workflow command per overload on standard output (:func:`render_annotations`):
  ``::error`` for a regression, ``::warning`` for another change, ``::notice`` for a fix,
  each on the conf line that routes the overload (``file=<conf as in the repository>,line=N``)
  when the comparison knows it (``routed_at``, :func:`attach_routes`);
* with ``--comment-file PATH``, the body of a pull-request comment (:func:`render_comment`),
  at most GitHub's 65,536 characters, whose first line says whether the PR is safe.

Nothing of it happens outside GitHub mode (``--comment-file`` alone is refused).
"""

from __future__ import annotations

import os

from flagos_doctor import arms, checks, conf, files, git, output
from flagos_doctor.compare import markdown
from flagos_doctor.compare.diff import COMPARE_SCHEMA, exit_code, named, why_changed
from flagos_doctor.errors import BadInput
from flagos_doctor.markdown import GITHUB_MAX_CHARS, Page

#: The last line of every comment flagos-doctor writes: how a workflow finds its own sticky
#: comment to update instead of adding another.
COMMENT_MARKER = "<!-- flagos-doctor-pr-check -->"
#: A comment's budget: GitHub's limit less the first line, the marker and some room (GitHub
#: counts characters as its API does, which may differ from Python's by a few).
COMMENT_MAX_CHARS = GITHUB_MAX_CHARS - 1_536
#: Annotations per kind: GitHub shows at most 10 errors and 10 warnings per step anyway.
ANNOTATIONS_MAX = 50


def active(github: bool | None) -> bool:
    """Whether GitHub mode is on: ``--github``/``--no-github``, else ``GITHUB_ACTIONS=true``."""
    return github if github is not None else os.environ.get("GITHUB_ACTIONS") == "true"


def check_options(github: bool | None, comment_file: str | None) -> None:
    """Before any work: ``--comment-file`` only in GitHub mode, and writable."""
    if comment_file and not active(github):
        raise BadInput("--comment-file needs GitHub mode (GITHUB_ACTIONS=true or --github)")
    checks.writable_file(comment_file, "--comment-file")


# -- the data: where each changed overload is routed ------------------------------------
def _repository_path(path: str) -> str:
    """``path`` relative to its git checkout's root (as GitHub names files), else as given."""
    top = git.output(os.path.dirname(path) or ".", "rev-parse", "--show-toplevel")
    return os.path.relpath(path, top) if top else os.path.relpath(path)


def attach_routes(comparison: dict, conf_path: str | None) -> None:
    """Add ``routed_at`` ({overload: {file, line}}) to ``comparison``: the conf line that
    routes each regressed, changed or fixed overload (:func:`flagos_doctor.conf.parse_conf`,
    includes followed, a later line winning), and ``routed_by`` (the conf). Without a conf
    that can be read, nothing is added: the annotations then name no file."""
    conf_path = conf_path or ((comparison.get("arms") or {}).get("b", {}).get("context") or {}).get("conf")
    if not conf_path or not os.path.isfile(conf_path):
        return
    routes = conf.parse_conf(conf_path)
    named_overloads = {t["overload"] for t in comparison.get("transitions") or []}
    named_overloads |= {c["overload"] for c in comparison.get("cases_changed") or []}
    comparison["routed_by"] = _repository_path(os.path.abspath(conf_path))
    comparison["routed_at"] = {
        name: {"file": _repository_path(routes[name].file), "line": routes[name].line}
        for name in sorted(named_overloads) if name in routes}


# -- the views ---------------------------------------------------------------------------
def _escape(text: str, property: bool = False) -> str:
    """Text for a workflow command (GitHub's escaping: ``%``, CR, LF; in a property also ``:`` ``,``)."""
    text = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property else text


def _annotation(level: str, comparison: dict, overload: str, what: str) -> str:
    where = (comparison.get("routed_at") or {}).get(overload)
    props = [f"file={_escape(where['file'], True)}", f"line={int(where['line'])}"] if where else []
    props.append(f"title={_escape(f'flagos-doctor: {overload} {what}', True)}")
    return f"::{level} {','.join(props)}::{_escape(f'{overload}: {why_changed(comparison, overload)}')}"


@output.register(COMPARE_SCHEMA, "github-annotations")
def render_annotations(comparison: dict) -> str:
    """One workflow command per regressed (``::error``), otherwise changed (``::warning``)
    and fixed (``::notice``) overload; at most :data:`ANNOTATIONS_MAX` of each, then a line
    saying how many more."""
    fixed = [t["overload"] for t in comparison.get("transitions") or [] if t["kind"] == "fix"]
    lines = []
    for level, what, names in (("error", "regressed", comparison.get("regressed_overloads") or []),
                               ("warning", "changed", comparison.get("changed_overloads") or []),
                               ("notice", "fixed", fixed)):
        lines += [_annotation(level, comparison, name, what) for name in names[:ANNOTATIONS_MAX]]
        if len(names) > ANNOTATIONS_MAX:
            lines.append(f"::{level}::{len(names) - ANNOTATIONS_MAX} more {what} overloads (the step summary lists them)")
    return "".join(line + "\n" for line in lines)


def verdict_line(comparison: dict, fail_on: str = "regression") -> str:
    """The first line of a PR comment: safe or not, and why, in one line."""
    if comparison.get("refused"):
        fields = ", ".join(d["field"] for d in comparison.get("differences") or [])
        return f"⚠️ **flagos-doctor could not compare the PR**: the runs are not comparable ({fields} differ)."
    counts = (f"{comparison.get('fixes', 0)} fixed, {comparison.get('changes', 0)} other changes, "
              f"{comparison.get('unchanged', 0)} overloads unchanged")
    regressions = comparison.get("regressions", 0)
    if regressions:
        return (f"❌ **Not safe to merge** (flagos-doctor): {regressions} regressed"
                f"{named(comparison, 'regressed_overloads', quote=lambda n: f'`{n}`')}; {counts}.")
    if fail_on == "any" and exit_code(comparison, "any"):
        return f"❌ **Not safe to merge** (flagos-doctor, `--fail-on any`): the runs differ; {counts}."
    return f"✅ **Safe to merge** (flagos-doctor): nothing regressed; {counts}."


@output.register(COMPARE_SCHEMA, "pr-comment")
def render_comment(comparison: dict, fail_on: str = "regression", full_record: str | None = None) -> str:
    """A pull-request comment: :func:`verdict_line`, the comparison's Markdown under the
    rest of GitHub's limit, and :data:`COMMENT_MARKER`."""
    page = Page(COMMENT_MAX_CHARS, full_record or "the comparison's JSON (the workflow's artifact)")
    page.add([verdict_line(comparison, fail_on), ""])
    if not comparison.get("refused"):
        markdown.render_into(page, comparison, heading_level=3)
    return page.text() + COMMENT_MARKER + "\n"


# -- the mode ----------------------------------------------------------------------------
def _append_summary(text: str) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        files.append_text(path, text, "$GITHUB_STEP_SUMMARY")


def publish(comparison: dict, fail_on: str, comment_file: str | None, max_chars: int, json_path: str | None) -> None:
    """GitHub mode's outputs of ``comparison`` (as written): the step summary, the
    annotations on stdout, the comment file."""
    arms.check_fail_on(fail_on)
    how = "the comparison's JSON (`survey --compare A B --json PATH`)"
    try:
        _append_summary(output.render(comparison, "markdown", **output.page(max_chars, json_path, how)))
    except BadInput as exc:  # said after the other outputs are written, which it must not cost
        unwritten = exc
    else:
        unwritten = None
    output.emit(comparison, {"github-annotations": "-" if not comparison.get("refused") else None,
                             "pr-comment": comment_file},
                options={"pr-comment": {"fail_on": fail_on}})
    if unwritten is not None:
        raise unwritten
