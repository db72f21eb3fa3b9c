"""The command line: arguments → `Settings` → one library call; progress bars; the run summary.

`_args` holds the flags, grouped, with defaults from `Settings`; `_checks` refuses a bad path or
option before work starts (one line, exit 2); `_commands` parses arguments and runs `prepare`,
`score`, `calibrate`, `compare`, `annotate`, `pull`, `plugins`, `cache` and `fixtures`; `_progress` draws progress
bars on a terminal; `_summary` is the end-of-run summary on stderr; `_calibrate` is `tlmscore calibrate`
(a scored file and its labels in, a calibration out); `_compare` is `tlmscore compare`; `_annotate` is
`tlmscore annotate` and `score --annotate`; `_plugins` is `tlmscore plugins`.
"""

from __future__ import annotations

from tlmscore.cli._commands import main

__all__ = ["main"]
