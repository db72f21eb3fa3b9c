"""How faithfully spans written by real instrumentations read back: the share of plain prompts equal to the raw's.

`python benchmarks/trace_fidelity.py [FOLDER...]` reads each recording folder (default: the folders of
`fixtures/traces/` with `calls.jsonl`, `traces.jsonl` and `bodies/`, made by
`python -m tests.servers.instrumented_calls --fixtures`; or folders it wrote from other calls), both as the
Collector's JSON lines and as the raw OTLP/HTTP bodies, and each recorded call as its raw record, and prints
per instrumentation: spans read, error rows, plain records (nothing the span cannot hold,
`tests.servers.instrumented_calls.lost_in_span`), how many of them render the same prompt and response as the
raw record, and what made the others not plain. `--json` prints the figures as JSON; `--diff` shows the first
differing lines of each plain record that differs.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tlmscore  # noqa: E402
from tests.servers.instrumented_calls import lost_in_span  # noqa: E402


def _rows(path: Any, settings: tlmscore.Settings) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = tlmscore.prepare(path, settings).to_dict("records")
    return rows


def measure(folder: Path, cache: Path, show_diff: bool = False) -> dict[str, Any]:
    """The figures of one recording folder (its name is the instrumentation's)."""
    settings = tlmscore.Settings(offline=True, cache_dir=cache)
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    raw = {row["response_id"]: row for row in _rows(calls, settings)}
    spans = _rows(folder / "traces.jsonl", settings)
    bodies = [row for body in sorted((folder / "bodies").iterdir()) for row in _rows(body, settings)]
    by_id = {row["response_id"]: row for row in spans}
    plain = same = 0
    reasons: collections.Counter[str] = collections.Counter()
    for call in calls:
        rid = call["response"].get("id")
        got, want = by_id.get(rid), raw[rid]
        lost = lost_in_span(call, folder.name)
        if got is None:
            reasons["no span written"] += 1
            continue
        if lost is not None:
            reasons[lost] += 1
            continue
        plain += 1
        if got["prompt"] == want["prompt"] and got["response"] == want["response"]:
            same += 1
        elif show_diff:
            print(f"-- {folder.name} {rid}: {got['error'] or got['warnings']}")
            lines = difflib.unified_diff((want["prompt"] or "").splitlines(), (got["prompt"] or "").splitlines(),
                                         lineterm="", n=0)
            for line in list(lines)[2:12]:
                print("  ", line[:160])
    alike = [r["prompt"] for r in bodies] == [r["prompt"] for r in spans]
    return {"instrumentation": folder.name, "calls": len(calls), "rows": len(spans),
            "bodies_rows": len(bodies), "bodies_same_as_lines": alike,
            "errors": sum(1 for r in spans if r["error"]), "plain": plain, "plain_same": same,
            "share": round(same / plain, 4) if plain else None, "not_plain": dict(reasons.most_common())}


def recordings(root: Path) -> list[Path]:
    """The folders of `root` recorded by `instrumented_calls` (the calls, their spans as JSON lines and as bodies);
    the other fixtures there (a store's exports, GenAI events) have layouts of their own."""
    return sorted(p for p in root.iterdir()
                  if (p / "calls.jsonl").is_file() and (p / "traces.jsonl").is_file() and (p / "bodies").is_dir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--diff", action="store_true")
    args = parser.parse_args()
    folders = args.folders or recordings(ROOT / "fixtures" / "traces")
    with tempfile.TemporaryDirectory() as cache:
        results = [measure(folder, Path(cache), args.diff) for folder in folders]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        share = f"{r['share']:.1%}" if r["share"] is not None else "n/a"
        print(f"{r['instrumentation']:18} calls {r['calls']:3}  rows {r['rows']:3}  errors {r['errors']:3}  "
              f"plain {r['plain']:3}  equal {r['plain_same']:3} ({share})  "
              f"bodies read alike: {r['bodies_same_as_lines']}")
        for reason, count in r["not_plain"].items():
            print(f"{'':20}{count:3} not plain: {reason}")


if __name__ == "__main__":
    main()
