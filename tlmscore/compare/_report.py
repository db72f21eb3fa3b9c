"""Reports of a comparison by file suffix: `.md` Markdown, `.xml` JUnit, `.json` JSON, `.html` a page with plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET  # builds XML only, never parses any

from tlmscore.compare._diff import Comparison, RowChange
from tlmscore.compare._gates import GateResult, Gates, row_fails_drop
from tlmscore.compare._html import render_html
from tlmscore.compare._markdown import render_markdown
from tlmscore.errors import ConfigError

REPORT_SUFFIXES = (".md", ".xml", ".json", ".html")


def report_kind(path: Path) -> str:
    """The report format `path` names, or a `ConfigError` listing the choices."""
    suffix = path.suffix.lower()
    if suffix not in REPORT_SUFFIXES:
        raise ConfigError(f"{path}: a report must end in one of {', '.join(REPORT_SUFFIXES)}")
    return suffix


def render_report(kind: str, comparison: Comparison, gates: Gates, results: Sequence[GateResult],
                  names: tuple[str, str]) -> str:
    """The report of `kind` (a suffix from `REPORT_SUFFIXES`) as text."""
    if kind == ".md":
        return render_markdown(comparison, results, names)
    if kind == ".xml":
        return render_junit(comparison, gates, results, names)
    if kind == ".json":
        return json.dumps(as_json(comparison, results, names), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return render_html(comparison, results, names)


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def _row(row: RowChange) -> dict[str, Any]:
    return {"key": row.key, "base": _number(row.base), "new": _number(row.new), "delta": _number(row.delta),
            "base_error": row.base_error, "new_error": row.new_error, "explanation": row.explanation,
            "group": row.group}


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def as_json(comparison: Comparison, results: Sequence[GateResult], names: tuple[str, str]) -> dict[str, Any]:
    """The comparison as plain JSON values (NaN as null): every joined row, every gate, every figure."""
    return {
        "base": names[0], "new": names[1], "key": comparison.key, "threshold": comparison.threshold,
        "ok": all(r.ok for r in results),
        "gates": [asdict(r) | {"keys": list(r.keys)} for r in results],
        "summary": _clean(asdict(comparison.summary)),
        "groups": {name: _clean(asdict(s)) for name, s in comparison.groups.items()},
        "by": comparison.by,
        "only_base": list(comparison.only_base), "only_new": list(comparison.only_new),
        "rows": [_row(r) for r in comparison.rows],
    }


def render_junit(comparison: Comparison, gates: Gates, results: Sequence[GateResult],
                 names: tuple[str, str]) -> str:
    """JUnit XML: a `rows` suite and a `gates` suite.

    `rows` has one test case per joined row, failed when the row breaks `--max-drop` (when given);
    `gates` has one test case per gate.
    """
    root = ET.Element("testsuites", name=f"tlmscore compare {names[0]} {names[1]}")
    rows = ET.SubElement(root, "testsuite", name="tlmscore.compare.rows")
    failures = 0
    for row in comparison.rows:
        case = ET.SubElement(rows, "testcase", classname="tlmscore.compare.rows", name=row.key)
        if gates.max_drop is not None and row_fails_drop(row, gates.max_drop):
            failures += 1
            what = (f"became not scorable: {row.new_error or 'no score'}" if not row.new_scored
                    else f"dropped {-row.delta:.3f} (> {gates.max_drop:g}): {row.base:.3f} → {row.new:.3f}")
            failure = ET.SubElement(case, "failure", message=what, type="max-drop")
            failure.text = row.explanation or ""
    rows.set("tests", str(len(comparison.rows)))
    rows.set("failures", str(failures))
    suite = ET.SubElement(root, "testsuite", name="tlmscore.compare.gates", tests=str(len(results)),
                          failures=str(sum(not r.ok for r in results)))
    for result in results:
        case = ET.SubElement(suite, "testcase", classname="tlmscore.compare.gates", name=result.name)
        if not result.ok:
            ET.SubElement(case, "failure", message=result.reason, type=result.name)
        else:
            ET.SubElement(case, "system-out").text = result.reason
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
