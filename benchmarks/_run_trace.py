"""What a `tlmscore prepare` run waits on: timestamps of each page's phases, and the run's own.

`command(python, out, argv)` runs the command line in a new interpreter (as `_cpu_account` does,
and writing the same CPU marks) that also wraps a few of the fetcher's methods, without changing
them, to record when each page was queued, got its request slots, got its response head, had its
body, waited for a worker, and was extracted; when connections and TLS handshakes were made; when
the extraction template was spawned and each worker forked; when the cache wrote; retries; when
the rows of each chunk were done; and when the fetcher closed. Times are `time.monotonic()`
(one clock for every process), written as seconds since the interpreter started.

It names private modules of tlmscore (in the child's code, by name, never imported here) on purpose: the
phases of a page are inside the fetcher and the extraction pool, and a module or method an older tree lacks is
left untraced, so one trace runs against any tree.

`summary(trace)` reads that into the run's milestones and the path of its last page (what the
end of the run waited for), and `describe(summary)` prints it on a few lines.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import _cpu_account

INSTRUMENT = r"""
import functools, importlib, threading
_t0 = time.monotonic()
_events = []
def _ev(kind, key=None, value=None):
    _events.append((time.monotonic() - _t0, kind, key, value))

def _wrap_async(cls, name, before=None, after=None, key=lambda *a, **k: None):
    inner = getattr(cls, name, None) if cls is not None else None
    if inner is None:  # an older tree without it: not traced
        return
    @functools.wraps(inner)
    async def wrapped(*args, **kwargs):
        k = key(*args, **kwargs)
        if before:
            _ev(before, k)
        try:
            return await inner(*args, **kwargs)
        finally:
            if after:
                _ev(after, k)
    setattr(cls, name, wrapped)

def _wrap(cls, name, before=None, after=None, key=lambda *a, **k: None):
    inner = getattr(cls, name, None) if cls is not None else None
    if inner is None:
        return
    @functools.wraps(inner)
    def wrapped(*args, **kwargs):
        k = key(*args, **kwargs)
        if before:
            _ev(before, k)
        try:
            return inner(*args, **kwargs)
        finally:
            if after:
                _ev(after, k)
    setattr(cls, name, wrapped)

def _module(name):
    try:
        return importlib.import_module(name)
    except ImportError:  # an older tree without it: its part is not traced
        return None

def _instrument():
    _download, _transport, cache, fetch = (_module(f"tlmscore.evidence.{n}") for n in ("_download", "_transport",
                                                                                     "cache", "fetch"))
    _workers = _module("tlmscore.evidence._workers") or _module("tlmscore.evidence.workers")
    anyio_backend = _module("httpcore._backends.anyio")
    _wrap_async(_download.Downloader, "download", "queued", "downloaded", key=lambda s, url, *a: url)
    _wrap_async(_download.Downloader, "_exchange", "slot", None, key=lambda s, url, *a: url)
    _wrap(_download.Downloader, "_backoff", "retry", None)
    _wrap_async(_transport.GuardedTransport, "handle_async_request", None, "head",
                key=lambda s, request: str(request.url))
    _wrap_async(_transport.GuardedBackend, "connect_tcp", "connect", "connected",
                key=lambda s, host=None, *a, **k: host or k.get("host"))
    _wrap_async(anyio_backend.AnyIOStream, "start_tls", "tls", "tls_done", key=lambda *a, **k: None)
    _wrap_async(fetch.Fetcher, "_read", None, "body", key=lambda s, url, *a: url)
    _wrap_async(fetch.Fetcher, "_extracted", "to_extract", "extracted", key=lambda s, page, *a: page.url)
    _wrap_async(fetch.Fetcher, "aclose", "close", "closed")
    _wrap_async(fetch.Fetcher, "__aenter__", "open", "opened")
    inner_close = fetch.Fetcher.aclose
    async def aclose(self):
        marks["threads"] = _thread_cpu()
        await inner_close(self)
    fetch.Fetcher.aclose = aclose
    _wrap_async(cache.PageCache, "lookup", "lookup", "looked_up")
    _wrap(cache.PageCache, "_write_pending", "cache_write", "cache_written", key=lambda s: len(s._pending))
    _wrap(_workers.ExtractPool, "start", "pool_start", None)
    _processes = _module("tlmscore.evidence._processes")  # the process handles, or (older trees) the pool's
    template = getattr(_processes or _workers, "Template" if _processes else "_Template", None)
    worker = getattr(_processes or _workers, "Worker" if _processes else "_Worker", None)
    _wrap(template, "__init__", "template", "template_up")
    _wrap(worker, "__init__", "fork", "worker")
    _wrap(worker, "run", "work", "worked", key=lambda s, task: task[2])
    _wrap_async(_module("tlmscore.pipeline._stages"), "_rendered", "chunk", "rows")

def _thread_cpu():
    # CPU seconds of each live thread of this process, by thread name (Linux)
    names = {t.native_id: t.name for t in threading.enumerate()}
    found = {}
    for tid, name in names.items():
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        key = name.rstrip("0123456789_-") or name
        found[key] = found.get(key, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found

def _dump_trace():
    _ev("exit")
    with open(TRACE, "w") as f:
        json.dump({"events": _events, "marks": marks, "t0": _t0}, f)
"""

# Loaded by every interpreter of the run (the extraction template is spawned, its workers forked
# from it) through a `sitecustomize` on PYTHONPATH: in the template it wraps the warm-up and each
# page's extraction, and each process appends its lines (absolute monotonic time, pid, what, CPU
# s) to the file named by TLMSCORE_TRACE_WORKERS.
SITE = r"""
import os, sys, time
_OUT = os.environ.get("TLMSCORE_TRACE_WORKERS")

def _line(what, url=""):
    cpu = time.process_time()
    with open(_OUT, "a") as f:
        f.write(f"{time.monotonic()}\t{os.getpid()}\t{what}\t{cpu}\t{url}\n")

class _Hook:
    def find_spec(self, name, path=None, target=None):
        if name != "tlmscore.evidence._template":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        inner = spec.loader.exec_module
        def exec_module(module):
            inner(module)
            warm, extract = module._warm_up, module._timed_extract
            def _warm_up():
                _line("warm-up")
                warm()
                _line("warmed")
            def _timed_extract(*args):  # (body, content_type, url, …): the arguments after url vary by tree
                _line("extract", args[2])
                try:
                    return extract(*args)
                finally:
                    _line("extracted", args[2])
            module._warm_up, module._timed_extract = _warm_up, _timed_extract
        spec.loader.exec_module = exec_module
        return spec

if _OUT:
    _line("start")
    sys.meta_path.insert(0, _Hook())
"""


def site_folder(work: Path) -> Path:
    """A folder holding the `sitecustomize` that traces the extraction processes (put it on PYTHONPATH)."""
    folder = work / "trace-site"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITE)
    return folder


def read_workers(path: Path, t0: float) -> list[tuple[float, int, str, float, str]]:
    """The extraction processes' lines, their times made relative to the run's start."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        when, pid, what, cpu, url = line.split("\t")
        rows.append((float(when) - t0, int(pid), what, float(cpu), url))
    return rows


def command(python: str, out: Path, trace: Path, argv: list[str]) -> list[str]:
    """The command that runs `tlmscore ARGV`, writing its CPU marks to `out` and its trace to `trace`."""
    snippet = _cpu_account.SNIPPET.replace(
        "OUT, sys.argv = sys.argv[1], [\"tlmscore\", *sys.argv[2:]]",
        "OUT, TRACE, sys.argv = sys.argv[1], sys.argv[2], [\"tlmscore\", *sys.argv[3:]]" + INSTRUMENT)
    snippet = snippet.replace("atexit.register(dump)", "atexit.register(dump)\natexit.register(_dump_trace)")
    snippet = snippet.replace('marks["startup"] = used(resource.RUSAGE_SELF)',
                              'marks["startup"] = used(resource.RUSAGE_SELF)\n_ev("imported")\n_instrument()')
    if "_instrument()" not in snippet or "_dump_trace" not in snippet:
        raise RuntimeError("_cpu_account.SNIPPET changed: the trace cannot be added to it")
    return [python, "-c", snippet, str(out), str(trace), *argv]


def read(trace: Path) -> dict[str, Any] | None:
    """The events a run wrote, or None when it wrote none."""
    try:
        loaded: dict[str, Any] = json.loads(trace.read_text())
    except (OSError, ValueError):
        return None
    return loaded


def _first(events: list, kind: str) -> float:
    return min((t for t, k, _, _ in events if k == kind), default=float("nan"))


def _last(events: list, kind: str) -> float:
    return max((t for t, k, _, _ in events if k == kind), default=float("nan"))


def summary(trace: dict[str, Any]) -> dict[str, Any]:
    """The run's milestones (s since the interpreter started), counts, and its last page's path."""
    events = trace["events"]
    if not any(kind == "body" for _, kind, _, _ in events):  # trees whose fetcher has no `_read`: the download's end
        events = [(t, "body" if kind == "downloaded" else kind, key, v) for t, kind, key, v in events]
    by_url: dict[str, dict[str, float]] = {}
    for t, kind, key, _ in events:
        if isinstance(key, str) and kind in ("queued", "slot", "head", "body", "to_extract", "work", "worked",
                                             "extracted", "downloaded"):
            url = key
            by_url.setdefault(url, {}).setdefault(kind, t)
            if kind in ("extracted", "worked"):
                by_url[url][kind] = t
    milestones = {
        "imported": _first(events, "imported"),
        "fetcher open": _first(events, "open"),
        "opened": _first(events, "opened"),
        "chunk": _first(events, "chunk"),
        "lookup": _first(events, "lookup"),
        "looked up": _first(events, "looked_up"),
        "first request": _first(events, "slot"),
        "template spawned": _first(events, "template"),
        "first worker ready": _first(events, "worker"),
        "first body": _first(events, "body"),
        "last body": _last(events, "body"),
        "last extracted": _last(events, "extracted"),
        "rows done": _last(events, "rows"),
        "closing": _last(events, "close"),
        "fetcher closed": _last(events, "closed"),
        "exit": _last(events, "exit"),
    }
    pages = [p for p in by_url.values() if "extracted" in p]
    last_url = max((u for u in by_url if "extracted" in by_url[u]), key=lambda u: by_url[u]["extracted"],
                   default=None)
    last = by_url.get(last_url, {}) if last_url else {}
    hosts: dict[str, float] = {}
    counts: dict[str, int] = {}
    for url, p in by_url.items():
        host = url.split("/")[2]
        hosts[host] = max(hosts.get(host, 0.0), p.get("body", 0.0))
        counts[host] = counts.get(host, 0) + 1
    slowest_host = max(hosts, key=hosts.__getitem__) if hosts else ""
    waits = [p["work"] - p["to_extract"] for p in pages if "work" in p and "to_extract" in p]
    busy = [p["worked"] - p["work"] for p in pages if "work" in p and "worked" in p]
    last_body = milestones["last body"]
    backlog = [p for p in pages if p.get("worked", 0.0) > last_body]
    longest = sorted(((p["worked"] - p["work"], p.get("body", float("nan")), u) for u, p in by_url.items()
                      if "work" in p and "worked" in p), reverse=True)[:3]
    writes = [(t, key) for t, k, key, _ in events if k == "cache_write"]
    written = [t for t, k, _, _ in events if k == "cache_written"]
    return {
        **_worker_side(trace.get("workers", []), by_url),
        "server cpu": trace.get("server cpu", float("nan")),
        "milestones": milestones,
        "connections": sum(1 for _, k, _, _ in events if k == "connect"),
        "tls": sum(1 for _, k, _, _ in events if k == "tls"),
        "retries": sum(1 for _, k, _, _ in events if k == "retry"),
        "workers forked": sum(1 for _, k, _, _ in events if k == "worker"),
        "cache writes": len(writes),
        "cache write s": sum(b - a for (a, _), b in zip(writes, written, strict=False)),
        "pages": len(by_url),
        "worker wait median": statistics.median(waits) if waits else float("nan"),
        "worker wait max": max(waits, default=float("nan")),
        "worker busy s": sum(busy),
        "backlog at last body": (len(backlog), sum(p["worked"] - max(p["work"], last_body) for p in backlog)),
        "longest extractions": longest,
        "last page": {"url": last_url, **{k: last.get(k, float("nan")) for k in
                                          ("queued", "slot", "head", "body", "work", "worked", "extracted")}},
        "last host": {"host": slowest_host, "pages": counts.get(slowest_host, 0),
                      "last body": hosts.get(slowest_host, float("nan"))},
    }


def _worker_side(lines: list, by_url: dict[str, dict[str, float]]) -> dict[str, Any]:
    """From the extraction processes' own lines: when the template was warm, the extraction's wall
    and CPU in the workers, and the hand-off: from a page being ready (its body in, a worker free)
    to the worker starting on it."""
    if not lines:
        return {}
    warmed = min((t for t, _, what, _, _ in lines if what == "warmed"), default=float("nan"))
    started = min((t for t, _, what, _, _ in lines if what == "warm-up"), default=float("nan"))
    by_pid: dict[int, list] = {}
    for line in lines:
        if line[2] in ("extract", "extracted"):
            by_pid.setdefault(line[1], []).append(line)
    wall = cpu = 0.0
    handoffs = []
    for rows in by_pid.values():
        free = float("-inf")
        for begin, end in zip(rows[::2], rows[1::2], strict=False):
            wall += end[0] - begin[0]
            cpu += end[3] - begin[3]
            ready = by_url.get(begin[4], {}).get("to_extract", float("nan"))
            handoffs.append(begin[0] - max(ready, free))
            free = end[0]
    handoffs = [h for h in handoffs if not math.isnan(h)]
    return {"template warm-up": (started, warmed), "extraction wall": wall, "extraction cpu": cpu,
            "hand-off sum": sum(handoffs), "hand-off median": statistics.median(handoffs) if handoffs else float("nan")}


def describe(found: dict[str, Any]) -> str:
    """A run's summary on a few lines."""
    m = found["milestones"]
    line1 = "  ".join(f"{name} {t:.2f}" for name, t in m.items())
    last = found["last page"]
    path = " → ".join(f"{k} {last[k]:.2f}" for k in ("queued", "slot", "head", "body", "work", "extracted"))
    host = found["last host"]
    return (f"    {line1}\n"
            f"    last page {str(last['url']).split('/', 3)[-1][:40]}: {path}\n"
            f"    last host {host['host']} ({host['pages']} pages) done at {host['last body']:.2f}; "
            f"connections {found['connections']}, TLS {found['tls']}, retries {found['retries']}, "
            f"workers {found['workers forked']}, worker wait median {found['worker wait median']:.3f} s "
            f"max {found['worker wait max']:.2f} s; cache writes {found['cache writes']} "
            f"({found['cache write s']:.2f} s)\n"
            f"    workers busy {found['worker busy s']:.2f} s (wall); after the last body: "
            f"{found['backlog at last body'][0]} pages, {found['backlog at last body'][1]:.2f} s of work; longest: "
            + ", ".join(f"{w:.2f} s (body at {b:.2f})" for w, b, _ in found["longest extractions"])
            + _describe_workers(found))


def _describe_workers(found: dict[str, Any]) -> str:
    if "extraction wall" not in found:
        return ""
    start, warm = found["template warm-up"]
    return (f"\n    template warming {start:.2f}-{warm:.2f}; in the workers: extraction "
            f"{found['extraction wall']:.2f} s wall, {found['extraction cpu']:.2f} s CPU; hand-off (page ready to "
            f"worker on it) "
            f"{found['hand-off sum']:.2f} s in all, median {found['hand-off median'] * 1000:.1f} ms")
