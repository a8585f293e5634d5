"""The ``--flaky FILE`` list: tests whose changes are reported apart, never as regressions.

One entry a line; ``#`` at the start of a line or after a space starts a comment. An entry is a node id as pytest prints it
(``tests/unit/test_x.py::TestK::test_n[0.5]``), a node id without its parametrisation
(``tests/unit/test_x.py::test_p`` covers every ``test_p[...]``), or a pattern where ``*``
stands for any text (``tests/unit/test_io.py::*``). Brackets are literal, as in pytest ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from flagos_doctor import files
from flagos_doctor.errors import BadInput

#: Largest flaky list read (a few hundred ids: KBs).
MAX_FLAKY_BYTES = 1 << 20


_COMMENT = re.compile(r"(?:^|\s)#")  # "#" inside an id (test_x[#1]) is not a comment


@dataclass
class FlakyList:
    source: str | None = None
    entries: list[str] = field(default_factory=list)
    _patterns: list[re.Pattern] = field(default_factory=list, repr=False)

    def matches(self, test_id: str) -> bool:
        return any(p.fullmatch(test_id) for p in self._patterns)

    def unmatched(self, ids) -> list[str]:
        """Entries that match none of ``ids`` (a typo, or a test that no longer exists)."""
        ids = list(ids)
        return [e for e, p in zip(self.entries, self._patterns) if not any(p.fullmatch(i) for i in ids)]


def _pattern(entry: str) -> re.Pattern:
    body = ".*".join(re.escape(piece) for piece in entry.split("*"))
    if "[" not in entry and "*" not in entry:
        body += r"(\[.*\])?"  # a parametrised test's every instance
    return re.compile(body)


def load_flaky(path: str | None) -> FlakyList:
    """Read ``path`` (None: an empty list). Raises BadInput naming the file."""
    if path is None:
        return FlakyList()
    try:
        # a regular file of bounded size: a FIFO would block, /dev/zero fill memory, and
        # /proc/self/environ be echoed into every output as "flaky tests"
        lines = files.read_regular_text(path, MAX_FLAKY_BYTES, "flaky list", where="--flaky").splitlines()
    except FileNotFoundError:
        raise BadInput(f"no such file: {path}", "--flaky")
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror or exc}", "--flaky")
    flaky = FlakyList(source=path)
    for line in lines:
        entry = _COMMENT.split(line, 1)[0].strip()
        if entry:
            flaky.entries.append(entry)
            flaky._patterns.append(_pattern(entry))
    return flaky
