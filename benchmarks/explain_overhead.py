"""Explain overhead: a CPU program run bare vs under ``flagos-doctor explain -- CMD``.

Both arms run side by side, alternating round by round (so a busy machine slows both
alike), each a fresh process: the bare arm is ``python PROGRAM``; the explain arm is
``python -m flagos_doctor explain -q --json FILE -- python PROGRAM`` (the watch installed at
interpreter start, every write and read recorded to the side channel, the final state at
exit, the document built and written). Prints the medians and their ratio, of the wall time
and of the CPU time (user + system of the children), against the 1.2x goal.

The CPU test programs (written to a temporary folder):

* ``train``: a small MLP trained for 300 steps on CPU torch;
* ``train-demo``: the same after importing the demo stack, which redirects
  ``torch.cuda.is_available`` (so reads of ``torch.cuda`` go through the read hook);
* ``compile``: ``torch.compile`` (``aot_eager``) of a function, called 200 times;
* ``pytest``: ``python -m pytest`` of a file of five torch tests (the pytest plugin on).

    python benchmarks/explain_overhead.py                      # every program, 5 rounds
    python benchmarks/explain_overhead.py --program train --rounds 9
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

GOAL = 1.2
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRAIN = '''
import torch
{prelude}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
for step in range(300):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {{loss.item():.4f}}")
'''

COMPILE = '''
import torch
def f(x):
    return (x.sin() * 2 + x.cos()).relu().sum(dim=-1)
compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
x = torch.randn(64, 64)
for _ in range(200):
    out = compiled(x)
print(float(out.sum()))
'''

TESTS = '''
import torch

def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))

def test_forward():
    assert _mlp()(torch.randn(16, 32)).shape == (16, 4)

def test_backward():
    model = _mlp()
    model(torch.randn(16, 32)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())

def test_matmul():
    a = torch.randn(128, 128)
    torch.testing.assert_close(a @ torch.eye(128), a)

def test_train_steps():
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(100):
        optimizer.zero_grad()
        model(torch.randn(16, 32)).pow(2).mean().backward()
        optimizer.step()

def test_cuda_is_asked():
    assert torch.cuda.is_available() in (True, False)
'''

PROGRAMS = {
    "train": ("train.py", TRAIN.format(prelude=""), ["train.py"]),
    "train-demo": ("train_demo.py", TRAIN.format(prelude="import flagos_doctor.demo  # redirects torch.cuda.is_available"),
                   ["train_demo.py"]),
    "compile": ("compile.py", COMPILE, ["compile.py"]),
    "pytest": ("test_small.py", TESTS, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_small.py"]),
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], folder: str, env: dict) -> tuple[float, float]:
    cpu = _cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr.decode()[-2000:]}")
    return time.perf_counter() - started, _cpu() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", action="append", choices=sorted(PROGRAMS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, *filter(None, [os.environ.get("PYTHONPATH")])]))
    with tempfile.TemporaryDirectory(prefix="explain-overhead-") as folder:
        for name in args.program or sorted(PROGRAMS):
            filename, source, argv = PROGRAMS[name]
            with open(os.path.join(folder, filename), "w") as handle:
                handle.write(source)
            bare = [args.python, *argv]
            explained = [args.python, "-m", "flagos_doctor", "explain", "-q", "--json",
                         os.path.join(folder, "explain.json"), "--python", args.python, "--", "python", *argv]
            timed(bare, folder, env)  # warm the file cache for both arms
            times: dict[str, list] = {"bare": [], "explain": []}
            for _ in range(args.rounds):
                times["bare"].append(timed(bare, folder, env))
                times["explain"].append(timed(explained, folder, env))
            print(f"program: {name}   rounds: {args.rounds}   python: {args.python}")
            for index, measure in enumerate(("wall", "cpu")):
                medians = {arm: statistics.median(run[index] for run in runs) for arm, runs in times.items()}
                for arm in ("bare", "explain"):
                    text = " ".join(f"{run[index]:.2f}" for run in times[arm])
                    print(f"  {measure:<4} {arm:<7} median {medians[arm]:6.2f} s   runs: {text}")
                ratio = medians["explain"] / medians["bare"]
                print(f"  {measure} ratio explain/bare: {ratio:.2f}x ({'within' if ratio <= GOAL else 'OVER'} the {GOAL}x goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
