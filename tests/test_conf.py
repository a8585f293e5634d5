"""The backends conf parser against every real conf, and its errors through the CLI."""

from __future__ import annotations

import glob
import os
import re

import pytest

from conftest import CONFS
from flagos_doctor import conf
from flagos_doctor.errors import BadInput


def _readme_counts() -> dict[str, tuple[int, int]]:
    with open(os.path.join(CONFS, "README.md"), encoding="utf-8") as handle:
        rows = re.findall(r"^\|\s*([\w./-]+\.conf)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", handle.read(), re.M)
    return {name: (int(total), int(python)) for name, total, python in rows}


def test_every_shared_conf_parses_and_the_readme_counts_hold():
    counts = _readme_counts()
    assert len(counts) >= 10
    paths = sorted(glob.glob(os.path.join(CONFS, "*.conf")) + glob.glob(os.path.join(CONFS, "*", "*.conf")))
    assert len(paths) >= 19
    seen = set()
    for path in paths:
        routes = conf.parse_conf(path)  # none of them is malformed
        name = os.path.relpath(path, CONFS)
        if name in counts:
            assert (len(routes), len(conf.select(routes))) == counts[name], name
            seen.add(name)
    assert seen == set(counts)
    # The aliases count as the canonical class.
    assert len(conf.select(conf.parse_conf(os.path.join(CONFS, "backends_flaggems.conf")), "flaggems_python")) == 389


def test_includes_comments_last_wins_and_aliases(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base.conf").write_text("abs = cuda\nneg = flaggems_python # alias\nexp = cuda\n")
    (tmp_path / "top.conf").write_text("# header\ninclude sub/base.conf   # relative to this file\nabs = FLAGOS_PYTHON\nexp=flagos_python\nexp = cuda\n")
    routes = conf.parse_conf(tmp_path / "top.conf")
    assert conf.select(routes) == ["abs", "neg"]
    assert routes["exp"].backend == "cuda" and routes["exp"].line == 5


@pytest.mark.parametrize(
    "text, message",
    [
        ("abs = flagos_python\nabs flagos_python\n", "expected 'op.overload = backend'"),
        ("abs.out.x = cpu\n", "not an overload name"),
        ("abs = two words\n", "not a backend name"),
        ("include\n", "'include' needs a path"),
        ("include missing.conf\n", "conf file not found"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.conf"
    path.write_text(text)
    with pytest.raises(BadInput) as caught:
        conf.parse_conf(path)
    assert message in str(caught.value)
    line = text.count("\n")
    assert str(caught.value).startswith(f"{path}:{line}:")


def test_include_cycle_and_depth(tmp_path):
    (tmp_path / "a.conf").write_text("include b.conf\n")
    (tmp_path / "b.conf").write_text("abs = cuda\ninclude a.conf\n")
    with pytest.raises(BadInput, match=r"include cycle: a.conf -> b.conf -> a.conf") as caught:
        conf.parse_conf(tmp_path / "a.conf")
    assert str(caught.value).startswith(f"{tmp_path / 'b.conf'}:2:")
    for depth in range(10):
        (tmp_path / f"d{depth}.conf").write_text(f"include d{depth + 1}.conf\n")
    (tmp_path / "d10.conf").write_text("abs = flagos_python\n")
    with pytest.raises(BadInput, match="nested deeper than 8"):
        conf.parse_conf(tmp_path / "d0.conf")
    (tmp_path / "d7.conf").write_text("abs = flagos_python\n")  # 8 files deep: allowed
    assert conf.select(conf.parse_conf(tmp_path / "d0.conf")) == ["abs"]


def test_malformed_conf_exits_2_with_file_and_line(tmp_path, cli):
    path = tmp_path / "bad.conf"
    path.write_text("abs = flagos_python\n\nneg flagos_python\n")
    done = cli("survey", "--conf", str(path), "--no-store", "-o", str(tmp_path / "out.json"), timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}:3:" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out.json").exists()
