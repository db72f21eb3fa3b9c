"""Where the CPU of a `tlmscore prepare` run goes: the fetching process and its extraction workers.

`command(out, argv)` runs the command line in a new interpreter that writes, as it exits, the CPU
(user + system seconds) of its own process after the imports (`startup`) and at the end
(`parent`), and of the worker processes it started and reaped (`workers`, from
`RUSAGE_CHILDREN`: every worker is joined before the run ends). Started with `-c`, not from a
file, so the spawned workers import no main module (the `tlmscore` executable's main module is a
two-line script; this is the same).

`account(cold, warm, one, extraction)` splits a cold run's CPU into stages, each one a difference
of measured totals, so that the stages add up to the whole:

- parent, start-up: importing the command line (`startup` of the cold run);
- parent, cache → rows: reading the cache, rendering and writing, as a warm run does them
  (`parent - startup` of a warm run, which makes no request);
- parent, fetching: the rest of the cold run's fetching process: HTTP and TLS, the address guard,
  storing pages, handing bodies to the workers and taking texts back;
- workers, start-up: spawning the workers, their imports and warm-up (the workers of a run of
  one small page);
- workers, extraction: what extracting the same pages costs serially in one process
  (`extraction`, measured by the benchmark itself);
- workers, beyond extraction: the rest of the workers' CPU (receiving bodies, sending texts,
  each page's limits; and whatever running two at once on shared cores adds).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

SNIPPET = """
import atexit, json, os, resource, sys, time
def used(who):
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime
marks = {}
def dump():
    marks.update(parent=used(resource.RUSAGE_SELF), workers=used(resource.RUSAGE_CHILDREN))
    with open(OUT, "w") as f:
        json.dump(marks, f)
OUT, sys.argv = sys.argv[1], ["tlmscore", *sys.argv[2:]]
atexit.register(dump)
import tlmscore.__main__ as entry
getattr(entry, "own_process", lambda: None)()  # the executable's set-up (in `start` itself in older trees)
import tlmscore.cli
from tlmscore.__main__ import start
marks["startup"] = used(resource.RUSAGE_SELF)
start()
"""

STAGES = (
    ("parent, start-up (imports)", "p_start"),
    ("parent, fetching (HTTP, TLS, guard, store, hand-off)", "p_fetch"),
    ("parent, cache -> rows (read, render, write)", "p_rows"),
    ("workers, start-up (spawn, imports, warm-up)", "w_start"),
    ("workers, extraction (serial, one process)", "w_extract"),
    ("workers, beyond extraction", "w_rest"),
)


def command(python: str, out: Path, argv: list[str]) -> list[str]:
    """The command that runs `tlmscore ARGV` and writes its CPU marks to `out`."""
    return [python, "-c", SNIPPET, str(out), *argv]


def read(out: Path) -> dict[str, float] | None:
    """The marks a run wrote, or None when it wrote none (it crashed)."""
    try:
        marks: dict[str, float] = json.loads(out.read_text())
    except (OSError, ValueError):
        return None
    return marks


def account(cold: dict[str, float], warm: dict[str, float], one: dict[str, float], extraction: float) -> dict:
    """A cold run's CPU by stage (see the module's doc); the stages add up to `total`."""
    rows = warm["parent"] - warm["startup"]
    stages = {
        "p_start": cold["startup"],
        "p_rows": rows,
        "p_fetch": cold["parent"] - cold["startup"] - rows,
        "w_start": one["workers"],
        "w_extract": extraction,
        "w_rest": cold["workers"] - one["workers"] - extraction,
    }
    stages["total"] = cold["parent"] + cold["workers"]
    stages["beyond"] = stages["total"] - extraction
    return stages


def mean_account(accounts: list[dict]) -> dict:
    """The mean of each stage over runs (a mean, not a median, so the stages still add up)."""
    return {key: statistics.fmean(a[key] for a in accounts) for key in accounts[0]} if accounts else {}


def print_accounts(accounts: dict[str, list[dict]], pages: int) -> None:
    """One column per tree: each stage's CPU seconds, the total, and the CPU beyond extraction."""
    trees = [tree for tree, runs in accounts.items() if runs]
    if not trees:
        return
    means = {tree: mean_account(accounts[tree]) for tree in trees}
    runs = min(len(accounts[tree]) for tree in trees)
    print(f"\nCPU account of a cold run, user + system s, all processes (mean of {runs} run(s), {pages} pages)")
    print(f"{'stage':<56}" + "".join(f"{tree or 'this tree':>14}" for tree in trees))
    for label, key in (*STAGES, ("total", "total"), ("beyond extraction (total - extraction)", "beyond")):
        print(f"{label:<56}" + "".join(f"{means[tree][key]:>14.2f}" for tree in trees))
