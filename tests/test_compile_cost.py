"""The shipped cold compile costs (survey/compile_cost.py) against the installed flag_gems.

The table says which FlagGems tuned-configuration lists each compile-heavy family
autotunes over, and how long each list is in flag_gems 5.0.2. Read from the installed
flag_gems itself (``runtime.get_tuned_config``, in a child: the test process does not
import torch), so a kernel that gains configurations, or a new long list, fails here
until the table is brought up to date.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from flagos_doctor.survey import compile_cost

#: A tuned-configuration list this long or longer must belong to a family of the table.
LONG_LIST = 20

_READ = r"""
import json, os, yaml, flag_gems
from flag_gems import runtime
path = os.path.join(os.path.dirname(flag_gems.__file__), "runtime", "backend", "_nvidia", "tune_configs.yaml")
with open(path) as handle:
    keys = sorted(yaml.safe_load(handle))
print(json.dumps({"version": flag_gems.__version__,
                  "lengths": {key: len(runtime.get_tuned_config(key)) for key in keys}}))
"""


def installed_lengths(tmp_path) -> dict:
    env = {**os.environ, "GEMS_VENDOR": "nvidia", "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/gems.db"}
    done = subprocess.run([sys.executable, "-c", _READ], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_cold_cost_table_matches_the_installed_flag_gems(tmp_path):
    found = installed_lengths(tmp_path)
    assert found["version"] == "5.0.2"
    lengths = found["lengths"]
    for name, cost in compile_cost.COLD_COST.items():
        for key, count in cost.configs.items():
            assert lengths.get(key) == count, f"{name}: flag_gems {found['version']} has {lengths.get(key)} {key!r} configurations"
    for key, (count, _) in compile_cost.CHEAP_LONG_LISTS.items():
        assert lengths.get(key) == count, f"{key!r} was measured cheap with {count} configurations, has {lengths.get(key)}"
    named = {key for cost in compile_cost.COLD_COST.values() for key in cost.configs} | set(compile_cost.CHEAP_LONG_LISTS)
    long_lists = {key for key, count in lengths.items() if count >= LONG_LIST}
    assert long_lists <= named, f"long configuration lists not in compile_cost: {sorted(long_lists - named)}"


def test_a_case_is_predicted_its_familys_cold_cost():
    assert compile_cost.predicted(("mm", ["2d-f32", "1d-f32"])) == 2 * compile_cost.COLD_COST["mm"].seconds
    assert compile_cost.predicted(("abs", None)) == 0.0
