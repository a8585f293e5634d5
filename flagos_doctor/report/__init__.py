"""``flagos-doctor report``: Markdown for a GitHub bug issue, from one JSON bundle.

* :mod:`.envchild` (child side, run with ``--python``): interpreter, package versions and
  provenance, torch build, the stack's accelerator, each step sent as it finishes;
* :mod:`.environment` (parent): runs that child, the vendor tools (each with its own
  timeout), toolkit version files, and the runtime configuration with secrets redacted;
* :mod:`.bundle`: gathers every piece (the probe via ``run_probe``, an optional survey
  summary and comparison) into the bundle, and fills the bug template's fields;
* :mod:`.markdown`: renders the bundle (its view in :mod:`flagos_doctor.output`); :mod:`.command`: the CLI entry.

A missing or broken piece is written into the report as such; it never stops it.
"""
