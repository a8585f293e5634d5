"""``matrix --html``: the page of the committed runs (surveys/results, a folder) rendered in
headless Debian Chromium (tests/chromium.py) and checked through its DOM: the heat map's
rows and columns, a cell's colour and its cases, each filter, the default order, that no
request leaves the page, and that hostile names and causes are shown as text.

The expected figures come from the results files themselves (their overloads, cases and
failure groups), not from the page's own data.
"""

from __future__ import annotations

import glob
import html.parser
import json
import os
import shutil

import pytest
from conftest import REPO_ROOT, run_cli

from flagos_doctor.results import groups
from flagos_doctor.results.document import build as build_results

RESULTS = os.path.join(REPO_ROOT, "surveys", "results")
FILES = sorted(glob.glob(os.path.join(RESULTS, "*.json")))
#: The colours of page.css, as the browser computes them.
COLOURS = {"STRICT": "rgb(45, 164, 78)", "FAILED": "rgb(207, 34, 46)", "BASIC_ONLY": "rgb(242, 199, 68)",
           "not routed": "rgb(246, 248, 250)"}

pytestmark = pytest.mark.skipif(not shutil.which("chromium") and not os.environ.get("CI"),
                                reason="Debian's chromium is not installed (scripts/run-tests installs it)")


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    return [_load(path) for path in FILES]


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("page") / "matrix.html"
    done = run_cli("matrix", "surveys/results", "--html", str(out), "-q", cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.fixture(scope="module")
def browser(page):
    from chromium import Chromium

    with Chromium(width=1600, height=1000) as opened:
        opened.open(page)
        yield opened


@pytest.fixture
def fresh(browser, page):
    """The page as loaded, before any filter or click."""
    browser.open(page)
    return browser


def _visible_rows(browser) -> list[str]:
    return browser.evaluate('[...document.querySelectorAll("tr.row")].filter(r => !r.hidden)'
                            '.map(r => r.querySelector("td.name").textContent)')


def _pick(browser, element_id: str, value: str) -> None:
    browser.evaluate(f'(() => {{ const e = document.getElementById("{element_id}"); e.value = {json.dumps(value)};'
                     ' e.dispatchEvent(new Event("change")); })()')


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


# -- the file ----------------------------------------------------------------------------
def test_the_page_of_the_committed_runs_is_one_small_file_that_asks_for_nothing(page):
    assert len(FILES) >= 20
    size = os.path.getsize(page)
    assert size <= 2_000_000, size
    parser = _Tags()
    with open(page, encoding="utf-8") as handle:
        parser.feed(handle.read())
    tags = [tag for tag, _attrs in parser.tags]
    policy = [a["content"] for tag, a in parser.tags if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert policy and policy[0].startswith("default-src 'none';")
    assert "link" not in tags and "img" not in tags and "iframe" not in tags
    assert not any("src" in attrs or "href" in attrs for _tag, attrs in parser.tags)
    assert tags.count("script") == 2 and tags.count("style") == 1


def test_the_docs_state_this_page_s_size_and_what_it_holds(page, runs):
    with open(os.path.join(REPO_ROOT, "docs", "matrix.md"), encoding="utf-8") as handle:
        text = " ".join(handle.read().split())
    names = {name for document in runs for name in document["overloads"]}
    cases = sum(len(entry.get("cases") or []) for document in runs for entry in document["overloads"].values())
    assert (f"For the {len(runs)} committed runs ({len(names)} overloads, {cases:,} cases): the page is "
            f"{os.path.getsize(page):,} bytes") in text


def test_a_folder_without_results_files_is_refused_in_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("no results here")
    done = run_cli("matrix", str(tmp_path), "--html", str(tmp_path / "m.html"), cwd=str(tmp_path))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert str(tmp_path) in lines[0] and "a folder without results files" in lines[0]
    assert not (tmp_path / "m.html").exists()


def test_a_folder_holding_another_json_file_names_that_file(tmp_path):
    shutil.copy(FILES[0], tmp_path / "a.json")
    (tmp_path / "b.json").write_text('{"schema": "flagos-doctor/matrix/1"}')
    done = run_cli("matrix", str(tmp_path), "--csv", "-", cwd=str(tmp_path))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "b.json" in lines[0]


# -- the heat map ------------------------------------------------------------------------
def test_a_row_per_overload_and_a_column_per_run_with_its_provenance(fresh, runs):
    names = {name for document in runs for name in document["overloads"]}
    assert fresh.evaluate('document.querySelectorAll("tr.row").length') == len(names)
    assert set(_visible_rows(fresh)) == names
    headers = fresh.evaluate('[...document.querySelectorAll("#matrix-head th")].map(th => th.innerText)')
    assert len(headers) == 1 + len(runs)
    for index, (header, document) in enumerate(zip(headers[1:], runs)):
        provenance = document["provenance"]
        assert header.startswith(f"#{index + 1} ")
        assert f"flag_gems {provenance['flag_gems']}" in header
        assert provenance["started"][:10] in header
        assert f"census {document['census_sha256'][:12]}" in header
        commit = (provenance.get("torch_fl") or {}).get("commit") if isinstance(provenance.get("torch_fl"), dict) else None
        assert (f"torch_fl {commit[:12]}" if commit else "torch_fl —") in header
        cells = fresh.evaluate(f'document.querySelectorAll("tr.row td.c[data-col=\\"{index}\\"]").length')
        assert cells == len(names)


def test_rows_are_grouped_by_the_survey_family_with_differing_rows_first(fresh, runs):
    shown = _visible_rows(fresh)
    verdicts = {name: [d["overloads"][name]["verdict"] for d in runs if name in d["overloads"]]
                for name in shown}
    differs = [len(set(v) - {"PENDING"}) > 1 for v in (verdicts[name] for name in shown)]
    assert differs[0] and not differs[-1]
    first_same = differs.index(False)
    # A family's rows stay together: a family that differs anywhere comes before all that do not.
    family = [name.split(".", 1)[0] for name in shown]
    assert all(differs[i] or family[i] in family[:first_same] for i in range(first_same))
    assert len(set(family)) == sum(1 for i in range(len(family)) if i == 0 or family[i] != family[i - 1])
    headings = fresh.evaluate('[...document.querySelectorAll("tr.family td.name")].map(td => td.textContent)')
    assert "addmm" in headings and headings == [f for f in dict.fromkeys(family) if family.count(f) > 1]


def _cell(browser, overload: str, column: int) -> str:
    """The selector of ``overload``'s cell in run ``column``."""
    row = browser.evaluate(f'[...document.querySelectorAll("tr.row")].find(r => '
                           f'r.querySelector("td.name").textContent === {json.dumps(overload)}).dataset.row')
    return f'tr.row[data-row="{row}"] td.c[data-col="{column}"]'


def test_a_cell_is_coloured_by_its_verdict_and_a_click_shows_its_cases(fresh, runs):
    column = next(i for i, path in enumerate(FILES) if path.endswith("flag_gems-4.2.0-h200.json"))
    document = runs[column]
    entry = document["overloads"]["_log_softmax_backward_data"]
    assert entry["verdict"] == "FAILED"
    selector = _cell(fresh, "_log_softmax_backward_data", column)
    colour = fresh.evaluate(f'getComputedStyle(document.querySelector({json.dumps(selector)})).backgroundColor')
    assert colour == COLOURS["FAILED"]
    fresh.click(selector)
    assert fresh.evaluate('document.querySelector("#detail h2").textContent') == "_log_softmax_backward_data"
    assert "flag_gems-4.2.0-h200.json" in fresh.evaluate('document.querySelector("#detail p.run").textContent')
    shown = fresh.evaluate('[...document.querySelectorAll("#detail tr.case")].map(tr => '
                           '[...tr.children].map(td => td.textContent))')
    expected = [[c["profile"], c["status"], groups.signature(c) or "", c["route"]] for c in entry["cases"]]
    assert shown == expected and any(status != "PASS" for _p, status, _c, _r in shown)


def test_a_run_without_the_overload_shows_not_routed(fresh, runs):
    column = next(i for i, d in enumerate(runs) if "_is_all_true" not in d["overloads"])
    selector = _cell(fresh, "_is_all_true", column)
    assert fresh.evaluate(f'getComputedStyle(document.querySelector({json.dumps(selector)})).backgroundColor') \
        == COLOURS["not routed"]
    fresh.click(selector)
    assert fresh.evaluate('document.querySelector("#detail p.verdict").textContent') == "not routed"
    assert fresh.evaluate('document.querySelectorAll("#detail tr.case").length') == 0


def test_the_legend_names_every_verdict_met_and_not_routed(fresh, runs):
    legend = fresh.evaluate('document.getElementById("legend").innerText')
    for verdict in {e["verdict"] for d in runs for e in d["overloads"].values()} | {"not routed"}:
        assert verdict in legend


# -- the filters -------------------------------------------------------------------------
def test_the_text_search_keeps_the_overloads_whose_name_holds_it(fresh, runs):
    fresh.type_into("#q", "AddMM")
    names = {name for d in runs for name in d["overloads"] if "addmm" in name.lower()}
    assert set(_visible_rows(fresh)) == names and len(names) > 3
    assert fresh.evaluate('document.getElementById("shown").textContent').startswith(f"{len(names)} of ")
    # A family heading stays only while one of its rows is shown.
    headings = fresh.evaluate('[...document.querySelectorAll("tr.family")].filter(r => !r.hidden)'
                              '.map(r => r.querySelector("td.name").textContent)')
    every = fresh.evaluate('[...document.querySelectorAll("tr.family td.name")].map(td => td.textContent)')
    assert headings and set(headings) == {n.split(".", 1)[0] for n in names} & set(every)


def test_the_verdict_filter_keeps_rows_with_that_verdict_in_some_run(fresh, runs):
    statuses = fresh.evaluate('[...document.getElementById("status").options].map(o => [o.value, o.textContent])')
    value = next(v for v, text in statuses if text == "FAILED")
    _pick(fresh, "status", value)
    failed = {name for d in runs for name, e in d["overloads"].items() if e["verdict"] == "FAILED"}
    assert set(_visible_rows(fresh)) == failed
    _pick(fresh, "status", next(v for v, text in statuses if text == "not routed"))
    everywhere = set.intersection(*(set(d["overloads"]) for d in runs))
    assert set(_visible_rows(fresh)) == {n for d in runs for n in d["overloads"]} - everywhere


def test_only_rows_that_differ_across_runs(fresh, runs):
    fresh.click("#differ")
    assert fresh.evaluate('document.getElementById("differ").checked') is True
    names = {n for d in runs for n in d["overloads"]}
    differing = {n for n in names
                 if len({d["overloads"][n]["verdict"] for d in runs if n in d["overloads"]} - {"PENDING"}) > 1}
    assert set(_visible_rows(fresh)) == differing and 0 < len(differing) < len(names)


def test_the_cause_filter_keeps_the_overloads_of_that_failure_group(fresh, runs):
    causes = fresh.evaluate('[...document.getElementById("cause").options].map(o => [o.value, o.textContent])')
    wanted = "ERROR: TypeError: function takes exactly N arguments (N given)"
    value = next(v for v, t in causes if t.startswith(wanted + " ("))
    members = {overload for d in runs for g in groups.failure_groups(d["overloads"])
               if (g["status"], g["signature"]) == ("ERROR", "TypeError: function takes exactly N arguments (N given)")
               for overload, _profile in g["members"]}
    _pick(fresh, "cause", value)
    assert set(_visible_rows(fresh)) == members and len(members) > 100
    # Filters combine: the cause's overloads whose name holds "add".
    fresh.type_into("#q", "add")
    assert set(_visible_rows(fresh)) == {m for m in members if "add" in m}


# -- nothing leaves the page, nothing in the data is HTML ---------------------------------
def test_no_request_leaves_the_page(fresh, page):
    assert fresh.requests() == ["file://" + os.path.abspath(page)]
    assert fresh.evaluate('performance.getEntriesByType("resource").length') == 0
    # The policy is in force: a request the page would make is refused before it is sent.
    refused = fresh.evaluate("""new Promise(done => {
        document.addEventListener("securitypolicyviolation", e => done(e.violatedDirective + " " + e.blockedURI));
        const img = document.createElement("img"); img.src = "http://127.0.0.1:9/x.png"; document.body.appendChild(img);
    })""")
    assert refused.startswith(("img-src", "default-src")), refused
    # ... and the network watch sees such an attempt: the browser blocked it (by the policy).
    failed = fresh.wait_for("Network.loadingFailed", fresh.opened_at)["params"]
    assert failed.get("blockedReason") == "csp"
    assert fresh.requests() == ["file://" + os.path.abspath(page), "http://127.0.0.1:9/x.png"]


HOSTILE_NAME = '<script>window.pwned=1</script>"\'&amp;.x'
HOSTILE_DETAIL = 'RuntimeError: <img src=x onerror="window.pwned=2"></script><!-- "quoted" \'single\''


def test_hostile_names_and_causes_are_shown_as_text(tmp_path):
    from chromium import Chromium

    cases = [{"profile": "1d-f32", "status": "ERROR", "route": "kernel", "detail": HOSTILE_DETAIL},
             {"profile": "2d-f32", "status": "PASS", "route": "kernel", "detail": ""}]
    provenance = {"stack": "demo", "flag_gems": "</script><b>x</b>", "started": "2026-12-02T00:00:00+00:00",
                  "device": {"name": "<i>dev</i>", "type": "flagos"}}
    document = build_results(provenance, {"stack": "demo"}, [HOSTILE_NAME, "abs"],
                             {HOSTILE_NAME: cases, "abs": cases[1:]})
    (tmp_path / "hostile.json").write_text(json.dumps(document))
    done = run_cli("matrix", "hostile.json", "--html", "m.html", "-q", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "m.html").read_text()
    data = text[text.index('id="matrix-data">'):]
    data = data[:data.index("</script>")]
    assert "<" not in data[len('id="matrix-data">'):]
    with Chromium() as browser:
        browser.open(str(tmp_path / "m.html"))
        assert browser.evaluate("window.pwned === undefined") is True
        assert browser.evaluate('document.querySelectorAll("script").length') == 2
        assert browser.evaluate('document.querySelectorAll("img, b, i").length') == 0
        assert HOSTILE_NAME in _visible_rows(browser)
        header = browser.evaluate('document.querySelector("#matrix-head th:nth-child(2)").innerText')
        assert "flag_gems </script><b>x</b>" in header and "<i>dev</i>" in header
        browser.click(_cell(browser, HOSTILE_NAME, 0))
        assert browser.evaluate('document.querySelector("#detail h2").textContent') == HOSTILE_NAME
        cause = browser.evaluate('document.querySelector("#detail tr.case td:nth-child(3)").textContent')
        assert cause == groups.signature(cases[0]) and "<img" in cause
        options = browser.evaluate('[...document.getElementById("cause").options].map(o => o.textContent)')
        assert any("<img" in option for option in options)
        assert browser.evaluate("window.pwned === undefined") is True


def test_a_secret_in_a_cause_stays_out_of_the_page(tmp_path):
    # "<" and "&" would be \u escapes inside the page's JSON, where a scrub of the file's text
    # alone could not see the secret: the document is scrubbed field by field first.
    secret = "s3cr<et&Value-of-mine"
    cases = [{"profile": "1d-f32", "status": "ERROR", "route": "kernel",
              "detail": f"RuntimeError: login refused for token {secret}"}]
    document = build_results({"stack": "demo"}, {"stack": "demo"}, ["abs"], {"abs": cases})
    (tmp_path / "r.json").write_text(json.dumps(document))
    done = run_cli("matrix", "r.json", "--html", "m.html", "-q", cwd=str(tmp_path), env={"MY_API_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "m.html").read_text()
    assert "s3cr" not in text and "Value-of-mine" not in text
    assert "login refused for token" in text  # the cause is there, the secret masked


@pytest.mark.parametrize("variable, secret", [("HF_TOKEN", "none"), ("DB_PASSWORD", "data"),
                                              ("MY_API_KEY", "function"), ("SECRET", "sha256-"),
                                              ("GH_TOKEN", "matrix")])
def test_a_secret_that_is_a_word_of_the_page_masks_the_data_not_the_page_s_code(tmp_path, variable, secret):
    # The page's script and style are allowed by their hash in its CSP: masking "none" in
    # them (or in the CSP) left a blank page. The user's data is still scrubbed.
    from chromium import Chromium

    from flagos_doctor.matrix import html

    cases = [{"profile": "1d-f32", "status": "ERROR", "route": "kernel", "detail": f"RuntimeError: token {secret}!"}]
    document = build_results({"stack": "demo"}, {"stack": "demo"}, ["abs"], {"abs": cases})
    (tmp_path / "r.json").write_text(json.dumps(document))
    done = run_cli("matrix", "r.json", "--html", "m.html", "-q", cwd=str(tmp_path), env={variable: secret})
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "m.html").read_text()
    assert html._asset("page.js") in text and html._asset("page.css") in text
    assert html._csp_hash(html._asset("page.js")) in text
    stdout = run_cli("matrix", "r.json", "--html", "-", "-q", cwd=str(tmp_path), env={variable: secret}).stdout
    assert stdout == text
    with Chromium() as browser:
        browser.open(str(tmp_path / "m.html"))
        assert _visible_rows(browser) == ["abs"]
        browser.click(_cell(browser, "abs", 0))
        cause = browser.evaluate('document.querySelector("#detail tr.case td:nth-child(3)").textContent')
        assert cause.startswith("RuntimeError: token ") and secret not in cause
