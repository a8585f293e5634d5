"""The report bundle as Markdown for a GitHub issue. Renders from the bundle alone.

The first table carries the fields of Torch-FL's bug-report template, so the text can be
pasted into the issue form as is; long parts (package list, vendor tools, probe detail,
survey and comparison) sit in ``<details>`` blocks. The page stays under a character
budget (:class:`~flagos_doctor.markdown.Page`): the template, the configuration, the
findings, the survey's summary and the comparison's changes always; failure groups next;
the environment's details, then the long lists, while they fit.
"""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.compare import markdown as compare_markdown
from flagos_doctor.explain import common as explain_common
from flagos_doctor.explain import markdown as explain_markdown
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, code, details
from flagos_doctor.probe.formats import common as probe_common
from flagos_doctor.report.bundle import REPORT_SCHEMA
from flagos_doctor.stacks import torch_fl_bindings as bindings
from flagos_doctor.results.groups import overloads_named


def _cell(value) -> str:
    return cell(value, none="—", newline="<br>")


def _environment(bundle: dict) -> list[tuple[list[str], int, str]]:
    env = bundle.get("environment") or {}
    py = env.get("python") or {}
    torch = env.get("torch") or {}
    stack = env.get("stack") or {}
    errors = env.get("errors") or {}
    rows = ["| | |", "|---|---|"]
    for key in ("platform", "os", "kernel", "machine", "executable", "version"):
        if py.get(key):
            rows.append(f"| python {key} | {_cell(py[key])} |" if key in ("executable", "version") else f"| {key} | {_cell(py[key])} |")
    for key in ("version", "build", "vendor_suffix", "git_version", "cudnn", "cuda_available_native", "cuda_device_count_native"):
        if key in torch:
            rows.append(f"| torch {key} | {_cell(torch[key])} |")
    if stack:
        rows.append(f"| stack imported | {_cell(', '.join(stack.get('imported') or []))} |")
        for key, value in (stack.get("accelerator") or {}).items():
            rows.append(f"| accelerator {key} | {_cell(value)} |")
    for step, why in errors.items():
        rows.append(f"| **{step}** | {_cell(why)} |")
    packages = ["| package | version | where |", "|---|---|---|"]
    for name, entry in (env.get("packages") or {}).items():
        if entry.get("found"):
            where = entry.get("location")
            extra = []
            for key in ("commit", "branch", "dirty", "extension", "extension_md5", "commit_source"):
                if entry.get(key) is not None:
                    extra.append(f"{key}: {entry[key]}")
            if entry.get("direct_url"):
                extra.append(f"direct_url: {entry['direct_url'].get('url')}")
            packages.append(f"| {name} | {_cell(entry.get('version'))} | {_cell(where)}{'<br>' + _cell('; '.join(extra)) if extra else ''} |")
        else:
            packages.append(f"| {name} | not found | {_cell(entry.get('why'))} |")
    tools = ["| tool | result |", "|---|---|"]
    for tool in env.get("tools") or []:
        if tool.get("why") and not tool.get("output"):
            tools.append(f"| {tool['name']} | {_cell(tool['why'])} |")
        else:
            head = (tool.get("output") or "").splitlines()
            tools.append(f"| {tool['name']} | `{_cell(tool['command'])}`: {_cell(' / '.join(head[:3]))} |")
    for kit in env.get("toolkits") or []:
        tools.append(f"| {kit['name']} toolkit | {_cell(kit.get('version') if kit.get('found') else kit.get('why'))} |")
    out = [(details("Environment details", rows), 2, "environment details"),
           (details("Python packages", packages), 3, "Python packages"),
           (details("Vendor tools", tools), 3, "vendor tools")]
    end = env.get("child_end") or {}
    if end.get("stderr_tail"):
        out.append((details(f"Environment child {end.get('describe')}: stderr tail", ["```", end["stderr_tail"], "```"]),
                    1, "the environment child's stderr tail"))
    return out


def _probe(page: Page, probe: dict) -> None:
    out = ["### Probe", ""]
    if probe.get("error"):
        page.add(out + [f"The probe could not run: {probe['error']}", ""])
        return
    findings = probe.get("findings") or []
    imports = ", ".join(probe.get("imports") or []) if isinstance(probe.get("imports"), list) else probe.get("imports")
    out += [
        f"- the probe's child: **{probe_common.outcome_words(probe.get('outcome'))}**",
        f"- imports: {_cell(imports)}",
        f"- phases: {_cell(' → '.join(str(p) for p in probe.get('phases') or []))}",
        f"- events: {probe.get('event_count', 0)}; findings: {len(findings)}",
        "",
    ]
    child = probe.get("child") if isinstance(probe.get("child"), dict) else {}
    page.add(out)
    if probe.get("outcome") != "ok" and child.get("stderr_tail"):
        page.add(details(f"Probe child {child.get('ended') or ''}: stderr tail", ["```", child["stderr_tail"], "```"]),
                 1, "the probe child's stderr tail")
    out = []
    if findings:
        out += ["| severity | kind | probe | message |", "|---|---|---|---|"]
        for finding in findings:
            out.append(
                f"| {_cell(finding.get('severity'))} | {_cell(finding.get('kind'))} | `{_cell(finding.get('probe'))}` | {_cell(finding.get('message'))} |"
            )
        out.append("")
    else:
        out += ["No findings.", ""]
    page.add(out)
    probes = probe.get("probes") or []
    if probes:
        rows = ["| probe | still original | writers | final |", "|---|---|---|---|"]
        for entry in probes:
            writers = entry.get("writers") or []
            names = ", ".join(
                f"{w.get('function')} ({w.get('file')}:{w.get('line')})" if isinstance(w, dict) else str(w) for w in writers
            )
            final = entry.get("final") or {}
            rows.append(
                f"| `{_cell(entry.get('name'))}` | {_cell(entry.get('original'))} | {_cell(names) if names else '—'} | {_cell(final.get('repr') if isinstance(final, dict) else final)} |"
            )
        page.add_table(f"Watched probes ({len(probes)})", rows[:2], rows[2:], 4, "watched probes")


def _survey(page: Page, survey: dict) -> None:
    out = ["### Survey", ""]
    if survey.get("error"):
        page.add(out + [f"The survey file could not be read: {survey['error']}", ""])
        return
    summary = survey.get("summary") or {}
    verdicts = ", ".join(f"{k} {v}" for k, v in (summary.get("verdicts") or {}).items())
    statuses = ", ".join(f"{k} {v}" for k, v in (summary.get("statuses") or {}).items())
    out += [
        f"- file: `{survey.get('path')}` (stack {survey.get('stack')}, harness {survey.get('harness_version')})",
        f"- registered {summary.get('registered')}, tested {summary.get('tested')}, basic {summary.get('basic')}, strict {summary.get('strict')}",
        f"- verdicts: {verdicts or '—'}",
        f"- cases: {statuses or '—'}",
    ]
    if summary.get("native_also"):
        out.append(f"- failures the native path shares (not counted): {summary['native_also']} in "
                   + ", ".join(f"`{name}`" for name in summary.get("native_also_overloads", [])))
    out += [
        f"- census sha256: `{survey.get('census_sha256')}`",
        "",
    ]
    page.add(out)
    found = survey.get("failure_groups") or []
    if found:
        rows = []
        for group in found:
            rows.append(f"| {group['cases']} | {group['overloads']} | {_cell(group['status'])} | "
                        f"{code(_cell(group['signature']))} | {_cell(overloads_named(group['members']))} |")
        page.add_table(f"#### Failures by cause ({len(found)} groups)",
                       ["| cases | overloads | status | cause | e.g. |", "|---:|---:|---|---|---|"],
                       rows, 1, "survey failure groups", folded=False)
    context = survey.get("context") or {}
    rows = ["| | |", "|---|---|"] + [f"| {k} | {_cell(v)} |" for k, v in context.items() if v is not None]
    if len(rows) > 2:
        page.add(details("Survey provenance", rows), 3, "survey provenance")
    line = bindings.summary_line(summary, survey.get("flag_gems"))
    if line:
        page.add_table(line, [], [f"- `{name}` calls `{function}`" for name, function in summary["missing_functions"].items()],
                       1, "the overloads calling a missing function")
    shared = survey.get("native_also") or []
    if shared:
        label = survey.get("baseline") or "the native path"
        page.add_table(f"Failures the native path shares, not counted ({len(shared)})", [],
                       [f"- `{c['overload']}` [{c['profile']}]: {c['status']}, and {_cell(label)} is {c['status']} too"
                        for c in shared], 2, "the failures the native path shares")
    flaky = survey.get("flaky") or []
    if flaky:
        page.add_table(f"FLAKY cases ({len(flaky)})", [],
                       [f"- `{c['overload']}` [{c['profile']}]: {', '.join(c.get('repeats') or [])}" for c in flaky],
                       2, "the FLAKY cases")
    failing = survey.get("not_strict") or {}
    if failing:
        page.add_table(f"Overloads not STRICT ({len(failing)})", [],
                       [f"- `{name}`: {verdict}" for name, verdict in failing.items()], 4, "overloads not STRICT")


def _explain(page: Page, piece: dict) -> None:
    """The failures of the user's own program and their causes (``report --explain``)."""
    out = ["### Why the program failed (`flagos-doctor explain`)", ""]
    if piece.get("error"):
        page.add(out + [f"The explain document could not be read: {piece['error']}", ""])
        return
    page.add(out + [f"**{explain_common.headline(piece)}**", "",
                    f"Command: {code(explain_common.command_text(piece))}", ""]
             + explain_markdown.failures_lines(piece, level="####")
             + explain_markdown.findings_lines(piece, level="####"))
    for failure in piece.get("failures") or []:
        if failure.get("traceback"):
            page.add(details(f"Traceback of failure #{failure['id']}", explain_markdown.traceback_lines(failure)),
                     2, f"the traceback of the program's failure #{failure['id']}")


def _compare(page: Page, comparison: dict) -> None:
    if comparison.get("error"):
        arms = comparison.get("arms") or {}
        page.add(["### Survey comparison", "",
                  f"The comparison of `{arms.get('a', {}).get('label')}` and `{arms.get('b', {}).get('label')}` "
                  f"could not be made: {comparison['error']}", ""])
        return
    compare_markdown.render_into(page, comparison, heading_level=3)


@output.register(REPORT_SCHEMA, "markdown")
def render(bundle: dict, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str = "the report's JSON bundle (`report --json PATH`)") -> str:
    """Markdown text of a report bundle (schema ``flagos-doctor/report/1``), under ``max_chars``."""
    page = Page(max_chars, full_record)
    out = ["## Environment", "", "| Field | Value |", "|---|---|"]
    for field in bundle.get("template") or []:
        out.append(f"| {field['field']} | {_cell(field['value'])} |")
    out.append("")
    page.add(out)
    for lines, priority, what in _environment(bundle):
        page.add(lines, priority, what)
    config = bundle.get("runtime_config") or []
    out = ["### Runtime configuration", ""]
    if config:
        out += ["```"]
        out += [f"{v['name']}=<redacted: name says it is a secret>" if v.get("redacted") else f"{v['name']}={v['value']}" for v in config]
        out += ["```", ""]
    else:
        out += ["None of `FLAGOS_*`, `GEMS_*`, `FLAGGEMS_*`, `TRITON_*`, `HF_*`, `TRANSFORMERS_*`, `TORCH_DEVICE_BACKEND_AUTOLOAD` is set.", ""]
    page.add(out)
    _probe(page, bundle.get("probe") or {"error": "not collected"})
    if "survey" in bundle:
        _survey(page, bundle["survey"])
    if "explain" in bundle:
        _explain(page, bundle["explain"])
    if "compare" in bundle:
        _compare(page, bundle["compare"])
    problems = bundle.get("problems") or []
    if problems:
        page.add(details(f"Pieces that could not be collected ({len(problems)})", [f"- {_cell(p)}" for p in problems]),
                 1, "the pieces that could not be collected")
    page.add([f"<sub>flagos-doctor {bundle.get('flagos_doctor')} report, {bundle.get('generated')}</sub>"])
    return page.text()
