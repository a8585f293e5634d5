"""Allow ``python -m flagos_doctor``."""

from flagos_doctor.cli import main

main()
