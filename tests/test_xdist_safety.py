"""What makes the suite safe to run on many workers at once and in any order
(tests/conftest.py): a run a test starts without ``--store`` files into its own process's
store, never the user's nor another worker's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from conftest import TEST_STORE_PREFIX


def test_a_run_without_store_files_into_this_processs_store_not_the_users(tmp_path):
    store = os.environ["FLAGOS_DOCTOR_STORE"]
    assert os.path.basename(store).startswith(TEST_STORE_PREFIX)
    assert os.path.dirname(store) == tempfile.gettempdir() and os.path.isdir(store)  # tempfile.mkdtemp's: this process's
    done = subprocess.run([sys.executable, "-c", "from flagos_doctor.store import default_root; print(default_root())"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert done.stdout.strip() == store, done.stderr  # what a child's Store() takes without --store
