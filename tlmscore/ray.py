"""The whole pipeline on Ray Data: the same rows as one machine, for log sets too big for one.

`prepare(inputs, settings)` and `score(inputs, settings, scorer)` return a `ray.data.Dataset` of
rows (the single-machine columns, plus `position`: sort by it to restore input order, and
`input`: the number of the input file). The dataset-wide steps are the engine's: records are
read and converted in workers; chains are resolved by joins on ids (`engines.links`); the URLs of
the whole dataset are deduplicated and fetched host by host by an actor pool, through a shared
page store (`engines.pages`); pages are joined back to their records, which are rendered and
scored by an actor pool (`engines.rows`). `write` puts the rows in a Parquet dataset, one part
per input, which is what `--resume` skips.

Needs the extra `tlmscore[ray]`; `ray` is imported only when a function here is called.
"""

from __future__ import annotations

import functools
import json
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tlmscore.engines import (
    FetchPages,
    ScoreRows,
    convert_row,
    flat_rows,
    grouped,
    input_rows,
    join_on_key,
    judged_on_driver,
    planned_urls,
    read_input,
    render_rows,
    schema,
    store_pages,
    stored_pages,
    with_links,
    with_pages,
)
from tlmscore.errors import ConfigError
from tlmscore.ingest import BatchInputs
from tlmscore.scoring.base import Scorer
from tlmscore.settings import Settings

if TYPE_CHECKING:
    from ray.data import Dataset

    from tlmscore.pipeline import Job, RunResult
    from tlmscore.scoring.calibration import Calibration

__all__ = ["Engine", "complete_inputs", "connect", "prepare", "read", "run", "score", "write"]

_MANIFEST = "_inputs.json"
_ACTOR_CPUS = 0.25  # fetchers and scorers mostly wait on the network; they leave CPUs to the tasks


def _ray_data() -> Any:
    try:
        import ray.data  # noqa: PLC0415  (an optional extra, loaded on demand)
    except ImportError as exc:
        raise ConfigError("the Ray engine needs Ray Data: pip install 'tlmscore[ray]'") from exc
    return ray.data


def connect(address: str | None, *, num_cpus: int | None = None) -> ModuleType:
    """Ray, connected to the cluster at `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`), or to a new local one.

    The command line's connection; a library caller connects (or not: Ray Data starts a local
    cluster on first use) as it sees fit.
    """
    _ray_data()
    import ray  # noqa: PLC0415

    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    module: ModuleType = ray  # typed whether or not `ray` is installed where mypy runs
    return module


class Engine:
    """How the stages spread over the cluster: fetch actors, scorer actors, shuffle partitions."""

    def __init__(self, *, fetchers: int = 2, scorers: int = 2, partitions: int | None = None,
                 page_store: str | Path | None = None, only_inputs: Sequence[int] | None = None) -> None:
        self.fetchers = fetchers
        self.scorers = scorers
        self.partitions = partitions
        self.page_store = str(page_store) if page_store is not None else None
        self.only_inputs = set(only_inputs) if only_inputs is not None else None

    def run(self, job: Job) -> RunResult:
        """`tlmscore.run`'s job on the cluster (`tlmscore.pipeline.Engine`): rows to the output folder.

        Connects to a cluster only if the caller has not (Ray Data starts a local one on first use).
        """
        from tlmscore.pipeline import RunResult  # noqa: PLC0415  (a later stage's value, named only here)

        if job.output is None:
            raise ConfigError("the Ray engine writes its rows to an output folder: give one")
        if job.scorer is not None:
            job.make_scorer()  # the scorer's options and keys, checked before Ray works
        names = [str(p) for p in job.inputs]
        earlier = complete_inputs(job.output, names) if job.resume and (job.output / _MANIFEST).is_file() else []
        if job.on_start is not None:
            job.on_start(_count_rows(job.output, earlier))
        done = run(names, job.output, job.settings, scorer=job.scorer, options=job.options, engine=self,
                   resume=job.resume, calibration=job.calibration)
        now, before = _count_rows(job.output, done), _count_rows(job.output, earlier)
        return RunResult(job.output, now, before, now + before)

    def shuffle_partitions(self) -> int:
        """Partitions of each join and group-by: the given number, else the cluster's CPUs."""
        if self.partitions is not None:
            return self.partitions
        import ray  # noqa: PLC0415

        # untyped where `ray` is installed, Any where it is not
        return max(2, int(ray.cluster_resources().get("CPU", 2)))  # type: ignore[no-untyped-call,unused-ignore]


def read(paths: Sequence[str | Path]) -> Dataset:
    """The records of `paths` (JSONL, plain or `.gz`, JSON or Parquet; local or any pyarrow filesystem)."""
    data = _ray_data()
    files = data.from_items(input_rows([str(p) for p in paths]), override_num_blocks=max(1, len(paths)))
    return flat_rows(files, read_input, schema(input="int64", position="int64", source="string", line="int64",
                                               record="binary", error="string"))


def _records(source: Sequence[str | Path] | str | Path | Dataset) -> Dataset:
    if isinstance(source, (str, Path)):
        return read([source])
    if isinstance(source, Sequence):
        return read(list(source))
    return source


def _converted(source: Sequence[str | Path] | str | Path | Dataset, settings: Settings, engine: Engine) -> Dataset:
    if settings.hydrate:
        raise ConfigError("records holding only a response id are not filled in (hydrate) by the Ray engine yet; "
                          "run `tlmscore pull` first, or hydrate on one machine")
    partitions = engine.shuffle_partitions()
    records = _records(source).materialize()
    # Batch API output lines get their requests from the input files: indexed once here, each task
    # reads the lines it needs from the same files (at the same paths on every node, as the inputs)
    batch = BatchInputs(settings.batch_inputs) if settings.batch_inputs else None
    linked = with_links(records, partitions, batch)
    if engine.only_inputs is not None:
        keep = engine.only_inputs
        linked = linked.filter(lambda r: r["input"] in keep)
    converted: Dataset = linked.map(functools.partial(convert_row, settings=settings, batch=batch)).materialize()
    return converted


def _pages(converted: Dataset, settings: Settings, engine: Engine) -> Dataset:
    partitions = engine.shuffle_partitions()
    planned = planned_urls(converted)
    stored = stored_pages(engine.page_store, settings)
    todo = planned
    if stored is not None:
        todo = join_on_key(planned, stored.select_columns(["key"]), "left_anti", partitions)
    fetched: Dataset = grouped(todo, "host", partitions).map_groups(
        FetchPages, batch_format="pyarrow", compute=_ray_data().ActorPoolStrategy(size=engine.fetchers),
        num_cpus=_ACTOR_CPUS,
        fn_constructor_kwargs={"settings": settings}).materialize()
    if engine.page_store is None:
        return fetched
    # With a store, pages are read back from it: what the fetch actors held in memory could be
    # lost with a node, the store's files are not. The join with the records keeps the pages cited.
    store_pages(fetched, engine.page_store)
    everything = stored_pages(engine.page_store, settings)
    if everything is None:
        return fetched
    missed: Dataset = fetched.filter(lambda row: row["status"] == "offline_miss")  # the store does not keep them
    return everything.union(missed)


def _joined(source: Sequence[str | Path] | str | Path | Dataset, settings: Settings, engine: Engine) -> Dataset:
    converted = _converted(source, settings, engine)
    return with_pages(converted, _pages(converted, settings, engine), engine.shuffle_partitions())


def prepare(source: Sequence[str | Path] | str | Path | Dataset, settings: Settings | None = None, *,
            engine: Engine | None = None) -> Dataset:
    """Rows with the rendered prompt and response of every record, as `tlmscore.prepare` makes them.

    `source` is input paths or a dataset from `read`. Pages are fetched (and the page store
    written) when this is called; rendering runs when the dataset is consumed.
    """
    settings = settings or Settings()
    rows: Dataset = _joined(source, settings, engine or Engine()).map_batches(
        functools.partial(render_rows, settings=settings), batch_format="pyarrow")
    return rows


def score(source: Sequence[str | Path] | str | Path | Dataset, settings: Settings | None = None,
          scorer: str | Scorer = "grounding", *, options: Mapping[str, Any] | None = None,
          engine: Engine | None = None, calibration: Calibration | None = None) -> Dataset:
    """`prepare`, plus the score columns, scored by `engine.scorers` actors (the in-flight limit).

    `calibration` wraps the scorer in each actor (`tlmscore.scoring.calibration.Calibrated`), which
    adds `calibrated_score`. A judge in Batch API mode (`options={"batch": True, "batch_dir": ...}`)
    sees every row at once: the rows' inputs are rendered first and judged on the driver, through
    batches, when this is called; the actors then look each row's verdict up.
    """
    settings = settings or Settings()
    engine = engine or Engine()
    joined = _joined(source, settings, engine)
    if isinstance(scorer, str) and (options or {}).get("batch"):
        joined = joined.materialize()  # rendered twice: for the driver's batches, then for the rows
        scorer, options = judged_on_driver(joined, settings, scorer, options or {}), None
    rows: Dataset = joined.map_batches(
        ScoreRows, batch_format="pyarrow", compute=_ray_data().ActorPoolStrategy(size=engine.scorers),
        num_cpus=_ACTOR_CPUS,
        fn_constructor_kwargs={"settings": settings, "scorer": scorer, "options": options,
                               "calibration": calibration})
    return rows


def _manifest(out_dir: Path, inputs: list[str], *, resume: bool) -> None:
    """Check (on resume) or write the list of inputs the parts of `out_dir` are numbered by."""
    path = out_dir / _MANIFEST
    if resume and path.is_file():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        if earlier != inputs:
            raise ConfigError(f"{out_dir}: --resume needs the same inputs as the run that wrote it")
        return
    if out_dir.exists() and any(out_dir.iterdir()):
        for part in out_dir.glob("part-*"):
            shutil.rmtree(part)
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(inputs), encoding="utf-8")


def _part(out_dir: Path, index: int) -> Path:
    return out_dir / f"part-{index:05d}"


def complete_inputs(out_dir: str | Path, inputs: Sequence[str | Path]) -> list[int]:
    """The inputs (by number) whose rows are all in `out_dir` already."""
    return [i for i in range(len(inputs)) if _part(Path(out_dir), i).is_dir()]


def write(rows: Dataset, out_dir: str | Path, inputs: Sequence[str | Path], pending: Sequence[int]) -> None:
    """Write `rows` to `out_dir`, one part per input, each part appearing whole or not at all.

    Rows go to a scratch folder first (`_scratch/`, which readers of the dataset skip); a part is
    moved into place once every row is written, so a run killed at any point leaves complete
    parts only and a `--resume` redoes exactly the rest.
    """
    out = Path(out_dir)
    scratch = out / "_scratch" / uuid.uuid4().hex[:12]
    rows.write_parquet(str(scratch), partition_cols=["input"])
    for index in pending:
        written = scratch / f"input={index}"
        if not written.is_dir():
            written.mkdir(parents=True)
        written.rename(_part(out, index))
    shutil.rmtree(out / "_scratch", ignore_errors=True)


def run(inputs: Sequence[str | Path], out_dir: str | Path, settings: Settings, *, scorer: str | Scorer | None = None,
        options: Mapping[str, Any] | None = None, engine: Engine | None = None, resume: bool = False,
        calibration: Calibration | None = None) -> list[int]:
    """Prepare or score `inputs` into `out_dir`; returns the inputs done now (the others were done before)."""
    names = [str(p) for p in inputs]
    out = Path(out_dir)
    _manifest(out, names, resume=resume)
    shutil.rmtree(out / "_scratch", ignore_errors=True)
    done = set(complete_inputs(out, names)) if resume else set()
    pending = [i for i in range(len(names)) if i not in done]
    if not pending:
        return []
    base = engine or Engine()
    engine = Engine(fetchers=base.fetchers, scorers=base.scorers, partitions=base.partitions,
                    page_store=base.page_store, only_inputs=pending if done else None)
    rows = prepare(names, settings, engine=engine) if scorer is None else score(
        names, settings, scorer, options=options, engine=engine, calibration=calibration)
    write(rows, out, names, pending)
    return pending


def _count_rows(out_dir: Path, parts: Sequence[int]) -> int:
    import pyarrow.dataset as pads  # noqa: PLC0415

    parts_there = [_part(out_dir, i) for i in parts if _part(out_dir, i).is_dir()]
    return sum(int(pads.dataset(str(part), format="parquet").count_rows()) for part in parts_there)
