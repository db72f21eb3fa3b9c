"""Evidence fetching, tlmscore against cleanlab-tlm, on a local web with real latency.

A server process on 127.0.0.x serves real article pages (the shared corpus's `corpus/pages/` beside the repo,
else generated HTML) with a fixed latency per request and optional faults, and counts every request.
A batch of N transcripts citing K URLs each, drawn from U unique URLs, is written as JSONL. Then, in
one run of this script, `--runs` passes (3), each running every row once, in turn, so that a change
in the machine's load reaches every row alike:

- the network floor: a bare keep-alive httpx loop fetching the unique URLs under the same limits
  (32 in flight, 6 per host), timed as a whole process (interpreter and imports included); and
  tlmscore's own request side doing the same (`tlmscore downloads`, not extracted);
- cleanlab-tlm 1.1.39: `form_prompt_string(messages, tools, response=Response)` for every transcript
  (it fetches the web_search_call sources with `requests.get`), in a child process, in the first
  `--cleanlab-runs` passes (every pass by default);
- tlmscore: `tlmscore prepare BATCH -o OUT.jsonl --cache-dir TMP --allow-host ...` cold (an empty
  cache of its own), then warm in a new process; then the same with `-o OUT.parquet` (unless
  `--no-parquet`), which adds the Parquet encoding (or, with `--direct`, `Fetcher.pages` over the
  planned URLs in a child process). JSONL is the row format closest to what the cleanlab-tlm loop
  produces (strings in memory).

It prints each row's median wall time over the passes, fastest-slowest and spread ((slowest -
fastest) / median), the requests the run that made the most made (counted at the server), the
citations each tlmscore run extracted text for, and the CPU of the run and every process it
started. The limit, from figures measured in the same run: max(the bare client's wall time, the
import of httpx and trafilatura + (extraction CPU + the bare client's CPU) / cores), where
extraction CPU is the cited pages extracted serially in this process.

For each cold run of a tree run from source it prints what the run waited on (`_run_trace.py`):
when the imports ended, the first request went out, the extraction template and first worker were
ready, the first and last bodies came in and the last page was extracted, the rows were done and
the run ended; the last page's path, the backlog of extraction left when the last body came in,
connections, TLS handshakes and retries, the extraction processes' own view (extraction wall and
CPU, the hand-off from a page being ready to its worker starting on it); and the CPU of the
fetching process (by thread), of its extraction processes and of the web's server. Then a CPU
account of a cold run by stage (`_cpu_account.py`).

Every child runs in the scratch folder, not in a checkout: trees whose extraction workers came
from a forkserver (before 2026-11-23) had it preload their modules with its working directory first
on `sys.path` (Python 3.11), so such a tree's `tlmscore` run from another checkout extracted with
that checkout's modules, failed every page and looked fast. A run that extracted no citation, or
not all of them on a web without faults, is flagged `(!)`.

`--cli LABEL=PATH` (repeatable) times another tree's `tlmscore` executable in the same run, in
turn with this tree's on the same web (an A/B of two commits: `git worktree add`, a venv each);
`--tree LABEL=DIR` does the same for another checkout's source, run with this Python.
`--pageset tune|judge|held` serves pages of varied size and structure (`_page_sets.py`): a tuning
set, a judging set, and a set no change was tried on.

Two webs, both by default (`--mode http|https|both`), reported side by side:
- http: U unique URLs (`--unique`, 300) on 127.0.0.1-8, 200 ms server latency;
- https (`_https_web.py`): 150 pages spread by Zipf's law over 29 sites on 127.0.0.1-29, each
  behind a delay line that puts a 100 ms round trip on every exchange (TCP set-up, each TLS
  flight, each request), 50 ms server time, certificates from a local authority given as
  `--ca-bundle` (and `REQUESTS_CA_BUNDLE` for cleanlab-tlm).

    python benchmarks/fetch_bench.py --runs 5 --mode both --pageset held --transcripts 200 --unique 150 --no-parquet
    python benchmarks/fetch_bench.py --mode https --skip-cleanlab
    python benchmarks/fetch_bench.py --mode http --skip-cleanlab --cli before=../old/.venv/bin/tlmscore
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _cpu_account
import _https_web
import _page_sets
import _run_trace
from _common import ROOT

PER_HOST = 6  # Settings.per_host default
CLEANLAB_ATTEMPTS = 4
CHILD_TIMEOUT = 300.0  # seconds; a run that hangs (it happens to cleanlab-tlm's) counts as a crash


# --------------------------------------------------------------------------------------------- pages

def url_for(index: int, port: int, hosts: int) -> str:
    return f"http://127.0.0.{1 + index % hosts}:{port}/{index}/article-{index}.html"


def fault_for(index: int, rate: float) -> str | None:
    """A deterministic fault for some URLs: 404, one 503 before success, or an image."""
    if rate <= 0 or random.Random(index).random() >= rate:
        return None
    return ("404", "503once", "png")[index % 3]


# -------------------------------------------------------------------------------------------- server

def serve(port_out, counter, ready, options: dict) -> None:
    """Child process: an asyncio HTTP/1.1 server on 127.0.0.1..hosts, one port, counting requests."""
    latency, hosts, fault_rate = options["latency"], options["hosts"], options["fault_rate"]
    bodies, _ = _page_sets.bodies(options["pageset"], options["count"])
    failed_once: set[str] = set()

    def reply(path: str) -> tuple[int, str, bytes]:
        parts = path.split("/")
        if len(parts) < 3 or not parts[1].isdigit():
            return 404, "text/plain", b"not found"
        index = int(parts[1])
        fault = fault_for(index, fault_rate)
        if fault == "404":
            return 404, "text/plain", b"not found"
        if fault == "png":
            return 200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 2000
        if fault == "503once" and path not in failed_once:
            failed_once.add(path)
            return 503, "text/plain", b"busy"
        return 200, "text/html; charset=utf-8", bodies[index % len(bodies)]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                close = False
                while True:
                    header = await reader.readline()
                    if header in (b"\r\n", b"\n", b""):
                        break
                    if header.lower().startswith(b"connection:") and b"close" in header.lower():
                        close = True
                with counter.get_lock():
                    counter.value += 1
                await asyncio.sleep(latency)
                status, ctype, body = reply(line.split()[1].decode())
                head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                        f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        f"{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n")
                writer.write(head.encode() + body)
                await writer.drain()
                if close:
                    break
        except (ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        first = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port = first.sockets[0].getsockname()[1]
        servers = [first] + [
            await asyncio.start_server(handle, f"127.0.0.{n}", port, backlog=1024) for n in range(2, hosts + 1)
        ]
        port_out.value = port
        ready.set()
        await asyncio.gather(*(s.serve_forever() for s in servers))

    asyncio.run(main())


# --------------------------------------------------------------------------------------------- batch

def build_batch(path: Path, unique_urls: list[str], *, n: int, k: int) -> list[list[str]]:
    """Write N transcripts, each citing K distinct URLs drawn at random from U (seeded, repeatable)."""
    rng = random.Random(42)
    cited_lists = []
    with path.open("w", encoding="utf-8") as out:
        for t in range(n):
            urls = rng.sample(unique_urls, min(k, len(unique_urls)))
            cited_lists.append(urls)
            out.write(json.dumps(transcript(t, urls)) + "\n")
    return cited_lists


def transcript(t: int, urls: list[str]) -> dict:
    text = " ".join(f"Claim {j} [{j + 1}]." for j in range(len(urls)))
    annotations = [
        {"type": "url_citation", "url": u, "title": f"Source {j}", "start_index": 0, "end_index": 10}
        for j, u in enumerate(urls)
    ]
    return {
        "id": f"t{t}",
        "request": {"model": "gpt-4.1", "input": f"Question {t}: what happened?", "tools": [{"type": "web_search"}]},
        "response": {
            "id": f"resp_{t}", "object": "response", "model": "gpt-4.1", "created_at": 1_700_000_000,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [{"type": "web_search"}],
            "output": [
                {"type": "web_search_call", "id": f"ws_{t}", "status": "completed",
                 "action": {"type": "search", "query": f"question {t}",
                            "sources": [{"type": "url", "url": u} for u in urls]}},
                {"type": "message", "id": f"msg_{t}", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": annotations}]},
            ],
        },
    }


# ------------------------------------------------------------------------------------ child processes

def child_cleanlab(batch: Path) -> None:
    """Run cleanlab-tlm's form_prompt_string over the batch; print the timing as JSON."""
    import warnings

    from cleanlab_tlm.utils.chat import form_prompt_string
    from openai.types.responses import Response

    warnings.simplefilter("ignore")
    records = [json.loads(line) for line in batch.read_text().splitlines()]
    responses = [Response.model_validate(r["response"]) for r in records]
    start = time.perf_counter()
    chars = 0
    for record, response in zip(records, responses, strict=True):
        messages = [{"role": "user", "content": record["request"]["input"]}]
        chars += len(form_prompt_string(messages, record["request"]["tools"], use_responses=True, response=response))
    print(json.dumps({"seconds": time.perf_counter() - start, "chars": chars}))


def child_direct(batch: Path, cache: Path, hosts: int, concurrency: int, ca: str = "") -> None:
    """Fetch the batch's planned URLs with `Fetcher.pages`; print the timing and statuses as JSON."""
    from tlmscore.evidence.fetch import Fetcher
    from tlmscore.evidence.plan import Plan
    from tlmscore.settings import Settings

    records = [json.loads(line) for line in batch.read_text().splitlines()]
    cited = [
        [a["url"] for item in r["response"]["output"] if item["type"] == "message"
         for part in item["content"] for a in part.get("annotations", [])]
        for r in records
    ]
    settings = Settings(cache_dir=cache, concurrency=concurrency, ca_bundle=Path(ca) if ca else None,
                        allow_hosts={f"127.0.0.{n}" for n in range(1, hosts + 1)})

    async def run() -> dict:
        start = time.perf_counter()
        async with Fetcher(settings) as fetcher:
            pages = await fetcher.pages(Plan.of(cited).urls)
        statuses: dict[str, int] = {}
        for page in pages.values():
            statuses[page.status] = statuses.get(page.status, 0) + 1
        return {"seconds": time.perf_counter() - start, "statuses": statuses}

    print(json.dumps(asyncio.run(run())))


# ------------------------------------------------------------------------------------------ measuring

def run_child(args: list[str], counter, timeout: float = CHILD_TIMEOUT, env: dict | None = None,
              cwd: Path | None = None) -> tuple[float, int, str, float]:
    """Run a command in `cwd` (the scratch folder; never a checkout, see the module's doc); return its
    wall time, the requests it made, its stdout ("" if it hung), and the CPU seconds (user + system)
    of it and every process it started and reaped."""
    before, cpu_before = counter.value, children_cpu()
    start = time.perf_counter()
    try:
        done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=timeout,
                              env={**os.environ, **(env or {})}, cwd=cwd or tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        print(f"  ! no answer after {timeout:g} s, stopped: {' '.join(args[:4])}...")
        return time.perf_counter() - start, counter.value - before, "", children_cpu() - cpu_before
    wall = time.perf_counter() - start
    if done.returncode != 0:
        print(f"  ! exit {done.returncode}: {' '.join(args[:4])}...\n{done.stderr[-600:]}")
    return wall, counter.value - before, done.stdout, children_cpu() - cpu_before


def bytecode_env() -> dict[str, str]:
    """Compiled modules written beside their sources, whatever the environment says, as an installed
    package has them: with `PYTHONDONTWRITEBYTECODE` every run compiled each tlmscore module from
    source again, which no install does. (Not `PYTHONPYCACHEPREFIX`: under a prefix Python looks for
    every module's compiled file there, so the first run compiled the standard library and every
    dependency too.)"""
    return {"PYTHONDONTWRITEBYTECODE": ""}


def compile_tree(source: Path) -> None:
    """Compile a source tree's modules once, before it is timed (see `bytecode_env`)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "tlmscore")], check=True,
                   env={**os.environ, **bytecode_env()}, stdout=subprocess.DEVNULL)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) another process has used so far (Linux; nan elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds of this process's reaped children and theirs (what `run_child` counts)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def page_index(url: str) -> int:
    """The page number in a benchmark URL (`.../INDEX/article-INDEX.html`)."""
    return int(url.rsplit("/", 2)[-2])


def extraction_cpu(args, web: dict) -> float:
    """CPU seconds that extracting the cited pages costs, measured serially in this process."""
    from tlmscore.evidence.extract import extract

    bodies, _ = _page_sets.bodies(args.pageset, web["count"])
    per_body = []
    for body in bodies:
        extract(body, "text/html; charset=utf-8", "http://example.com/")
    for body in bodies:
        start = time.process_time()
        extract(body, "text/html; charset=utf-8", "http://example.com/")
        per_body.append(time.process_time() - start)
    return sum(per_body[page_index(url) % len(bodies)] for url in web["cited"])


def startup_seconds(module: str) -> float:
    """Best of three: a new interpreter importing `module` (a comma-separated list)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def tlmscore_cli() -> list[str] | None:
    exe = shutil.which("tlmscore", path=str(Path(sys.executable).parent))
    return [exe] if exe else None


def citations_extracted(out: Path) -> tuple[int, int]:
    """Citations with text and citations failed, summed over the rows of a `prepare` output."""
    if out.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(out, columns=["n_urls_ok", "n_urls_failed"]).to_pydict()
        oks, fails = table["n_urls_ok"], table["n_urls_failed"]
    else:
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        oks, fails = [r["n_urls_ok"] for r in rows], [r["n_urls_failed"] for r in rows]
    return sum(n or 0 for n in oks), sum(n or 0 for n in fails)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("http", "https", "both"), default="both")
    parser.add_argument("--transcripts", type=int, default=500)
    parser.add_argument("--citations", type=int, default=5)
    parser.add_argument("--unique", type=int, default=300, help="http: unique URLs")
    parser.add_argument("--latency", type=float, default=0.2, help="http: seconds per request at the server")
    parser.add_argument("--hosts", type=int, default=8, help="http: serve on 127.0.0.1..N (per-host limit is 6)")
    parser.add_argument("--pages", type=int, default=150, help="https: unique pages")
    parser.add_argument("--sites", type=int, default=29, help="https: sites on 127.0.0.1..N, Zipf-sized")
    parser.add_argument("--rtt", type=float, default=0.1, help="https: round trip added to every exchange")
    parser.add_argument("--server-time", type=float, default=0.05, help="https: seconds per request at the server")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--fault-rate", type=float, default=0.0, help="http: share of URLs with 404/503/png faults")
    parser.add_argument("--direct", action="store_true", help="time Fetcher.pages instead of tlmscore prepare")
    parser.add_argument("--skip-cleanlab", action="store_true")
    parser.add_argument("--no-parquet", action="store_true", help="time the JSONL output only")
    parser.add_argument("--runs", "--repeat", dest="runs", type=int, default=3,
                        help="passes: runs per row (median and spread reported)")
    parser.add_argument("--cleanlab-runs", type=int, default=None,
                        help="cleanlab-tlm's runs (in the first passes; default: every pass)")
    parser.add_argument("--keep", type=Path, help="keep the batch and outputs in this folder")
    parser.add_argument("--pageset", choices=_page_sets.PAGE_SETS, default="corpus",
                        help="pages served: the shared corpus, or its tuning or judging set (_page_sets.py)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="also time another checkout's source (run with this Python), with its CPU account")
    parser.add_argument("--cli", action="append", default=[], metavar="LABEL=PATH",
                        help="also time this tlmscore executable (another tree), in turn with this tree's")
    args = parser.parse_args()
    if any("=" not in spec for spec in args.cli + args.tree):
        parser.error("--cli and --tree take LABEL=PATH")
    args.cleanlab_runs = args.runs if args.cleanlab_runs is None else args.cleanlab_runs
    modes = ["http", "https"] if args.mode == "both" else [args.mode]
    summaries = {mode: run_mode(mode, args) for mode in modes}
    if len(summaries) > 1:
        side_by_side(summaries)


def start_web(mode: str, args, work: Path) -> tuple:
    """Start the server process of `mode`; return it, its request counter, the URLs and the web's facts."""
    ctx = multiprocessing.get_context("spawn")
    counter, port_value, ready = ctx.Value("q", 0), ctx.Value("i", 0), ctx.Event()
    if mode == "http":
        options = {"latency": args.latency, "hosts": args.hosts, "fault_rate": args.fault_rate,
                   "pageset": args.pageset, "count": args.unique}
        target, hosts, ca = serve, args.hosts, None
    else:
        ca, cert, key = _https_web.write_authority(work, args.sites)
        options = {"rtt": args.rtt, "server_time": args.server_time, "sites": args.sites,
                   "cert": str(cert), "key": str(key), "pageset": args.pageset, "count": args.pages}
        target, hosts = _https_web.serve_https, args.sites
    server = ctx.Process(target=target, args=(port_value, counter, ready, options), daemon=True)
    server.start()
    if not ready.wait(20):
        sys.exit("the page server did not start")
    port = port_value.value
    if mode == "http":
        urls = [url_for(i, port, hosts) for i in range(args.unique)]
    else:
        sites = _https_web.site_of_pages(args.pages, hosts)
        urls = [_https_web.https_url(i, site, port) for i, site in enumerate(sites)]
    return server, counter, urls, {"ca": ca, "hosts": hosts, "count": options["count"]}


def run_mode(mode: str, args) -> dict:
    """Serve the web of `mode`, run every row against it and print its table; return the summary."""
    bodies, source = _page_sets.bodies(args.pageset, args.unique if mode == "http" else args.pages)
    work = (args.keep / mode) if args.keep else Path(tempfile.mkdtemp(prefix=f"fetch-bench-{mode}-"))
    work.mkdir(parents=True, exist_ok=True)
    server, counter, urls, web = start_web(mode, args, work)
    web["server"] = server.pid
    batch = work / "batch.jsonl"
    cited = build_batch(batch, urls, n=args.transcripts, k=args.citations)
    web["cited"] = sorted({url for urls in cited for url in urls})
    web["unique"] = len(web["cited"])
    web["sizes"] = [len(body) for body in bodies]
    shape = (f"{args.latency * 1000:.0f} ms server latency" if mode == "http" else
             f"{args.rtt * 1000:.0f} ms round trip per exchange, {args.server_time * 1000:.0f} ms server time")
    print(f"\n== {mode}: pages: {source}; batch: {args.transcripts} transcripts x {args.citations} citations, "
          f"{web['unique']} unique URLs on {web['hosts']} host(s), {shape}, {cores()} cores", flush=True)
    try:
        results = measure(args, batch, work, counter, web)
    finally:
        server.terminate()
        server.join(5)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report(args, results, web)


Measured = tuple[float, int, str, float]  # wall s, requests, detail, CPU s of all its processes


def download_pass(args, work: Path, counter, web: dict, rows: dict[str, list[Measured]]) -> None:
    """One run each of the bare keep-alive httpx loop and tlmscore's `Downloader` over the unique URLs.

    The floor's wall time and CPU are those of its whole process (interpreter start and imports
    included), as the limit counts them.
    """
    me = [sys.executable, str(Path(__file__).resolve())]
    (work / "urls.json").write_text(json.dumps(web["cited"]))
    for label, child, last in (("network floor", "_floor", PER_HOST), ("tlmscore downloads", "_downloads",
                                                                      web["hosts"])):
        wall, requests, out, cpu = run_child([*me, child, str(work / "urls.json"), str(web["ca"] or ""),
                                              str(args.concurrency), str(last)], counter, cwd=work,
                                             env={"PYTHONPATH": str(ROOT)})
        inner = json.loads(out.strip().splitlines()[-1])["seconds"] if out.strip() else float("nan")
        what = "bare keep-alive httpx loop" if child == "_floor" else "tlmscore's request side"
        rows.setdefault(label, []).append((wall if out.strip() else float("nan"), requests,
                                           f"{what}, downloads only, {inner:.2f} s inside", cpu))


def cleanlab_pass(batch: Path, work: Path, counter, web: dict, rows: dict[str, list[Measured]]) -> None:
    """One run of cleanlab-tlm's loop (run again when it crashes, as its thread pool sometimes does)."""
    me = [sys.executable, str(Path(__file__).resolve())]
    env = {"REQUESTS_CA_BUNDLE": str(web["ca"])} if web["ca"] else {}
    crashes = 0
    for _ in range(CLEANLAB_ATTEMPTS):
        wall, requests, out, cpu = run_child([*me, "_cleanlab", str(batch)], counter, env=env, cwd=work)
        if out.strip():
            break
        crashes += 1
    inner = json.loads(out.strip().splitlines()[-1])["seconds"] if out.strip() else float("nan")
    crashed = f"; the process crashed or hung {crashes} time(s) before this run" if crashes else ""
    rows.setdefault("cleanlab-tlm", []).append((wall, requests, f"form_prompt_string loop {inner:.2f} s{crashed}",
                                                cpu))


def trees_of(args) -> dict[str, dict]:
    """The trees to time in turn: this checkout (and `--tree` checkouts) through the CPU account,
    `--cli` executables as they are; {"": None} with `--direct` or when no executable is found."""
    if args.direct or tlmscore_cli() is None:
        if not args.direct:
            print("tlmscore CLI not found; timing Fetcher.pages directly (--direct)")
        return {"": {"exe": None}}
    trees: dict[str, dict] = {"": {"source": ROOT}}
    for kind, specs in (("source", args.tree), ("exe", args.cli)):
        for label, _, path in (spec.partition("=") for spec in specs):
            trees[f" [{label}]"] = {kind: Path(path).resolve()}
    return trees


def measure(args, batch: Path, work: Path, counter, web: dict) -> dict:
    """Every row, `--runs` times, in passes: each pass runs each row once, in turn, so a change in
    the machine's load reaches every row alike. Each tlmscore cold run starts on an empty cache."""
    rows: dict[str, list[Measured]] = {}
    trees = trees_of(args)
    smallest = min(web["cited"], key=lambda url: web["sizes"][page_index(url) % len(web["sizes"])])
    one = work / "one.jsonl"
    one.write_text(json.dumps(transcript(0, [smallest])) + "\n")
    accounts: dict[str, list[dict]] = {tree: [] for tree, how in trees.items() if "source" in how}
    traces: dict[str, list[dict]] = {tree: [] for tree in accounts}
    for how in trees.values():
        if "source" in how:
            compile_tree(how["source"])
    formats = [".jsonl"] if args.no_parquet else [".jsonl", ".parquet"]
    for attempt in range(args.runs):
        download_pass(args, work, counter, web, rows)
        if not args.skip_cleanlab and attempt < args.cleanlab_runs:
            cleanlab_pass(batch, work, counter, web, rows)
        for suffix in formats if trees[""].get("exe", ROOT) is not None else [""]:
            for tree, how in trees.items():
                marks: dict = {}
                for run in ("cold", "warm"):
                    label = f"tlmscore {run}" + (" → Parquet" if suffix == ".parquet" else "") + tree
                    measured, marks[run], trace = tlmscore_run(how, args, (work, batch, suffix, f"{attempt}{tree}"),
                                                               counter, web)
                    rows.setdefault(label, []).append(measured)
                    if run == "cold" and suffix == ".jsonl" and trace is not None and tree in traces:
                        traces[tree].append({"wall": measured[0], "marks": marks[run], **_run_trace.summary(trace)})
                if suffix == ".jsonl" and tree in accounts:
                    _, marks["one"], _ = tlmscore_run(how, args, (work, one, suffix, f"one{attempt}{tree}"), counter,
                                                      web)
                    if all(marks.values()):
                        accounts[tree].append(marks)
        print(f"  pass {attempt + 1} of {args.runs} done", flush=True)
    return {"rows": {label: summarise(measured) for label, measured in rows.items()}, "runs": rows,
            "accounts": accounts, "traces": traces}


def tlmscore_run(how: dict, args, where: tuple[Path, Path, str, str], counter,
                 web: dict) -> tuple[Measured, dict | None, dict | None]:
    """One `tlmscore prepare` (or `--direct`) run on the cache named by `where`: its time, requests,
    detail and CPU, the CPU marks of the run and its trace (`_run_trace`) when run from source."""
    me = [sys.executable, str(Path(__file__).resolve())]
    work, batch, suffix, name = where
    cache, out, marks, trace = (work / f"cache{suffix}-{name}", work / f"out{suffix}", work / "cpu-marks.json",
                                work / "trace.json")
    ca = web["ca"]
    hosts = [a for n in range(1, web["hosts"] + 1) for a in ("--allow-host", f"127.0.0.{n}")]
    trust = ["--ca-bundle", str(ca)] if ca else []
    argv = ["prepare", str(batch), "-o", str(out), "--cache-dir", str(cache),
            "--concurrency", str(args.concurrency), "--quiet", *trust, *hosts]
    env = {"PYTHONPATH": str(how.get("source", ROOT)), **bytecode_env()}
    workers = work / "trace-workers.tsv"
    workers.unlink(missing_ok=True)
    if "source" in how:
        command = _run_trace.command(sys.executable, marks, trace, argv)
        env |= {"PYTHONPATH": f"{_run_trace.site_folder(work)}{os.pathsep}{how['source']}",
                "TLMSCORE_TRACE_WORKERS": str(workers)}
    elif how["exe"] is not None:
        command = [str(how["exe"]), *argv]
    else:
        command = [*me, "_direct", str(batch), str(cache), str(web["hosts"]), str(args.concurrency), str(ca or "")]
    for path in (out, marks, trace):
        path.unlink(missing_ok=True)
    server_before = process_cpu(web["server"])
    wall, requests, stdout, cpu = run_child(command, counter, cwd=work, env=env)
    server_cpu = process_cpu(web["server"]) - server_before
    if how.get("exe", ROOT) is None:
        return (wall, requests, stdout.strip().splitlines()[-1] if stdout.strip() else "", cpu), None, None
    ok, failed = citations_extracted(out) if out.exists() else (0, 0)
    flag = " (!)" if ok == 0 or (failed and args.fault_rate <= 0) else ""  # no output, or pages lost
    traced = _run_trace.read(trace)
    if traced is not None:
        traced["server cpu"] = server_cpu
        traced["workers"] = _run_trace.read_workers(workers, traced["t0"])
    return ((wall, requests, f"citations with text {ok}, failed {failed}{flag}", cpu), _cpu_account.read(marks),
            traced)


def spread(values: list[float]) -> float:
    """(slowest - fastest) / median of repeated runs."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def summarise(measured: list[Measured]) -> Measured:
    """The median wall time and CPU of repeated runs, the most requests any of them made, and the spread."""
    walls = sorted(m[0] for m in measured)
    detail = next((m[2] for m in measured if m[2].endswith("(!)")), measured[-1][2])  # a failed run shows
    if len(walls) > 1:
        runs = f"median of {len(walls)}, {walls[0]:.2f}-{walls[-1]:.2f} s, spread {spread(walls):.0%}"
        detail = f"{runs}; {detail}" if detail else runs
    return (statistics.median(walls), max(m[1] for m in measured), detail,
            statistics.median(m[3] for m in measured))


def web_limit(args, rows: dict[str, Measured], web: dict, cpu: float) -> tuple[float, str]:
    """The limit on this machine: max(the bare client's wall, the card libraries' import +
    (extraction CPU + the bare client's CPU) / cores), each figure measured in this run."""
    floor_wall, _, _, floor_cpu = rows["network floor"]
    imports = startup_seconds("httpx, trafilatura")
    compute = imports + (cpu + floor_cpu) / cores()
    how = (f"max(bare client {floor_wall:.2f} s, import of httpx and trafilatura {imports:.2f} s + "
           f"(extraction {cpu:.2f} s + bare client {floor_cpu:.2f} s CPU) / {cores()} cores = {compute:.2f} s)")
    return max(floor_wall, compute), how


def report(args, results: dict, web: dict) -> dict:
    """Print the table of one web, each cold run's CPU and trace, and its CPU account; return its
    limit and rows for the side-by-side table."""
    rows, accounts = results["rows"], results["accounts"]
    cpu = extraction_cpu(args, web)
    limit, how = web_limit(args, rows, web, cpu)
    print(f"\nlimit: {how} = {limit:.2f} s\n")
    print(f"{'run':<34}{'wall s':>9}{'requests':>10}{'x limit':>9}{'CPU s':>8}  detail")
    for label, (wall, requests, detail, used) in rows.items():
        print(f"{label:<34}{wall:>9.2f}{requests:>10}{wall / limit:>9.2f}{used:>8.2f}  {detail}")
    if "cleanlab-tlm" in rows:
        print()
        for label in ("tlmscore cold", "tlmscore cold → Parquet"):
            if label in rows:
                print(f"cleanlab-tlm / {label} = {rows['cleanlab-tlm'][0] / rows[label][0]:.1f}x")
    print_summary(rows, results["traces"].get("", []), limit)
    for tree, traced in results["traces"].items():
        if traced:
            print(f"\ncold runs{tree}: wall s, CPU s of the fetching process and of its workers; what each waited on")
        for n, run in enumerate(traced, 1):
            marks = run["marks"] or {}
            print(f"  run {n}: {run['wall']:.2f} s wall, CPU parent {marks.get('parent', float('nan')):.2f} s, "
                  f"workers {marks.get('workers', float('nan')):.2f} s (the web's server "
                  f"{run.get('server cpu', float('nan')):.2f} s); the fetching process's threads at close: "
                  + ", ".join(f"{name} {cpu:.2f}" for name, cpu in marks.get("threads", {}).items())
                  + f"\n{_run_trace.describe(run)}")
    _cpu_account.print_accounts({tree: [_cpu_account.account(m["cold"], m["warm"], m["one"], cpu) for m in runs]
                                for tree, runs in accounts.items()}, web["unique"])
    return {"limit": limit, "results": rows}


def print_summary(rows: dict[str, Measured], traced: list[dict], limit: float) -> None:
    """The figures the benchmarks page gives for a web, on a few lines."""
    if "tlmscore cold" not in rows:
        return
    cold, warm = rows["tlmscore cold"], rows.get("tlmscore warm")
    print(f"\nsummary: cold {cold[0]:.2f} s ({cold[2].split(';')[0]}), {cold[0] / limit:.2f}x the limit {limit:.2f} s")
    if "cleanlab-tlm" in rows:
        print(f"  cleanlab-tlm {rows['cleanlab-tlm'][0]:.2f} s: {rows['cleanlab-tlm'][0] / cold[0]:.1f}x the cold run")
    if warm is not None:
        print(f"  warm {warm[0]:.2f} s, {warm[1]} requests in the run that made the most")
    if traced:
        marks = [run["marks"] or {} for run in traced]
        parent = statistics.median(m.get("parent", math.nan) for m in marks)
        workers = statistics.median(m.get("workers", math.nan) for m in marks)
        server = statistics.median(run.get("server cpu", math.nan) for run in traced)
        print(f"  CPU of a cold run (median): fetching process {parent:.2f} s, extraction processes {workers:.2f} s, "
              f"the web's server {server:.2f} s")


def side_by_side(summaries: dict) -> None:
    """One table: each row's median wall time, its ratio to its web's limit, and cleanlab-tlm's to it."""
    modes = list(summaries)
    labels = list(dict.fromkeys(label for s in summaries.values() for label in s["results"]))
    print("\n== side by side: median s, x limit, (cleanlab-tlm s / row s)")
    print(f"{'run':<34}" + "".join(f"{m:>30}" for m in modes))
    print(f"{'limit':<34}" + "".join(f"{summaries[m]['limit']:>30.2f}" for m in modes))
    for label in labels:
        cells = []
        for mode in modes:
            results, limit = summaries[mode]["results"], summaries[mode]["limit"]
            if label not in results:
                cells.append(f"{'-':>30}")
                continue
            wall = results[label][0]
            versus = results["cleanlab-tlm"][0] / wall if "cleanlab-tlm" in results else float("nan")
            cells.append(f"{f'{wall:.2f} s {wall / limit:.2f}x ({versus:.1f}x)':>30}")
        print(f"{label:<34}" + "".join(cells))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_cleanlab":
        child_cleanlab(Path(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_direct":
        child_direct(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) > 1 and sys.argv[1] == "_floor":
        _https_web.floor_child(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_downloads":
        _https_web.downloads_child(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
