"""The run manifest: what a run read and how, kept beside its output so `--resume` can check it.

A resumed run skips the records an earlier run already wrote. That is only right when it reads the
same files the same way, so every run writes `OUT.manifest.json` before its first row:

- each input (and Batch API input and page file) by resolved path, size and a BLAKE2b hash of its
  bytes, with the name it was given on the command line, in order;
- the command, the scorer and a hash of its options (options may hold secrets, so not their values);
- the settings that change rows (`ROW_SETTINGS`), not those that only change speed.

`resume_names` compares the earlier manifest with the new one and refuses any difference with a
`ConfigError` that says what changed. Because inputs are compared by resolved path, the same file
named another way (relative or absolute, through a symlink) is recognised, and the names the earlier
run wrote in the `source` column are mapped to the names of this run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError
from tlmscore.ingest import safe_text
from tlmscore.output._checkpoint import checkpoint_path
from tlmscore.settings import Settings
from tlmscore.stores import is_live

MANIFEST_VERSION = 1
ROW_SETTINGS = ("urls", "reasoning", "offline", "allow_hosts", "page_chars", "evidence_chars", "max_bytes", "think",
                "ascii_json", "archive", "archive_url", "page_source", "page_base_url", "page_model")
"""Settings whose value changes the rows of a record (which pages are evidence, how prompts are cut)."""
_BLOCK = 1 << 20


def manifest_path(output: Path) -> Path:
    """Where the manifest of the run writing `output` is kept."""
    return output.with_name(output.name + ".manifest.json")


def describe_file(name: str | Path) -> dict[str, Any]:
    """A file as the manifest records it: given name, resolved path, size and BLAKE2b of its bytes.

    A folder (of page files) is described by the relative names and bytes of the files in it; a
    live source (`stores.is_live`) by its address alone: its spans are not a file to hash.
    """
    if isinstance(name, str) and is_live(name):
        return {"name": name, "path": name, "size": None, "blake2b": None}
    path = Path(name)
    digest = hashlib.blake2b(digest_size=20)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    size = 0
    for file in files:
        if file != path:
            digest.update(str(file.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
        with file.open("rb") as handle:
            while block := handle.read(_BLOCK):
                digest.update(block)
                size += len(block)
    return {"name": str(name), "path": str(path.resolve()), "size": size, "blake2b": digest.hexdigest()}


def _options_digest(options: Mapping[str, Any]) -> str:
    text = json.dumps(dict(options), sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def build_manifest(command: str, inputs: Sequence[str | Path], settings: Settings, *, scorer: str | None = None,
                   scorer_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of a run (reads and hashes every input file once)."""
    dumped = settings.model_dump(mode="json")
    return {
        "version": MANIFEST_VERSION,
        "command": command,
        "inputs": [describe_file(p) for p in inputs],
        "batch_inputs": [describe_file(p) for p in settings.batch_inputs],
        "page_files": [describe_file(p) for p in settings.page_files],
        "scorer": scorer,
        "scorer_options": _options_digest(scorer_options or {}) if scorer is not None else None,
        "settings": {name: _comparable(dumped[name]) for name in ROW_SETTINGS if name in dumped},
    }


def _comparable(value: Any) -> Any:
    """Set-like settings (dumped as lists in no fixed order) sorted, so equal settings compare equal."""
    return sorted(value) if isinstance(value, list) else value


def write_manifest(path: Path, manifest: Mapping[str, Any]) -> None:
    """Write the manifest whole or not at all (a temporary file, synced, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)  # ASCII: a file name need not be UTF-8 (see `resume_names`)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at `path`, or None when there is none (or it is not a manifest)."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("version") == MANIFEST_VERSION else None


def _refuse(problem: str) -> ConfigError:
    return ConfigError(f"--resume refused: {problem}; run without --resume to start over")


def _same_files(kind: str, before: list[dict[str, Any]], now: list[dict[str, Any]]) -> None:
    if len(before) != len(now):
        raise _refuse(f"the interrupted run read {len(before)} {kind}, this one {len(now)}")
    for number, (old, new) in enumerate(zip(before, now, strict=True), start=1):
        if old.get("path") != new["path"]:
            raise _refuse(f"{kind} {number} is {new['path']}, the interrupted run read {old.get('path')}")
        if (old.get("size"), old.get("blake2b")) != (new["size"], new["blake2b"]):
            raise _refuse(f"{new['name']} changed since the interrupted run read it "
                          f"({old.get('size')} bytes then, {new['size']} now)")


def resume_names(before: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, str]:
    """Check that a run may resume the one `before` describes; the earlier input names → this run's.

    Raises `ConfigError` naming the first difference: the command or scorer, the scorer's options,
    an input that is another file or has changed, or a setting that changes rows.
    """
    if before.get("command") != now["command"] or before.get("scorer") != now["scorer"]:
        then = before.get("scorer") or before.get("command")
        raise _refuse(f"the interrupted run was `{before.get('command')}` with scorer {then!r}, "
                      f"this one `{now['command']}` with scorer {now['scorer'] or now['command']!r}")
    if before.get("scorer_options") != now["scorer_options"]:
        raise _refuse(f"the options of scorer {now['scorer']!r} differ from the interrupted run's")
    for kind in ("inputs", "batch_inputs", "page_files"):
        _same_files(kind.replace("_", " "), list(before.get(kind) or []), list(now[kind]))
    changed = [f"{name}: {before.get('settings', {}).get(name)!r} then, {value!r} now"
               for name, value in now["settings"].items() if before.get("settings", {}).get(name) != value]
    if changed:
        raise _refuse("settings that change rows differ (" + "; ".join(changed) + ")")
    names: dict[str, str] = {}
    for old, new in zip(before["inputs"], now["inputs"], strict=True):
        # A file name that is not UTF-8 reaches the rows with U+FFFD in place of its odd bytes.
        names[str(old["name"])] = names[safe_text(str(old["name"]))] = str(new["name"])
    return names


def start_run(output: Path, manifest: Mapping[str, Any], *, resume: bool) -> dict[str, str]:
    """Check a resume against the earlier manifest, then write this run's; the source names to map.

    A resume with rows already written (a checkpoint or a finished output) but no manifest is
    refused: nothing says those rows came from these inputs.
    """
    path = manifest_path(output)
    names: dict[str, str] = {}
    if resume:
        before = read_manifest(path)
        if before is not None:
            names = resume_names(before, manifest)
        elif checkpoint_path(output).exists() or output.exists():
            raise _refuse(f"{path} is missing, so nothing says the rows written so far came from these inputs")
    write_manifest(path, manifest)
    return names
