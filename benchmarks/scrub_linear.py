"""The scrubber on one long line: its time grows with the line, as a plain pass does.

A tester's conf with one 200 KB line took 109 s to scrub (a URL pattern that scanned
forward from every start position: quadratic), and a 10 MB line never finished. Each
shape below is a line of SIZE characters (default 10 MB) made to tempt one of the
scrubber's patterns; for each, this prints the seconds of ``redact.scrub_environ`` on it
beside a plain-text baseline pass over the same line (``str.lower`` and a literal
``re.sub``: what any text processing of the line costs at least), and the seconds of the
scrubber on a tenth of the line, so the ratio shows the growth: about 10 for linear time,
about 100 for quadratic.

    python benchmarks/scrub_linear.py                 # 10 MB lines
    python benchmarks/scrub_linear.py --size 2000000

Target: on every shape, 10x the line costs at most ~15x the time (linear, with noise).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from flagos_doctor import redact  # noqa: E402

#: Lines that tempt each pattern: plain text, schemes without userinfo, userinfo without a
#: scheme, scheme+at repeated (every ``:/`` has an ``@`` before the next), assignments,
#: keywords of the DSN and header patterns, and one URL with a 10 MB password.
SHAPES = {
    "plain letters": "a",
    "words and spaces": "lorem ipsum ",
    "schemes, no userinfo": "a:/",
    "at signs, no scheme": "x@",
    "scheme then at, repeated": "a:/x@",
    "assignments": "A=",
    "password= repeated": "password=",
    "authorization: repeated": "authorization: ",
    "bearer repeated": "Bearer ",
}
TARGET_GROWTH = 15.0


def line_of(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def seconds(function, text: str) -> float:
    start = time.perf_counter()
    function(text)
    return time.perf_counter() - start


def baseline(text: str) -> None:
    text.lower()
    re.sub("zzzz", "", text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000_000, help="characters in each line (default 10 MB)")
    args = parser.parse_args()
    shapes = dict(SHAPES, **{"one URL, long password": None})
    print(f"{'shape':<28} {'baseline s':>10} {'scrub s':>9} {'scrub 1/10 s':>13} {'growth x10':>11}")
    worst = 0.0
    for name, unit in shapes.items():
        if unit is None:
            line, tenth = ("https://u:" + "p" * args.size + "@h"), ("https://u:" + "p" * (args.size // 10) + "@h")
        else:
            line, tenth = line_of(unit, args.size), line_of(unit, args.size // 10)
        base = seconds(baseline, line)
        full = seconds(redact.scrub_environ, line)
        small = seconds(redact.scrub_environ, tenth)
        growth = full / max(small, 1e-6)
        worst = max(worst, growth)
        print(f"{name:<28} {base:>10.3f} {full:>9.3f} {small:>13.3f} {growth:>11.1f}")
    print(f"worst growth for 10x the line: {worst:.1f}x (target at most {TARGET_GROWTH:g}x; quadratic would be ~100x)")
    return 0 if worst <= TARGET_GROWTH else 1


if __name__ == "__main__":
    sys.exit(main())
