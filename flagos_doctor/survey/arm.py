"""The survey of one arm of ``survey --compare``, in the arm's built worktree:
``python -m flagos_doctor.survey.arm OPTIONS_JSON``, the options as
:func:`flagos_doctor.options.options_json` writes them (:mod:`flagos_doctor.compare.build`
starts it by name); errors reported as the command line does."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import typer

    from flagos_doctor.errors import one_line_errors
    from flagos_doctor.options import options_from_json

    try:
        with one_line_errors():
            from flagos_doctor.survey import command

            return command.run(options_from_json(argv[0])) or 0
    except typer.Exit as exc:  # how one_line_errors ends a failed command
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
