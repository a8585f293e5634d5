"""``flagos-doctor report``: real child interpreters, the real probe, real crashes.

Three report runs carry most assertions (each starts an environment child and a probe
child, both importing torch): the demo stack with flag_gems and triton importable, the
same through an interpreter that cannot import them, and a stack that aborts on import.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from flagos_doctor.report import environment, markdown

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_compare import BEFORE, after_doc, results, write  # noqa: E402

SECRETS = {
    "HF_TOKEN": "hf_supersecret_value",
    "FLAGOS_API_KEY": "key-supersecret",
    "GEMS_PASSWORD": "pw-supersecret",
    "FLAGGEMS_DB_URL": "postgresql://doctor:dbsupersecret@db.example/gems",
    "FLAGOS_ALIAS_CUDA": "1",
    "TRITON_CACHE_DIR": "/tmp/triton-cache-for-report",
}

#: sitecustomize for an interpreter that cannot import flag_gems or triton: a meta path
#: finder in front of all others refuses them, as if they were not installed.
HIDE = '''
import sys
class _Hide:
    HIDDEN = ("flag_gems", "triton")
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden for the test)", name=name)
        return None
sys.meta_path.insert(0, _Hide())
'''


def _template(bundle: dict) -> dict:
    return {field["field"]: field["value"] for field in bundle["template"]}


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    from conftest import run_cli

    tmp = tmp_path_factory.mktemp("report")
    survey = write(tmp, "survey.json", after_doc())
    a = write(tmp, "a.json", results(BEFORE))
    env = dict(SECRETS)
    done = run_cli("report", "--stack", "demo", "--survey", survey, "--compare", a, survey,
                   "--json", "bundle.json", "--markdown", "report.md", env=env,
                   cwd=str(tmp))  # as a user runs it: flagos_doctor not in the working folder
    return done, json.loads((tmp / "bundle.json").read_text()), (tmp / "report.md").read_text()


def test_report_with_flag_gems_and_triton(demo_report):
    done, bundle, text = demo_report
    assert done.returncode == 0, done.stderr
    assert bundle["schema"] == "flagos-doctor/report/1"
    fields = _template(bundle)
    assert list(fields) == ["Platform", "Python Version", "PyTorch Version", "torch_fl Version/Branch",
                            "CUDA/MACA/CANN/MUSA Version", "FlagGems Version", "Runtime Configuration"]
    import torch  # the test process may; the CLI never does

    assert fields["PyTorch Version"].startswith(torch.__version__)
    assert "CPU build" in fields["PyTorch Version"] and "vendor suffix cpu" in fields["PyTorch Version"]
    assert fields["FlagGems Version"] == "5.0.2"
    assert fields["torch_fl Version/Branch"] == "not found: torch_fl"
    assert "flagos demo device" in fields["Platform"] and "x1 (flagos)" in fields["Platform"]
    assert fields["Python Version"].startswith(".".join(map(str, sys.version_info[:3])))
    packages = bundle["environment"]["packages"]
    assert packages["triton"]["version"] == "3.9.0" and packages["flag_gems"]["found"]
    for tool in ("mthreads-gmi", "npu-smi", "mx-smi"):
        assert f"not found: {tool}" in text
    for field in fields:
        assert f"| {field} |" in text


def test_report_says_what_it_does_and_what_it_wrote(demo_report):
    # (issue 27's friction, once a report of its own in tests/test_hardening2.py); both files
    # were written: the fixture read them.
    done, _, _ = demo_report
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stderr.splitlines() if line.startswith("flagos-doctor: report: ")]
    assert any("environment" in step for step in steps) and any("probing" in step for step in steps)
    assert "flagos-doctor: report: Markdown report written to report.md" in done.stderr


def test_report_never_prints_secrets(demo_report):
    done, bundle, text = demo_report
    everything = text + json.dumps(bundle) + done.stdout + done.stderr
    for value in ("supersecret",):
        assert value not in everything
    config = {v["name"]: v for v in bundle["runtime_config"]}
    assert config["HF_TOKEN"] == {"name": "HF_TOKEN", "redacted": True}
    assert config["FLAGOS_API_KEY"]["redacted"] and config["GEMS_PASSWORD"]["redacted"]
    assert config["FLAGGEMS_DB_URL"]["value"] == "postgresql://doctor:***@db.example/gems"
    assert config["FLAGOS_ALIAS_CUDA"]["value"] == "1"
    assert "TRITON_CACHE_DIR=/tmp/triton-cache-for-report" in text
    assert "HF_TOKEN=<redacted" in text


def test_report_carries_the_real_probe(demo_report):
    _, bundle, text = demo_report
    probe = bundle["probe"]
    assert "error" not in probe, probe.get("error")
    assert probe["outcome"] == "ok"
    assert probe["schema"] == "flagos-doctor/probe/1"
    assert "### Probe" in text and "- the probe's child: **ran to its end**" in text
    assert any(p["name"] == "torch.cuda.is_available" for p in probe["probes"])


def test_report_survey_and_compare_sections(demo_report):
    _, bundle, text = demo_report
    assert bundle["survey"]["summary"]["registered"] == len(BEFORE)
    assert bundle["survey"]["not_strict"]["neg"] == "FAILED"
    assert "### Survey" in text and "<summary>Overloads not STRICT (2)</summary>" in text
    assert bundle["compare"]["regressions"] == 2
    assert "### Survey comparison" in text and "| `neg` | STRICT | FAILED | regression: newly failing |" in text


def test_markdown_renders_from_the_bundle_alone(demo_report):
    _, bundle, text = demo_report
    assert markdown.render(bundle) == text


def test_report_without_flag_gems_and_triton(tmp_path, cli):
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE)
    python = tmp_path / "python-without-gems"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{hide}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    done = cli("report", "--python", str(python), "--stack", "demo", "--json", "-", "--markdown", str(tmp_path / "r.md"))
    assert done.returncode == 0, done.stderr
    bundle = json.loads(done.stdout)
    fields = _template(bundle)
    assert fields["FlagGems Version"].startswith("not found: flag_gems")
    packages = bundle["environment"]["packages"]
    assert packages["triton"]["found"] is False and "hidden for the test" in packages["triton"]["why"]
    assert packages["torch"]["found"] is True
    assert "CPU build" in fields["PyTorch Version"]
    text = (tmp_path / "r.md").read_text()
    assert "| FlagGems Version | not found: flag_gems" in text
    assert "| triton | not found |" in text
    assert bundle["probe"].get("outcome") == "ok", bundle["probe"]


CRASH = '''
import os
import torch  # noqa: F401
os.abort()
'''


def test_report_of_a_stack_that_crashes_on_import(tmp_path, cli):
    (tmp_path / "crashing_stack.py").write_text(CRASH)
    broken_survey = tmp_path / "survey.json"
    broken_survey.write_text('{"schema": "flagos-doctor/survey/1", "overloads": {')
    # A broken --survey file is the user's to fix: refused before the probe, one line, exit 2.
    refused = cli("report", "--import", "crashing_stack", "--survey", str(broken_survey),
                  "--json", str(tmp_path / "b.json"), env={"PYTHONPATH": str(tmp_path)})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert str(broken_survey) in refused.stderr and "truncated" in refused.stderr
    assert not (tmp_path / "b.json").exists()
    done = cli("report", "--import", "crashing_stack", "--json", str(tmp_path / "b.json"),
               env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    bundle = json.loads((tmp_path / "b.json").read_text())
    text = done.stdout
    env = bundle["environment"]
    assert env["torch"]["build"] == "CPU"  # the steps before the crash are all there
    assert env["errors"]["stack"] == "the child killed by SIGABRT while importing crashing_stack"
    assert "killed by SIGABRT while importing crashing_stack" in text
    assert "accelerator: unknown" in _template(bundle)["Platform"]
    assert bundle["probe"].get("outcome") == "crashed", bundle["probe"]
    assert "Pieces that could not be collected" in text


# -- parts ----------------------------------------------------------------------------
def test_runtime_config_selection_and_redaction():
    found = environment.runtime_config({
        "FLAGOS_BACKEND_CONFIG": "/x.conf", "PATH": "/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "GEMS_SECRET": "s", "TRITON_TOKEN_X": "t", "HOME": "/root",
        "FLAGOS_DOCTOR_CHANNEL": "3,4",
    })
    assert found == [
        {"name": "FLAGOS_BACKEND_CONFIG", "value": "/x.conf"},
        {"name": "GEMS_SECRET", "redacted": True},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "TORCH_DEVICE_BACKEND_AUTOLOAD", "value": "0"},
        {"name": "TRANSFORMERS_OFFLINE", "value": "1"},
        {"name": "TRITON_TOKEN_X", "redacted": True},
    ]


def test_vendor_tool_missing_and_hanging(tmp_path):
    assert environment.run_tool("mx-smi", ["no-such-mx-smi-here"])["why"] == "not found: no-such-mx-smi-here"
    hang = tmp_path / "hanging-smi"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    result = environment.run_tool("hanging-smi", [str(hang)], timeout=1)
    assert result["found"] and result["why"] == "timed out after 1 s"


def test_scrub_hides_secret_values_everywhere():
    from flagos_doctor import redact

    environ = {"FLAGOS_API_KEY": "k-12345678", "FLAGGEMS_DB_URL": "mysql://u:pw-999@h/db", "FLAGOS_X": "1"}
    bundle = {
        "probe": {
            "events": [{"probe": "$FLAGOS_API_KEY", "value": {"repr": "'written-by-the-stack'"}, "seq": 3}],
            "facts": {"env": {"FLAGOS_API_KEY": "k-12345678", "FLAGOS_X": "1"}},
            "notices": ["saw k-12345678 and mysql://u:pw-999@h/db"],
        },
        "store_key": "kept",
    }
    clean = redact.scrub(bundle, redact.secret_values(environ))
    text = json.dumps(clean)
    assert "12345678" not in text and "pw-999" not in text and "written-by-the-stack" not in text
    assert clean["probe"]["facts"]["env"]["FLAGOS_X"] == "1" and clean["store_key"] == "kept"
    assert clean["probe"]["events"][0]["seq"] == 3


def test_report_names_no_file_through_the_temporary_link_folder(demo_report):
    # The demo sets $FLAGOS_BACKEND_CONFIG beside its own __init__.py, which the child imports
    # through /tmp/flagos-doctor-path-<pid>-x: that folder is gone once the report is written.
    done, bundle, text = demo_report
    written = json.dumps(bundle)
    assert "flagos-doctor-path-" not in written and "flagos-doctor-path-" not in text
    [probe] = [p for p in bundle["probe"]["probes"] if p["name"] == "$FLAGOS_BACKEND_CONFIG"]
    conf = probe["final"]["repr"].strip("'")
    assert conf.endswith("/flagos_doctor/demo/backends_demo.conf") and os.path.isfile(conf)
    assert conf in text
