"""Before and after: run benchmarks in turn on this tree and on another git ref, in one run, side by side.

The other ref is checked out with `git worktree add --detach` into a temporary folder (removed at
the end), or `--tree DIR` names a checkout that exists. Each benchmark runs as a child process of
this Python, once per round on each tree in turn (this tree, the other, this tree, ...: a slow
spell of a shared machine hits both), with `PYTHONPATH` set to that tree and its working folder in
it, and each tree runs its own copy of the benchmark script (this tree's when the other has none),
so a benchmark's children import the tree it measures. Before the first round, a child of each
tree prints which `tlmscore` it imports: the run stops if a tree would measure the other's code.

Per benchmark it prints the wall time and the CPU seconds (user + system, of the benchmark and
every process it started and waited for, from `RUSAGE_CHILDREN`) of each round and their medians
side by side, then the last round's output of both trees in two columns. The figures a benchmark
prints itself (records/s, AUROC, ...) are in those columns.

    python benchmarks/before_after.py --ref main stream validity
    python benchmarks/before_after.py --ref HEAD~3 fetch-http --rounds 3
    python benchmarks/before_after.py --tree ../w-old stream --args stream="--sizes 2000 --command prepare"

Benchmarks (default arguments, `--args NAME="..."` replaces them):
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS: dict[str, tuple[str, str]] = {
    "fetch-http": ("benchmarks/fetch_bench.py", "--mode http"),
    "fetch-https": ("benchmarks/fetch_bench.py", "--mode https"),
    "stream": ("benchmarks/stream_bench.py", "--sizes 10000"),
    "validity": ("benchmarks/validity_bench.py", "--sets dev"),
}
WHICH = "import tlmscore, sys; sys.stdout.write(tlmscore.__file__)"
COLUMN = 100
"""The widest a column of output gets; a longer line is cut."""


@dataclass(frozen=True)
class Tree:
    """A checkout to measure: its label in the table and its folder."""

    label: str
    path: Path


@dataclass(frozen=True)
class Measured:
    """One run of one benchmark on one tree."""

    wall: float
    cpu: float
    code: int
    output: str


def children_cpu() -> float:
    """User + system seconds of every child process waited for so far (and of their own waited-for children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def environment(tree: Tree) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree.path)}


def measure(tree: Tree, script: str, args: list[str], timeout: float) -> Measured:
    """Run one benchmark on `tree`: its wall time, the CPU of it and its children, its output."""
    own = tree.path / script
    path = own if own.exists() else ROOT / script
    before, start = children_cpu(), time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(path), *args], cwd=tree.path, env=environment(tree),
                              capture_output=True, text=True, timeout=timeout, check=False)
        code, output = done.returncode, done.stdout + (f"\n[stderr]\n{done.stderr[-2000:]}" if done.returncode else "")
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        code, output = -1, f"{partial}\n[stopped after {timeout:g} s]"
    return Measured(time.perf_counter() - start, children_cpu() - before, code, str(output))


def check_imports(trees: list[Tree]) -> None:
    """Each tree's children import that tree's `tlmscore`, or the run stops here."""
    for tree in trees:
        found = subprocess.run([sys.executable, "-c", WHICH], cwd=tree.path, env=environment(tree),
                               capture_output=True, text=True, check=True).stdout
        if not Path(found).resolve().is_relative_to(tree.path.resolve()):
            sys.exit(f"{tree.label}: imports tlmscore from {found}, not from {tree.path}")
        print(f"{tree.label:<10} {tree.path}  (tlmscore from {Path(found).parent})")


@contextlib.contextmanager
def checked_out(ref: str, repository: Path = ROOT) -> Iterator[Path]:
    """`ref` of `repository` checked out (detached) in a temporary folder, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="tlmscore-before-")) / "tree"
    git = ["git", "-C", str(repository), "worktree"]
    subprocess.run([*git, "add", "--detach", "--quiet", str(folder), ref], check=True)
    try:
        yield folder
    finally:
        subprocess.run([*git, "remove", "--force", str(folder)], check=False)
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


def side_by_side(left: str, right: str, labels: tuple[str, str]) -> str:
    """Two outputs in two columns, line by line."""
    a, b = left.rstrip().splitlines(), right.rstrip().splitlines()
    width = min(COLUMN, max((len(line) for line in (*a, labels[0])), default=0))
    rows = [f"{labels[0]:<{width}} | {labels[1]}", f"{'-' * width}-+-{'-' * width}"]
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else ""
        y = b[i] if i < len(b) else ""
        rows.append(f"{x[:width]:<{width}} | {y[:COLUMN]}")
    return "\n".join(rows)


def report(name: str, trees: list[Tree], runs: dict[str, list[Measured]]) -> None:
    print(f"\n## {name}\n")
    print(f"{'round':<8}" + "".join(f"{t.label + ' wall s':>16}{t.label + ' CPU s':>16}" for t in trees))
    for i in range(len(runs[trees[0].label])):
        cells = [runs[t.label][i] for t in trees]
        flags = "".join(f"  ({t.label}: exit {m.code})" for t, m in zip(trees, cells, strict=True) if m.code)
        print(f"{i + 1:<8}" + "".join(f"{m.wall:>16.2f}{m.cpu:>16.2f}" for m in cells) + flags)
    medians = {t.label: (statistics.median(m.wall for m in runs[t.label]),
                         statistics.median(m.cpu for m in runs[t.label])) for t in trees}
    print(f"{'median':<8}" + "".join(f"{medians[t.label][0]:>16.2f}{medians[t.label][1]:>16.2f}" for t in trees))
    first, other = medians[trees[0].label], medians[trees[1].label]
    if other[0] > 0 and other[1] > 0:
        print(f"{trees[0].label} / {trees[1].label}: wall {first[0] / other[0]:.2f}, CPU {first[1] / other[1]:.2f}")
    print()
    print(side_by_side(runs[trees[0].label][-1].output, runs[trees[1].label][-1].output,
                       (trees[0].label, trees[1].label)))


def run(names: list[str], trees: list[Tree], rounds: int, extra: dict[str, str], timeout: float) -> int:
    check_imports(trees)
    failed = 0
    for name in names:
        script, default = BENCHMARKS[name]
        args = shlex.split(extra.get(name, default))
        runs: dict[str, list[Measured]] = {t.label: [] for t in trees}
        for _ in range(rounds):
            for tree in trees:  # in turn, so a slow spell of the machine hits both trees
                runs[tree.label].append(measure(tree, script, args, timeout))
        report(name, trees, runs)
        failed += sum(1 for measured in runs.values() for m in measured if m.code)
    return 1 if failed else 0


def main() -> None:
    listing = "".join(f"\n    {name:<12} {script} {args}" for name, (script, args) in BENCHMARKS.items())
    parser = argparse.ArgumentParser(description=f"{__doc__}{listing}\n",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmarks", nargs="+", choices=sorted(BENCHMARKS))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--ref", help="the git ref to compare with (checked out into a temporary worktree)")
    where.add_argument("--tree", type=Path, help="a checkout to compare with, as it is")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each benchmark on each tree (default 1)")
    parser.add_argument("--args", action="append", default=[], metavar='NAME="ARGS"',
                        help="arguments for one benchmark instead of its defaults (repeatable)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one benchmark run may take")
    options = parser.parse_args()
    extra = dict(item.split("=", 1) for item in options.args)
    unknown = set(extra) - set(BENCHMARKS)
    if unknown:
        parser.error(f"--args for unknown benchmarks: {', '.join(sorted(unknown))}")
    print(f"before_after {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, "
          f"{options.rounds} round(s) per tree")
    this = Tree("after", ROOT)
    if options.tree is not None:
        sys.exit(run(options.benchmarks, [this, Tree("before", options.tree.resolve())], options.rounds, extra,
                     options.timeout))
    with checked_out(options.ref) as folder:
        code = run(options.benchmarks, [this, Tree("before", folder)], options.rounds, extra, options.timeout)
    sys.exit(code)


if __name__ == "__main__":
    main()
