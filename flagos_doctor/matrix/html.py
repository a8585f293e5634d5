"""The matrix document as one self-contained HTML page: a heat map of verdicts, a row per
overload grouped by family, a column per run. Renders from the document alone.

The page needs nothing at view time: its CSS (``page.css``) and script (``page.js``) are
inline, and its Content-Security-Policy (``default-src 'none'``, the style and the script
allowed by their sha256) refuses any request, so it opens from disk or as a CI artifact.

What the page shows comes from files a user may not trust (overload names, causes, paths),
so none of it is ever HTML: the document, scrubbed of secrets, is embedded as JSON in a
``<script type="application/json">`` block with every ``<``, ``>`` and ``&`` written as a
``\\u`` escape (no ``</script>`` nor ``<!--`` can close or bend it), and the script puts
each string on the page through ``textContent``.

The embedded data (compact: 20 runs of about 40,000 cases in under 1 MB)::

    columns   [{label, stack, title, lines}]  ``lines``: the header's provenance (the stack's
              version, torch_fl commit, flag_gems version, device, date, census sha256)
    verdicts, statuses, profiles, routes      the names the cells number
    causes    [[status, signature, cases]]     the runs' failure groups, largest first
    marks     [[sign, meaning]]               bit 0 of a cell's marks: native-also, bit 1: flaky
    rows      [[overload, family, rank, cells]] in the default order (below); a cell is
              null (not routed in that run) or [verdict, marks, then profile, status,
              route, cause for each case]

Default order: families by their most interesting row, then rows within a family: first
those whose verdict differs across the runs that route them (PENDING aside: rank 0), then
those that failed somewhere (FAILED or BASIC_ONLY, rank 1), then the rest (rank 2); by
name within a rank.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources

from flagos_doctor import output, redact
from flagos_doctor.matrix.build import FLAKY, MATRIX_SCHEMA, NATIVE_ALSO
from flagos_doctor.matrix.markdown import SIGNS
from flagos_doctor.results.model import BASIC_ONLY, FAILED, PENDING

#: Rank of a row in the default order: its verdicts differ across runs, it failed somewhere, else.
DIFFERS, FAILS, OTHER = 0, 1, 2
_MARK_BITS = {NATIVE_ALSO: 1, FLAKY: 2}

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src '{style_hash}'; script-src '{script_hash}'; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Operator support: {overloads} overloads, {runs} runs</title>
<style>{style}</style>
</head>
<body>
<header>
<h1>Operator support: {overloads} overloads, {runs} runs</h1>
<div id="legend"></div>
<div id="controls">
<input type="search" id="q" placeholder="search overloads" aria-label="search overloads">
<label>verdict <select id="status"><option value="">any</option></select></label>
<label><input type="checkbox" id="differ"> only rows that differ across runs</label>
<label>cause <select id="cause"><option value="">any</option></select></label>
<span id="shown"></span>
</div>
</header>
<main>
<div id="wrap"><table id="matrix"><thead><tr id="matrix-head"></tr></thead><tbody id="matrix-body"></tbody></table></div>
<aside id="detail"><p>Click a cell: that overload's cases in that run.</p></aside>
</main>
<script type="application/json" id="matrix-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


def _asset(name: str) -> str:
    return resources.files("flagos_doctor.matrix").joinpath(name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def rank(row: dict) -> int:
    """A row's place in the default order (:data:`DIFFERS`, :data:`FAILS`, :data:`OTHER`)."""
    # PENDING (not run yet) is no verdict to differ from, nor is "not routed".
    verdicts = {str(c.get("verdict")) for c in row["cells"] if c is not None and c.get("verdict") != PENDING}
    if len(verdicts) > 1:
        return DIFFERS
    return FAILS if verdicts & {FAILED, BASIC_ONLY} else OTHER


def ordered(rows: list[dict]) -> list[dict]:
    """``rows`` in the page's default order, each family's rows together."""
    ranks = {row["overload"]: rank(row) for row in rows}
    best: dict = {}
    for row in rows:
        best[row["family"]] = min(best.get(row["family"], OTHER), ranks[row["overload"]])
    return sorted(rows, key=lambda r: (best[r["family"]], r["family"], ranks[r["overload"]], r["overload"]))


def _column(column: dict) -> dict:
    commit = column.get("commit")
    version = column.get("version")
    lines = [str(version)] if version and version != column.get("flag_gems") else []
    lines += [f"torch_fl {str(commit)[:12]}" if commit else "torch_fl —",
             f"flag_gems {column.get('flag_gems') or '—'}",
             str(column.get("device") or "—"),
             str(column.get("date") or "—")[:10],
             f"census {str(column.get('census_sha256') or '—')[:12]}"]
    title = "\n".join(str(p) for p in (column.get("label"), column.get("path"), column.get("date"),
                                        f"census sha256 {column.get('census_sha256')}", column.get("note")) if p)
    return {"label": str(column.get("label")), "stack": str(column.get("stack") or "?"), "title": title, "lines": lines}


class _Names:
    """Strings numbered in the order met."""

    def __init__(self, given=()):
        self.names: list = list(given)
        self._index = {name: i for i, name in enumerate(self.names)}

    def __call__(self, name) -> int:
        name = str(name)
        if name not in self._index:
            self._index[name] = len(self.names)
            self.names.append(name)
        return self._index[name]


def data(matrix: dict) -> dict:
    """What the page embeds (the module's docstring gives its shape)."""
    verdicts, statuses, profiles, routes = _Names(matrix.get("verdicts") or []), _Names(), _Names(), _Names()
    rows = []
    for row in ordered(matrix.get("rows") or []):
        cells = []
        for value in row["cells"]:
            if value is None:
                cells.append(None)
                continue
            marks = sum(_MARK_BITS.get(m, 0) for m in value.get("marks") or [])
            flat = [verdicts(value.get("verdict")), marks]
            for case in value.get("cases") or []:
                flat += [profiles(case.get("profile")), statuses(case.get("status")), routes(case.get("route")),
                         case.get("cause")]
            cells.append(flat)
        rows.append([row["overload"], row["family"], rank(row), cells])
    return {
        "columns": [_column(c) for c in matrix.get("columns") or []],
        "verdicts": verdicts.names, "statuses": statuses.names, "profiles": profiles.names, "routes": routes.names,
        "causes": [[g["status"], g["signature"], sum(g["cases"])] for g in matrix.get("causes") or []],
        "marks": [[SIGNS.get(m, m), meaning] for m, meaning in (matrix.get("marks") or {}).items()],
        "rows": rows,
    }


def embedded_json(value) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` nor ``&``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


@output.register(MATRIX_SCHEMA, "html", scrubbed=True)
def render(matrix: dict) -> str:
    style, script = _asset("page.css"), _asset("page.js")
    # The secrets out of the user's data field by field, before the JSON escapes could hide
    # one; the page's own code and CSP are never scrubbed (HF_TOKEN=none: the view is ``scrubbed``).
    safe = redact.scrub_environ(matrix)
    return PAGE.format(style_hash=_csp_hash(style), script_hash=_csp_hash(script), style=style, script=script,
                       overloads=len(safe.get("rows") or []), runs=len(safe.get("columns") or []),
                       data=embedded_json(data(safe)))
