"""The paths and options of a run, checked before any work starts: each problem is one line, exit 2.

A run that would fail at its end (an output path that is a folder, a folder that cannot be
written) fails here instead, before a single page is fetched.
"""

from __future__ import annotations

import errno
import itertools
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tlmscore.annotate import progress_path, read_side_file
from tlmscore.cli._annotate import SIDE_SUFFIX, side_file, target_files
from tlmscore.errors import ConfigError
from tlmscore.ingest import check_readable
from tlmscore.output import checkpoint_path, manifest_path, output_format
from tlmscore.settings import default_cache_dir


def check_files(paths: Iterable[Path], *, what: str, folders: bool = False) -> None:
    """Each of `paths` is a readable file (with `folders`, or a folder); a `ConfigError` names the first not."""
    for path in paths:
        if folders and path.is_dir():
            continue
        if path.is_dir():
            raise ConfigError(f"{path}: is a folder; give the {what} files in it (e.g. {path}/*.jsonl)")
        if not path.is_file():
            raise ConfigError(f"{path}: no such file" + ("" if what == "input" else f" ({what})"))
        check_readable(path)


def _existing_parent(path: Path) -> Path:
    """The nearest ancestor of `path` that exists (`path`'s own folder for a relative name)."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def check_output(output: Path, *, known_format: bool = True) -> None:
    """`output` can be written: a file (of a known format, with `known_format`) in a writable folder."""
    if known_format:
        output_format(output)
    if output.is_dir():
        example = output / ("scores.parquet" if known_format else "calibration.json")
        raise ConfigError(f"{output}: is a folder; OUT must be a file name such as {example}")
    parent, above = output.absolute().parent, _existing_parent(output)
    if not above.is_dir():
        raise ConfigError(f"{output}: cannot be written: {above} is a file, not a folder")
    if above != parent:
        raise ConfigError(f"{output}: cannot be written: no folder {parent}")
    problem = _write_problem(parent)
    if problem:
        raise ConfigError(f"{output}: cannot be written: {problem}")


def _write_problem(folder: Path) -> str | None:
    """Why no file can be made in the existing folder `folder` (None: one can); tried, and removed at once.

    Trying is the only sure test: root passes every permission check, yet a read-only file
    system, /sys or /proc still refuse it.
    """
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tlmscore-check-"):
            pass
    except OSError as exc:
        if exc.errno == errno.ENOENT:  # the folder is there but makes no new files (/proc)
            return f"{folder} takes no new files"
        return f"{folder}: {exc.strerror or exc}"
    return None


def check_cache(directory: Path, *, offline: bool) -> None:
    """The page cache folder can be used: a folder or none yet, and (unless offline, which only reads it) writable.

    Checked before any file is written, so a cache that cannot be used leaves no manifest behind.
    """
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory}: the cache folder (--cache-dir) is a file; give a folder")
    if offline:
        return
    above = _existing_parent(directory / "cache.db")
    problem = f"{above} is a file, not a folder" if not above.is_dir() else _write_problem(above)
    if problem:
        raise ConfigError(f"{directory}: the cache folder cannot be written: {problem} (give --cache-dir DIR "
                          "or set TLMSCORE_CACHE_DIR to a writable folder, or run --offline)")


def _same(one: Path, other: Path) -> bool:
    """Whether two names are one file: the same file on disk (a hard or symbolic link, another spelling)."""
    try:
        if one.exists() and other.exists():
            return one.samefile(other)
    except OSError:
        pass
    return one.resolve() == other.resolve()


@dataclass(frozen=True)
class Written:
    """A path a command writes (or replaces, or removes), what it is, and the flag that moves it."""

    path: Path
    what: str
    flag: str
    folder: bool = False
    """A folder the command removes or fills: nothing read may be inside it either."""


def check_distinct(reads: Iterable[tuple[Path, str]], writes: Iterable[Written]) -> None:
    """Nothing a command reads is a path it writes (nor inside a folder it removes), and no two writes meet.

    `reads` are `(path, what)`: an input, a `--pages` file… A `ConfigError` names the first clash,
    before anything is written: a user's file is never overwritten by its own run.
    """
    written = list(writes)
    for path, what in reads:
        for out in written:
            if _same(path, out.path) or (out.folder and path.resolve().is_relative_to(out.path.resolve())):
                raise ConfigError(f"{path}: is {what} and {out.what}: it would be overwritten; "
                                  f"give another {out.flag}")
    for out, other in itertools.combinations(written, 2):
        if _same(out.path, other.path):
            raise ConfigError(f"{out.path}: is {out.what} and {other.what}; give another {other.flag}")


def check_annotate(args: Any) -> None:
    """`annotate SCORED`: SCORED is there, and no file written (the side file, an annotation file) is SCORED.

    Replaying a side file rewrites that side file, as it should; a scored output is never written.
    """
    check_files([args.scored], what="input")
    check_annotation_numbers(args)
    writes = [Written(path, "an annotation file (--to)", "--to target") for path in target_files(args.to)]
    if read_side_file(args.scored) is None:
        writes.append(Written(side_file(args.scored, args.failed), "the side file of annotations that failed",
                              "--failed FILE"))
    check_distinct([(args.scored, "SCORED")], writes)


def check_pull(args: Any) -> None:
    """`pull IDS -o OUT`: no file of ids is OUT."""
    ids = [(Path(given), "a file of ids") for given in args.ids if Path(given).is_file()]
    check_distinct(ids, [Written(args.output, "the output (-o)", "-o OUT.jsonl")])


def check_fixtures_args(args: Any) -> None:
    """`fixtures`: the cache its renders read (and, online, write) can be used; a tolerance is not negative."""
    check_cache(args.cache_dir or default_cache_dir(), offline=args.offline)
    if args.score_tolerance is not None and not args.score_tolerance >= 0:
        raise ConfigError(f"--score-tolerance {_number(args.score_tolerance)}: must be at least 0")


def check_calibrate(args: Any) -> None:
    """`calibrate`: its files are there, its output can be written and is none of them, its folds are folds."""
    reads = [(args.scored, "SCORED")] + ([(args.labels_from, "the --labels-from file")] if args.labels_from else [])
    check_files([path for path, _ in reads[:1]], what="input")
    check_files([path for path, _ in reads[1:]], what="--labels-from")
    check_output(args.output, known_format=False)
    check_distinct(reads, [Written(args.output, "the output (-o)", "-o CALIB.json")])
    if args.folds < 2:  # noqa: PLR2004  (cross-validation holds one fold out of at least two)
        raise ConfigError(f"--folds {args.folds}: must be at least 2")


def check_counts(args: Any) -> None:
    """A run's numbers outside `Settings`: the Ray actors, at least one of each, and its annotation numbers."""
    for name in ("fetchers", "scorer_concurrency"):
        if getattr(args, name) < 1:
            raise ConfigError(f"{flag_of(name)} {getattr(args, name)}: must be at least 1")
    check_annotation_numbers(args, prefix="annotate_")


def check_annotation_numbers(args: Any, *, prefix: str = "") -> None:
    """Write-back's timeout above 0, its deadline not negative, its threshold in [0, 1].

    A deadline of 0 keeps every row in the side file at once. `prefix`: `score`'s `--annotate-` flags.
    """
    for name, least in (("timeout", "more than 0"), ("deadline", "at least 0")):
        value = getattr(args, prefix + name, None)
        if value is not None and not (value > 0 or (value == 0 and name == "deadline")):
            raise ConfigError(f"{flag_of(prefix + name)} {_number(value)}: must be {least} seconds")
    threshold = getattr(args, prefix + "threshold", None)
    if threshold is not None and not 0 <= threshold <= 1:
        raise ConfigError(f"{flag_of(prefix + 'threshold')} {_number(threshold)}: must be between 0 and 1")


def check_scorer(scorer: str, options: dict[str, Any]) -> None:
    """Options a scorer cannot start without, named by their flags (the judge needs a model)."""
    if scorer == "judge" and not options.get("model"):
        raise ConfigError("--scorer judge needs --model NAME (the judge model's name at --base-url)")


PAGE_MODEL_OPTIONS = ("page_base_url", "page_model", "page_api_key_env", "page_concurrency", "page_price_in",
                      "page_price_out", "page_price_request", "page_max_cost")
"""The page model's flags beside `--page-source`, by their `Settings` names: the endpoint and model first."""


def check_page_model(args: Any) -> None:
    """The page model's flags: given only with `--page-source chat`, which needs an endpoint, a model and its key."""
    source = args.page_source or "fetch"
    if source == "fetch":
        given = [flag_of(name) for name in PAGE_MODEL_OPTIONS if getattr(args, name) is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --page-source chat or chat:always")
        return
    missing = [flag_of(name) for name in PAGE_MODEL_OPTIONS[:2] if not getattr(args, name)]
    if missing:
        raise ConfigError(f"--page-source {source} needs {' and '.join(missing)} (the page model's API root and name)")
    if args.page_api_key_env and not os.environ.get(args.page_api_key_env):
        raise ConfigError(f"--page-api-key-env: the environment variable {args.page_api_key_env} is not set")


def check_run_paths(args: Any, cache_dir: Path, annotated: Sequence[Path]) -> None:
    """A run's files: no input (nor `--pages`, `--batch-input`, `--calibration` file) is a file the run writes.

    What a run writes: OUT, its manifest, its checkpoint, the judge batch's folder, the side file of
    annotations that failed and the files annotations go to (`annotated`), and the cache folder.
    """
    output: Path = args.output
    reads = [(p, "an input") for p in args.inputs if isinstance(p, Path)]
    reads += [(p, "a --batch-input file") for p in args.batch_input] + [(p, "a --pages file") for p in args.pages]
    if getattr(args, "calibration", None) is not None:
        reads.append((args.calibration, "the --calibration file"))
    checkpoint = checkpoint_path(output)
    writes = [Written(output, "the output (-o)", "-o OUT"),
              Written(manifest_path(output), "the output's manifest (OUT.manifest.json)", "-o OUT"),
              Written(manifest_path(output).with_name(manifest_path(output).name + ".tmp"),
                      "the output's manifest being written", "-o OUT"),
              Written(checkpoint, f"the output's checkpoint ({checkpoint.name})", "-o OUT",
                      folder=checkpoint.suffix == ".partial")]
    if getattr(args, "judge_batch", False):
        writes.append(Written(Path(f"{output}.judge-batch"), "the judge batch's folder (OUT.judge-batch)", "-o OUT",
                              folder=True))
    if getattr(args, "annotate", None):
        writes += [Written(Path(f"{output}{SIDE_SUFFIX}"), f"the annotations' side file (OUT{SIDE_SUFFIX})", "-o OUT"),
                   Written(progress_path(output), "the annotations' progress file (OUT.annotate-progress)", "-o OUT")]
    writes += [Written(path, "an annotation file (--annotate)", "--annotate target") for path in annotated]
    writes.append(Written(cache_dir, "the cache folder (--cache-dir)", "--cache-dir DIR"))
    check_distinct(reads, writes)


_LIMITS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "more than"),
           "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}


SCORER_FLAGS = {"model": "--model", "base_url": "--base-url", "api_key_env": "--api-key-env",
                "quality_preset": "--quality-preset"}
"""The scorer options that have a flag of their own; any other is given as `--option NAME=VALUE`."""


def one_line(exc: ValidationError, flags: dict[str, str] | None = None, *, options: bool = False) -> str:
    """A validation error as one line naming the flag, the value given and what it takes.

    A field is named by its flag (`chunk_size` → `--chunk-size`, or as `flags` say; with `options`,
    a scorer option as `--option NAME`); a bound as words ("must be at least 1"), anything else in
    pydantic's words without its link.
    """
    first = exc.errors(include_url=False)[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    own = f"--option {field}" if options else flag_of(field)
    flag = (flags or {}).get(field) or (own if field else "")
    given = first.get("input")
    shown = f" {_number(given)}" if field and not isinstance(given, (dict, list, tuple, frozenset)) else ""
    kind = str(first["type"])
    if kind in _LIMITS:
        key, words = _LIMITS[kind]
        said = f"must be {words} {_number(first.get('ctx', {}).get(key))}"
    else:
        said = str(first["msg"]).removeprefix("Value error, ")
    more = len(exc.errors()) - 1
    rest = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{flag}{shown}: {said}{rest}" if flag else f"{said}{rest}"


def flag_of(name: str) -> str:
    """The flag of an option named as `argparse` and `Settings` name it: `chunk_size` → `--chunk-size`."""
    return "--" + name.replace("_", "-")


def _number(value: Any) -> str:
    """A value as the command line spells it: `-5`, not `-5.0`."""
    return f"{value:g}" if isinstance(value, float) else str(value)
