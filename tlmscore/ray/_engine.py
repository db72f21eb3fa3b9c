"""The Ray engine: the pipeline's stages as Ray Data operators, rows handed back to the run in input order.

The dataset-wide steps are the engine's: records are read and converted in workers; chains are
resolved by joins on ids (`_links`); the URLs of the whole dataset are deduplicated and fetched host
by host by an actor pool, through a shared page store (`_pages`); pages are joined back to their
records, or handed whole to every renderer when they are few, and records are rendered and scored
by an actor pool (`_rows`). `Engine.rows` is what `tlmscore.run` asks of it: the final rows in input
order, chunk by chunk, so the run around it (resume, checkpoint, output, summary) is the one of a
single machine. Every operator keeps the order of its blocks, so rows no shuffle moved (no record
has a history, and the pages went whole to every renderer) are in input order already; others are
sorted back into it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from tlmscore.errors import ConfigError
from tlmscore.ingest import BatchInputs, input_names
from tlmscore.output import Row
from tlmscore.ray._links import with_links
from tlmscore.ray._pages import FetchPages, planned_urls, read_back, store_pages, stored_pages
from tlmscore.ray._read import input_rows, read_input
from tlmscore.ray._rows import (
    PageTable,
    ScoreRows,
    convert_row,
    judged_on_driver,
    page_table,
    render_rows,
    rows_of,
    table_of,
    with_pages,
)
from tlmscore.ray._tables import flat_rows, grouped, join_on_key, schema, with_context
from tlmscore.scoring.base import Scorer, spec_of
from tlmscore.settings import Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset

    from tlmscore.pipeline import Job
    from tlmscore.scoring.calibration import Calibration

_ACTOR_CPUS = 0.25  # fetchers and scorers mostly wait on the network; they leave CPUs to the tasks
ROWS_PER_PARTITION = 50_000
"""Records per shuffle partition, when the engine is not told how many partitions to use."""
BLOCK_BYTES = 16 << 20
"""Ray Data's target size of the engine's blocks, against its own 128 MB.

A record's row carries its converted record and pages: a block of 128 MB holds tens of thousands
of them, and an actor pool gets work a block at a time, so one such block keeps every scorer but
one idle (23,000 records reached two scorers as one block of 145 MB; in 9, the scoring took 24 s,
not 43).
"""
STORE_BUDGET = 1000.0
"""Ray Data's budget of object store memory for the engine's datasets, in stores' worth, against its own half a store.

The budget is what a stage may add to the store, less what finished stages still hold there. The
engine's joins put every record and its pages in the store before the stages that follow them, so
with Ray's budget a dataset larger than half the store left those stages none: Ray then gives an
idle stage one task at a time, and at a million records on one node (1 GB store) one scorer actor
worked while the other waited. Everything after the joins reaches the store anyway (what does not
fit is spilled to disk), so the budget holds nothing back that it could save.
"""
BROADCAST_BYTES = 32 << 20
"""The most pages (in Arrow) the engine hands whole to each renderer, instead of joining them to their records.

Joining pages to records shuffles every record, and a copy of each page it cites, by `position`
(at 100,000 records of the labelled fixtures: 21 s of a 60 s preparation on 2 cores). A table of
this size is pickled once per operator and read once by each task or actor.
"""
Inputs = Sequence[str | Path] | str | Path


def _ray_data() -> Any:
    try:
        import ray.data  # noqa: PLC0415  (an optional extra, loaded on demand)
    except ImportError as exc:
        raise ConfigError("the Ray engine needs Ray Data: pip install 'tlmscore[ray]'") from exc
    return ray.data


def connect(address: str | None, *, num_cpus: int | None = None, logging_level: int = logging.INFO) -> ModuleType:
    """Ray, connected to the cluster at `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`), or to a new local one.

    The command line's connection; a library caller connects (or not: Ray Data starts a local
    cluster on first use) as it sees fit. `logging_level` is Ray's own logger's.
    """
    _ray_data()
    import ray  # noqa: PLC0415

    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging_level)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, logging_level=logging_level)
    module: ModuleType = ray  # typed whether or not `ray` is installed where mypy runs
    return module


class Engine:
    """How the stages spread over the cluster: fetch actors, scorer actors, shuffle partitions, a page store."""

    def __init__(self, *, fetchers: int = 2, scorers: int = 2, partitions: int | None = None,
                 page_store: str | Path | None = None, block_bytes: int = BLOCK_BYTES,
                 broadcast_bytes: int = BROADCAST_BYTES) -> None:
        self.fetchers = fetchers
        self.scorers = scorers
        self.partitions = partitions
        self.page_store = str(page_store) if page_store is not None else None
        self.block_bytes = block_bytes
        self.broadcast_bytes = broadcast_bytes

    def rows(self, job: Job, skip: Container[tuple[str, int]], sink: Callable[[list[Row]], None]) -> None:
        """`tlmscore.run`'s rows (`tlmscore.pipeline.Engine`): made on the cluster, handed to `sink` in input order.

        Records in `skip` (saved by the run this one resumes) are not converted, fetched for or
        scored; chains still see them. Connects to a cluster only if the caller has not (Ray Data
        starts a local one on first use).
        """
        self.check(scoring=job.scorer is not None)
        joined = _joined([str(p) for p in job.paths], job.settings, self, skip)
        made = _made(joined, job.settings, self, job.scorer, options=job.options, calibration=job.calibration)
        done = 0
        for rows in _in_order(made if joined.ordered else made.sort("position"), job.settings.chunk_size):
            sink(rows)
            done += len(rows)
            if job.progress is not None:
                job.progress("records", done, None)

    def check(self, *, scoring: bool, cpus: float | None = None) -> None:
        """Refuse an actor pool that would leave the cluster (`cpus` CPUs, else the connected one's) no whole CPU free.

        Ray Data holds each actor's CPUs (`_ACTOR_CPUS`) while its pool lives, and a task of a
        shuffle asks for a whole CPU: with less than that free, the run would wait for it forever.
        A cluster that reports no CPU (an autoscaling cluster's head, or none connected yet) is
        left to Ray, which adds nodes as tasks ask for them.
        """
        cpus = _cluster_cpus() if cpus is None else cpus
        pools = [("--fetchers", self.fetchers), *([("--scorer-concurrency", self.scorers)] if scoring else [])]
        for flag, actors in pools:
            held = actors * _ACTOR_CPUS
            if 0 < cpus < held + 1:
                most = int((cpus - 1) / _ACTOR_CPUS)
                fix = f"at most {most} on this cluster" if most else "a cluster of one CPU runs the local engine only"
                raise ConfigError(f"{flag} {actors}: its actors hold {held:g} of the Ray cluster's {cpus:g} CPUs, "
                                  f"and Ray Data needs a whole one free for each shuffle's tasks; {fix}")

    def shuffle_partitions(self, records: int) -> int:
        """Partitions of each join and group-by of `records` records: the given number, else one per 50,000 records.

        A partition is one call of a per-partition function (`_tables.by_key`), on one Arrow table,
        so its size bounds the memory of that call whatever the dataset's: a million records are 20
        partitions, not one per CPU. Ray runs a shuffle's partitions on at most one actor per CPU,
        each taking several in turn; a small dataset is joined in few partitions (one below
        `ROWS_PER_PARTITION` records).
        """
        if self.partitions is not None:
            return self.partitions
        return max(1, math.ceil(records / ROWS_PER_PARTITION))


def _in_order(made: Dataset, size: int) -> Iterator[list[Row]]:
    """The rows of `made`, `size` at a time, checked to be in input order: a run never writes them out of it."""
    last = -1  # positions are unique and at least 0: each must be above the one before, across batches too
    for batch in made.iter_batches(batch_size=size, batch_format="pyarrow"):
        positions = cast("pa.Table", batch)["position"].to_pylist()
        for before, after in itertools.pairwise([last, *positions]):
            if after <= before:
                raise RuntimeError(f"the Ray engine handed rows out of input order (position {after} after {before})")
        last = positions[-1] if positions else last
        yield rows_of(batch)


def _cluster_cpus() -> float:
    """The connected cluster's CPUs; 0 before Ray is started (Ray Data starts a local cluster on first use)."""
    import ray  # noqa: PLC0415

    if not ray.is_initialized():  # type: ignore[no-untyped-call,unused-ignore]
        return 0.0
    cpus: float = ray.cluster_resources().get("CPU", 0)  # type: ignore[no-untyped-call,unused-ignore]
    return cpus


def read(paths: Sequence[str | Path], fmt: str | None = None) -> Dataset:
    """The records of `paths` (local files of any kind one machine reads; JSONL, JSON or Parquet at any URI).

    `fmt` names the source reader of every local file, as `Settings.input_format` does.
    """
    data = _ray_data()
    files = data.from_items(input_rows([str(p) for p in paths], fmt), override_num_blocks=max(1, len(paths)))
    return flat_rows(files, read_input, schema(input="int64", position="int64", source="string", line="int64",
                                               record="binary", error="string"))


def _sized(data: Dataset, engine: Engine) -> Dataset:
    """`data` and every dataset made from it: the engine's blocks, store budget and order.

    Blocks of `engine.block_bytes`, the store's budget `STORE_BUDGET`, and each operator's output
    blocks in the order of its input's. Set on the dataset's own context (`_tables.with_context`),
    not Ray's process-wide one.
    """
    return with_context(data, {"target_max_block_size": engine.block_bytes,
                               "override_object_store_memory_limit_fraction": STORE_BUDGET,
                               "execution_options.preserve_order": True})


@dataclass(frozen=True)
class _Joined:
    """The records converted, with what rendering needs: their pages, and whether they are in input order."""

    rows: Dataset
    table: PageTable | None  # every page, by key, for each renderer; None: each row carries its own pages
    ordered: bool  # no shuffle moved the rows: their blocks are in input order


def _converted(records: Dataset, settings: Settings, partitions: int, names: Mapping[str, str],
               skip: Container[tuple[str, int]] = ()) -> tuple[Dataset, bool]:
    """The records converted (pickled, with the URLs they plan), and whether they kept their order."""
    if settings.hydrate:
        raise ConfigError("records holding only a response id are not filled in (hydrate) by the Ray engine yet; "
                          "run `tlmscore pull` first, or hydrate on one machine")
    # Batch API output lines get their requests from the input files: indexed once here, each task
    # reads the lines it needs from the same files (at the same paths on every node, as the inputs)
    batch = BatchInputs(settings.batch_inputs) if settings.batch_inputs else None
    linked, ordered = with_links(records, partitions, batch)
    if skip:  # after the links: a follow-up still finds the calls an earlier run saved
        linked = linked.map_batches(functools.partial(_not_done, skip=skip), batch_format="pyarrow")
    convert = functools.partial(convert_row, settings=settings, batch=batch, names=names)
    converted: Dataset = flat_rows(linked, lambda row: [convert(row)], schema(
        input="int64", position="int64", converted="binary", urls="binary")).materialize()
    return converted, ordered


def _not_done(batch: pa.Table, skip: Container[tuple[str, int]]) -> pa.Table:
    """The records of `batch` not in `skip` (`(source, line)` saved by the run being resumed)."""
    import pyarrow as pa  # noqa: PLC0415

    keep = [(source, line) not in skip for source, line in zip(batch["source"].to_pylist(),
                                                               batch["line"].to_pylist(), strict=True)]
    return batch.filter(pa.array(keep, pa.bool_()))


def _pages(converted: Dataset, settings: Settings, engine: Engine, partitions: int) -> Dataset:
    from ray.data.expressions import col  # noqa: PLC0415

    planned = planned_urls(converted)
    stored = stored_pages(engine.page_store, settings)
    todo = planned if stored is None else join_on_key(planned, stored.select_columns(["key"]), "left_anti", partitions)
    # at least a partition per fetch actor: the hosts' groups of one partition go to one actor, in turn
    fetched: Dataset = grouped(todo, "host", max(partitions, engine.fetchers)).map_groups(
        FetchPages, batch_format="pyarrow", compute=_ray_data().ActorPoolStrategy(size=engine.fetchers),
        num_cpus=_ACTOR_CPUS,
        fn_constructor_kwargs={"settings": settings}).materialize()
    if engine.page_store is None:
        return fetched
    # With a store, pages are read back from it: what the fetch actors held in memory could be
    # lost with a node, the store's files are not. The join with the records keeps the pages cited.
    store_pages(fetched, engine.page_store)
    everything = read_back(engine.page_store, settings)
    if everything is None:
        return fetched
    missed: Dataset = fetched.filter(expr=col("status") == "offline_miss")  # the store does not keep them
    together: Dataset = everything.union(missed).materialize()
    return together


def _joined(source: Inputs | Dataset, settings: Settings, engine: Engine,
            skip: Container[tuple[str, int]] = ()) -> _Joined:
    """The records of `source` converted, with their pages: what rendering and scoring need.

    Pages up to `engine.broadcast_bytes` go to every renderer in one table; more are joined to the
    records that cite them, which moves the records out of input order.
    """
    paths = [source] if isinstance(source, (str, Path)) else source
    if isinstance(paths, Sequence):  # read under the engine's settings; materializing copies them
        records, names = _sized(read(paths, settings.input_format), engine).materialize(), input_names(paths)
    else:  # the caller's dataset keeps its context: materializing copies it, the copy is sized
        records, names = _sized(paths.materialize(), engine), {}
    partitions = engine.shuffle_partitions(records.count())
    converted, ordered = _converted(records, settings, partitions, names, skip)
    pages = _pages(converted, settings, engine, partitions)
    table = page_table(pages, engine.broadcast_bytes)
    if table is not None:
        return _Joined(converted, table, ordered)
    return _Joined(with_pages(converted, pages, partitions), None, ordered=False)


def _made(joined: _Joined, settings: Settings, engine: Engine, scorer: str | Scorer | None, *,
          options: Mapping[str, Any] | None = None, calibration: Calibration | None = None) -> Dataset:
    """Rows rendered (no `scorer`), or rendered and scored by `engine.scorers` actors, in the order of `joined`.

    A scorer in two passes is judged on the driver first.
    """
    records = joined.rows
    if scorer is None:
        rendered: Dataset = records.map_batches(functools.partial(render_rows, settings=settings, table=joined.table),
                                                batch_format="pyarrow")
        return rendered
    if isinstance(scorer, str) and spec_of(scorer).two_passes(options or {}):
        records = records.materialize()  # rendered twice: for the driver's batches, then for the rows
        scorer, options = judged_on_driver(records, settings, scorer, options or {}, joined.table), None
    scored: Dataset = records.map_batches(
        ScoreRows, batch_format="pyarrow", compute=_ray_data().ActorPoolStrategy(size=engine.scorers),
        num_cpus=_ACTOR_CPUS,
        fn_constructor_kwargs={"settings": settings, "scorer": scorer, "options": options,
                               "calibration": calibration, "table": joined.table})
    return scored


def prepare(source: Inputs | Dataset, settings: Settings | None = None, *, engine: Engine | None = None) -> Dataset:
    """Rows with the rendered prompt and response of every record, as `tlmscore.prepare` makes them.

    `source` is input paths or a dataset from `read`. The rows have the output's columns, plus
    `position` (sort by it for input order) and `input` (the number of the input file). Pages are
    fetched (and the page store written) when this is called; rendering runs when the dataset is consumed.
    """
    settings = settings or Settings()
    engine = engine or Engine()
    engine.check(scoring=False)
    rows = _made(_joined(source, settings, engine), settings, engine, None)
    return rows.map_batches(table_of, batch_format="pyarrow")


def score(source: Inputs | Dataset, scorer: str | Scorer = "grounding", settings: Settings | None = None, *,
          options: Mapping[str, Any] | None = None, engine: Engine | None = None,
          calibration: Calibration | None = None) -> Dataset:
    """`prepare`, plus the score columns, scored by `engine.scorers` actors (the in-flight limit).

    `calibration` wraps the scorer in each actor (`tlmscore.scoring.calibration.Calibrated`), which
    adds `calibrated_score`. A scorer in two passes (the judge's Batch API mode) sees every row at
    once: the rows' inputs are rendered first and scored on the driver, through batches, when this
    is called; the actors then look each row's score up.
    """
    settings = settings or Settings()
    engine = engine or Engine()
    engine.check(scoring=True)
    scored = _made(_joined(source, settings, engine), settings, engine, scorer, options=options,
                   calibration=calibration)
    return scored.map_batches(table_of, batch_format="pyarrow")
