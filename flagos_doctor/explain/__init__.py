"""``flagos-doctor explain -- CMD``: the probe's watch in the user's own failing program.

Parent side (never imports torch): :mod:`.runner` resolves the command, starts it with the
watch installed through the interpreter's start-up hook, reads the records it left in its
side-channel file and builds the JSON document; :mod:`.analysis` gives each failure its
cause; :mod:`.terminal` and :mod:`.markdown` render it. Child side, inside the user's
program: :mod:`.startup` (run by a ``sitecustomize.py``) installs the probe's tracer and
catches uncaught exceptions, :mod:`.pytest_plugin` (loaded through ``PYTEST_PLUGINS``)
records each failed test.
"""

SCHEMA = "flagos-doctor/explain/1"

#: The environment variable that carries the child's configuration (JSON) to
#: :mod:`.startup`; left in the environment, so the program's own Python subprocesses are
#: watched too, each recording to a file of its own.
CONFIG_VAR = "FLAGOS_DOCTOR_EXPLAIN"
