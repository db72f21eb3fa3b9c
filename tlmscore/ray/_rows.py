"""Records to rows on Ray Data: convert, give each record its pages, render, score.

The per-record steps are the pipeline's own (`convert_record`, `record_row`, `score_rows`),
so a row is the one a single machine makes of the same record and pages. A record gets its pages
in one of two ways: joined to its row (`with_pages`), or, when every page fetched fits in
`PageTable`'s limit, looked up in one table each renderer holds whole (no shuffle of the records).
Rows travel as pickled `Row`s (a `row` column beside `position` and `input`), so the run gets the
very rows a single machine makes; `table_of` spreads them into the output's columns for a dataset a
caller reads.
"""

from __future__ import annotations

import asyncio
import functools
import pickle
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tlmscore._urls import url_key
from tlmscore.evidence.page import Page
from tlmscore.ingest import with_input_id
from tlmscore.model import ScoringInput
from tlmscore.output import Row, arrow_table
from tlmscore.pipeline import convert_record, record_row, score_rows
from tlmscore.ray._links import chain_index_of
from tlmscore.ray._read import transcript_of
from tlmscore.ray._tables import attach, flat_rows, join_on_key, schema
from tlmscore.scoring.base import Precomputed, Scorer, get_scorer, input_key
from tlmscore.settings import Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset

    from tlmscore.ingest import BatchInputs
    from tlmscore.scoring.calibration import Calibration


_PAGE_FIELDS = tuple(Page.__dataclass_fields__)
PageTable = dict[str, Page]
"""Every page fetched, by `url_key`: handed whole to each renderer when small enough (`page_table`)."""
_PARTS = schema(position="int64", input="int64", converted="binary", urls="binary", pages="binary")


def convert_row(row: dict[str, Any], settings: Settings, batch: BatchInputs | None = None,
                names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A record row converted (with its history): the pickled result and the URLs it plans.

    `batch` holds the requests of Batch API output lines (`--batch-input`); `names` the inputs' names
    for the id of a record without one (`tlmscore.ingest.input_names`).
    """
    transcript = with_input_id(transcript_of(row, batch), names or {})
    item = convert_record(transcript, settings, chain_index_of(row.get("links"), batch))
    urls = list(item.conversation.urls) if item.conversation is not None else []
    return {"input": row["input"], "position": row["position"], "converted": pickle.dumps(item),
            "urls": pickle.dumps(urls)}


def _cited(urls: bytes | None) -> Iterator[str]:
    """The distinct page keys of a record's pickled URLs, in the order cited."""
    cited = pickle.loads(urls) if urls else []  # noqa: S301  (rows this engine wrote)
    yield from dict.fromkeys(url_key(u) for u in cited if u and u.strip())


def _keys_of(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in _cited(row["urls"]):
        yield {"position": row["position"], "key": key}


def _one_page(row: dict[str, Any]) -> dict[str, Any]:
    page = Page.from_record({name: row[name] for name in _PAGE_FIELDS})
    return {"position": row["position"], "pages": pickle.dumps([(row["key"], page)])}


def with_pages(converted: Dataset, pages: Dataset, partitions: int) -> Dataset:
    """`converted` with a `pages` column: the pickled `(key, Page)` pairs of each record's URLs.

    One join (the URLs each record wants with the pages) and one group-by: each record's row and
    the rows of its pages meet in the group of its `position`.
    """
    wanted = flat_rows(converted, _keys_of, schema(position="int64", key="string"))
    found = flat_rows(join_on_key(wanted, pages, "inner", partitions), lambda r: [_one_page(r)], _PARTS)
    return attach(converted, [found], "pages", _PARTS, partitions, empty=pickle.dumps([]))


def page_table(pages: Dataset, most_bytes: int) -> PageTable | None:
    """Every page of `pages` by key, when the dataset holds at most `most_bytes` (in Arrow); else None.

    A key stored more than once (a page store several runs added to) gives its newest page, the
    first in the dataset's order among equals, so the table is the same whatever the blocks' order.
    """
    if (pages.size_bytes() or 0) > most_bytes:
        return None
    table: PageTable = {}
    newest: dict[str, float] = {}
    for row in pages.iter_rows():
        key, stored = row["key"], row["stored_at"] or 0.0
        if key not in table or stored > newest[key]:
            table[key] = Page.from_record({name: row[name] for name in _PAGE_FIELDS})
            newest[key] = stored
    return table


def _render(batch: pa.Table, settings: Settings, table: PageTable | None = None) -> tuple[list[Row], list[Any]]:
    """Each record of `batch` rendered: its row and what its scorer gets, with the pages of `table` or its row."""
    rows, inputs = [], []
    for row in batch.to_pylist():
        item = pickle.loads(row["converted"])  # noqa: S301  (rows this engine wrote)
        # the pages it renders with, keyed by `url_key` as a chunk's run keys them (`pipeline._stages`)
        if table is not None:
            pages = {key: table[key] for key in _cited(row["urls"]) if key in table}
        else:
            pages = dict(pickle.loads(row["pages"])) if row.get("pages") else {}  # noqa: S301  (rows this engine wrote)
        out, scoring = record_row(item, pages, settings)
        rows.append(out)
        inputs.append(scoring)
    return rows, inputs


def _rows_table(rows: list[Row], batch: pa.Table) -> pa.Table:
    """Rows as pickled `Row`s, with the `position` and `input` of their records."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.table({"position": batch["position"], "input": batch["input"],
                     "row": pa.array([pickle.dumps(row) for row in rows], pa.binary())})


def rows_of(batch: pa.Table) -> list[Row]:
    """The `Row`s of a batch of made rows."""
    return [pickle.loads(blob) for blob in batch["row"].to_pylist()]  # noqa: S301  (rows this engine made)


def table_of(batch: pa.Table) -> pa.Table:
    """A batch of made rows in the output's columns (as a Parquet output encodes them), plus `position` and `input`."""
    rows = rows_of(batch)
    if not rows:
        return batch.select(["position", "input"])
    table = arrow_table([row.to_record() for row in rows])
    return table.append_column("position", batch["position"]).append_column("input", batch["input"])


def render_rows(batch: pa.Table, settings: Settings, table: PageTable | None = None) -> pa.Table:
    """Rendered rows (the `prepare` rows, pickled, with `position` and `input`) of a batch of records."""
    rows, _ = _render(batch, settings, table)
    return _rows_table(rows, batch)


def judged_on_driver(joined: Dataset, settings: Settings, scorer: str, options: Mapping[str, Any],
                     table: PageTable | None = None) -> Precomputed:
    """A scorer that must see every row at once (a scorer in two passes), run once, on the driver.

    The rows' inputs are rendered in the workers and brought to the driver, where the scorer
    scores the distinct ones in one call (its batches hold every row's requests); the result
    looks each input's score up, in the scoring actors.
    """
    inputs = joined.map_batches(functools.partial(_scoring_inputs, settings=settings, table=table),
                                batch_format="pyarrow")
    distinct: dict[str, ScoringInput] = {}
    for row in inputs.iter_rows():
        item = pickle.loads(row["input"])  # noqa: S301  (rows this engine wrote)
        distinct.setdefault(input_key(item), item)
    chosen = get_scorer(scorer, options)
    scores = asyncio.run(chosen.score_many(list(distinct.values())))
    return Precomputed(chosen.name, dict(zip(distinct, scores, strict=True)))


def _scoring_inputs(batch: pa.Table, settings: Settings, table: PageTable | None) -> pa.Table:
    """What the scorer gets of each row that is not an error row, pickled."""
    import pyarrow as pa  # noqa: PLC0415

    _, inputs = _render(batch, settings, table)
    return pa.table({"input": pa.array([pickle.dumps(x) for x in inputs if x is not None], pa.binary())})


class ScoreRows:
    """An actor that renders and scores batches of records with one scorer set up once.

    With `calibration`, the scorer is wrapped as on one machine (`calibrated_score` added); with
    `table`, records find their pages there (`page_table`), not in their rows.
    """

    def __init__(self, settings: Settings, scorer: str | Scorer, options: Mapping[str, Any] | None,
                 calibration: Calibration | None = None, table: PageTable | None = None) -> None:
        self._settings = settings
        self._table = table
        chosen = get_scorer(scorer, options) if isinstance(scorer, str) else scorer
        if calibration is not None:
            from tlmscore.scoring.calibration import Calibrated  # noqa: PLC0415  (numpy only when calibrating)

            chosen = Calibrated(chosen, calibration)
        self._scorer = chosen

    def __call__(self, batch: pa.Table) -> pa.Table:
        """The scored rows of a batch; a scorer failure is that row's error, as on one machine."""
        rows, inputs = _render(batch, self._settings, self._table)
        return _rows_table(asyncio.run(score_rows(rows, inputs, self._scorer)), batch)
