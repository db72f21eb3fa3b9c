"""The figures docs/scorers.md states for the labelled fixtures are what the commands it names print today:
its `tlmscore score` and `tlmscore calibrate` lines are run as written (in a scratch folder), and the AUROC
and the scores of the answers it names are worked out from the scored file (a change of scores must change
the page with it)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tlmscore.cli import main
from tlmscore.scoring.grounding import GroundingOptions
from tlmscore.scoring.judge import JudgeOptions
from tlmscore.scoring.tlm import TLMOptions

SCORERS = ROOT / "docs" / "scorers.md"
_FENCE = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def section(text: str) -> str:
    start = text.index("On this repository's labelled fixtures")
    return text[start:text.index("## Adding a scorer", start)]


def commands(text: str) -> list[list[str]]:
    """The bash block's commands (continuation lines joined, comments dropped), as argument lists."""
    block = _FENCE.search(text)
    assert block, "no bash block beside the labelled fixtures' figures"
    joined = block.group(1).replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def auroc(positive: list[float], negative: list[float]) -> float:
    """The share of (positive, negative) pairs ranked right, ties counting half."""
    pairs = [(p > n) + 0.5 * (p == n) for p in positive for n in negative]
    return sum(pairs) / len(pairs)


def ece_line(err: str) -> tuple[str, str]:
    found = re.search(r"held-out folds (\d\.\d{3}) raw, (\d\.\d{3}) calibrated", err)
    assert found, err
    return found.group(1), found.group(2)


def test_the_labelled_fixtures_figures_are_what_the_named_commands_print(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = section(SCORERS.read_text(encoding="utf-8"))
    score, calibrate = commands(text)
    assert score[:2] == ["tlmscore", "score"] and calibrate[:2] == ["tlmscore", "calibrate"]
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")  # the commands' relative paths, read from the repository
    monkeypatch.chdir(tmp_path)
    assert main([*score[1:], "--quiet", "--cache-dir", str(tmp_path / "c")]) == 0
    scored = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text(encoding="utf-8").splitlines()]
    labels = {(r := json.loads(line))["id"]: r["metadata"]["label"]
              for line in (ROOT / "fixtures/labelled/labelled.jsonl").read_text(encoding="utf-8").splitlines()}
    by_id = {row["id"]: row["score"] for row in scored}
    faithful = [by_id[i] for i, label in labels.items() if label == "faithful"]
    other = [by_id[i] for i, label in labels.items() if label != "faithful"]
    stated = re.search(r"AUROC (\d\.\d{3})", text)
    assert stated and stated.group(1) == f"{auroc(faithful, other):.3f}"
    for name, value in re.findall(r"`([a-z0-9.-]+-(?:faithful|contradicted)-\d)` \((\d\.\d{3})\)", text):
        assert f"{by_id[name]:.3f}" == value, name
    capsys.readouterr()
    rows = dict(re.findall(r"^\| (isotonic|Platt) \| (\d\.\d{3} \| \d\.\d{3}) \|$", text, re.MULTILINE))
    assert set(rows) == {"isotonic", "Platt"}
    assert main(calibrate[1:]) == 0
    assert " | ".join(ece_line(capsys.readouterr().err)) == rows["isotonic"]
    assert main([*calibrate[1:], "--method", "platt", "-o", str(tmp_path / "platt.json")]) == 0
    assert " | ".join(ece_line(capsys.readouterr().err)) == rows["Platt"]


def stated_defaults(text: str, start: str, end: str) -> dict[str, str]:
    """`name` (default) pairs of the options sentence between `start` and `end`."""
    sentence = text[text.index(start):]
    sentence = sentence[:sentence.index(end)]
    return dict(re.findall(r"`(\w+)` \((\w[\w.]*)", sentence))


def test_the_option_defaults_the_scorers_page_states_are_the_codes() -> None:
    text = SCORERS.read_text(encoding="utf-8")
    grounding = stated_defaults(text, "Options: `messages`", "It is\nlexical")
    judge = stated_defaults(text, "Other options: `api_key_env`", "`python benchmarks/judge_bench.py`")
    tlm = stated_defaults(text, "`pip install 'tlmscore[tlm]'` and set", "TLM's explanation")
    assert {"threshold", "min_words", "max_listed", "incomplete", "lexicon", "summary_weight"} <= set(grounding)
    assert {"logprobs", "concurrency", "timeout", "retries"} <= set(judge) and "timeout" in tlm
    for options, stated in ((GroundingOptions, grounding), (JudgeOptions, judge), (TLMOptions, tlm)):
        for name, value in stated.items():
            if name not in options.model_fields:
                continue
            default = options.model_fields[name].default
            shown = str(default).lower() if isinstance(default, bool) else f"{default:g}" \
                if isinstance(default, (int, float)) else None
            if shown is not None:
                assert value == shown, f"{options.__name__}.{name}: the page says {value}, the code {shown}"
