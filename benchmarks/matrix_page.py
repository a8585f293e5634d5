"""The matrix page of the committed runs: its size, and how long headless Chromium takes to
render it.

Writes ``flagos-doctor matrix surveys/results --html`` once, then opens it ``--rounds``
times in one headless Debian Chromium (tests/chromium.py, over the DevTools pipe) and
reads what the page's script records when it has drawn the heat map:
``document.documentElement.dataset.renderedMs``, milliseconds since navigation started
(parsing, the script, every row and cell in the DOM), and ``paintedMs``, when the first
frame after it was drawn (its layout and paint included): the time a reader waits.

    python benchmarks/matrix_page.py                  # surveys/results, 5 rounds
    python benchmarks/matrix_page.py RESULTS... --rounds 9

Target (issue 35): at most 2 MB, rendered in under 1 s. Not a test: tests assert no time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")  # where the tests' driver (chromium.py) lives

#: When the first frame after the heat map was drawn (its layout and paint done).
PAINTED = """new Promise(done => { const poll = () => { const v = document.documentElement.dataset.paintedMs;
    if (v) done(v); else requestAnimationFrame(poll); }; poll(); })"""


def main() -> int:
    sys.path.insert(0, TESTS)
    from chromium import Chromium

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", default=["surveys/results"],
                        help="as matrix takes them, from the checkout's root (default: surveys/results)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "matrix.html")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
        # From the checkout's root, as docs/matrix.md's command: the paths in the page are the same.
        subprocess.run([sys.executable, "-m", "flagos_doctor", "matrix", *args.results, "--html", page, "-q"],
                       check=True, env=env, cwd=ROOT)
        rendered, loaded = [], []
        with Chromium() as browser:
            for _ in range(args.rounds):
                browser.open(page)
                rendered.append(float(browser.evaluate("document.documentElement.dataset.renderedMs")))
                loaded.append(float(browser.evaluate(PAINTED)))
            rows = browser.evaluate('document.querySelectorAll("tr.row").length')
            columns = browser.evaluate('document.querySelectorAll("#matrix-head th").length') - 1
        print(f"page: {os.path.getsize(page):,} bytes, {rows} overloads x {columns} runs")
        print(f"heat map drawn: median {statistics.median(rendered):.0f} ms, max {max(rendered):.0f} ms "
              f"({args.rounds} rounds)")
        print(f"first frame drawn: median {statistics.median(loaded):.0f} ms, max {max(loaded):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
