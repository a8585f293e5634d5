"""flagos-doctor: diagnose torch_fl / FlagGems / Triton stacks.

The package is split the way pip-audit splits its work:

* *stacks* say what to import in a child process and which device it offers;
* *engines* run inside that child (the probe tracer, the survey worker) and emit plain
  JSON records over a channel;
* pure functions turn records into findings, verdicts, censuses and comparisons;
* *formats* render the JSON documents (terminal, JSON, Markdown).

The parent process (the CLI) never imports torch.
"""

__version__ = "0.1.0"
