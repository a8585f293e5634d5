"""``flagos-doctor ci-merge DIR... --comment-file PATH``: the vendors' comparisons, one comment.

Exit codes: 0 every vendor compared and nothing regressed, 1 otherwise, 2 bad input: a
box whose comparison cannot be read or does not hold together is said once on stderr, after
the comment (its row says why; the other boxes are merged).
"""

from __future__ import annotations

from flagos_doctor import checks, output
from flagos_doctor.ci import merge
from flagos_doctor.errors import EXIT_FINDING, EXIT_OK, BadInput
from flagos_doctor.options import CiMergeOptions


def run(options: CiMergeOptions) -> int:
    checks.writable_file(options.comment_file, "--comment-file")
    checks.writable_file(options.json_path, "--json")
    merged = merge.build(options.paths)
    output.emit(output.as_written(merged), {"json": options.json_path, "pr-comment": options.comment_file},
                terminal=None if options.quiet else output.STDOUT_ELSE_STDERR)
    unreadable = [v for v in merged["vendors"] if v["state"] == "unreadable"]
    if unreadable:
        others = f" (and {len(unreadable) - 1} other boxes)" if len(unreadable) > 1 else ""
        raise BadInput(f"{unreadable[0]['first_line']}{others}; each has its row, the other boxes were merged",
                       unreadable[0]["path"])
    return EXIT_OK if merged["safe"] else EXIT_FINDING
