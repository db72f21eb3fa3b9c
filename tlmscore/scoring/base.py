"""The scorer seam: the `Score` value, the `Scorer` protocol and the registry of scorers by name.

A scorer turns many `ScoringInput`s into one `Score` each, concurrently, and never lets one bad row
abort the batch: a row that fails becomes a `Score` with a NaN score and `error` set. Scorers are
found by name: the built-in ones are listed in `SCORERS` (imported only when asked for, so the
optional dependencies of one scorer never burden another), and other packages can add their own
through the `tlmscore.scorers` entry-point group. Each scorer module exposes
`create(options) -> Scorer`, so a new scorer is one module; a module may also declare a `SPEC`
(`ScorerSpec`): the options that only decide what it spends, where it caches, and whether a run
must submit every row before it collects any. A run asks the spec (`spec_of`), never the name.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from tlmscore._reach import PROBE_TIMEOUT, check_reachable
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.plugins import Kind, factories, plugins

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGINS",
    "SCORERS",
    "Precomputed",
    "Score",
    "Scorer",
    "ScorerFactory",
    "ScorerSpec",
    "get_scorer",
    "input_key",
    "parse_options",
    "score_rows",
    "scorer_names",
    "spec_of",
]

ENTRY_POINT_GROUP = "tlmscore.scorers"
SCORERS: Mapping[str, str] = MappingProxyType({
    "grounding": "tlmscore.scoring.grounding",
    "judge": "tlmscore.scoring.judge",
    "tlm": "tlmscore.scoring.tlm",
})
"""Built-in scorer names and the module whose `create(options)` builds each."""

OptionsT = TypeVar("OptionsT", bound=BaseModel)


@dataclass(frozen=True)
class Score:
    """One row's result.

    `score` is in [0, 1], or NaN when the row could not be scored: then `explanation` says why
    (nothing to check it against, say) and, when the scorer failed on this row, `error` holds the
    failure. `details` is a JSON-able dict whose keys depend on the scorer. `columns` are more
    columns for the row, added by a scorer that wraps another (`calibrated_score`); such a scorer
    names them in a `columns` attribute, so rows it never saw get them too (as NaN).
    """

    score: float
    explanation: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    columns: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (math.isnan(self.score) or 0.0 <= self.score <= 1.0):
            raise ValueError(f"a score must be in [0, 1] or NaN, not {self.score!r}")

    @classmethod
    def failed(cls, error: str, details: dict[str, Any] | None = None) -> Score:
        """A row the scorer failed on: NaN, with the error as explanation too."""
        return cls(math.nan, f"not scored: {error}", details or {}, error)

    @classmethod
    def unscorable(cls, explanation: str, details: dict[str, Any] | None = None) -> Score:
        """A row that has nothing to score (not a failure): NaN with the reason."""
        return cls(math.nan, explanation, details or {})

    @property
    def scored(self) -> bool:
        """True when `score` is a number, not NaN."""
        return not math.isnan(self.score)


@runtime_checkable
class Scorer(Protocol):
    """Scores many inputs concurrently; returns exactly one `Score` per input, in input order."""

    @property
    def name(self) -> str:
        """The registry name, written to the `scorer` column."""
        ...

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One `Score` per input; failures are per row, never raised."""
        ...


ScorerFactory = Callable[[Mapping[str, Any]], Scorer]


PLUGINS: Kind[ScorerFactory] = Kind("scorer", ENTRY_POINT_GROUP, lambda: SCORERS, factories("(options) -> Scorer"))
"""Scorers from other packages (`tlmscore.scorers` entry points); one named as a built-in is refused."""


@dataclass(frozen=True)
class ScorerSpec:
    """What a run needs to know of a scorer besides making it (a scorer module's `SPEC`).

    `spending`: options that decide whether or what the scorer pays, not its rows (a resumed run may
    change them, say a higher cost limit). `cache`: the option naming the folder of the scorer's own
    cache, which a run puts beside the page cache (`Settings.cache_dir / name`) when not given.
    `submit_ahead`: the option that, when true, has the run send every row's requests before it
    collects any (a Batch API mode), by first running the scorer with `submit_only` true.
    `endpoint`: the address of the server the scorer asks, from its options (None: it asks none),
    which a run checks is reachable before its first batch (`check_endpoint`).
    """

    name: str
    spending: frozenset[str] = frozenset()
    cache: str | None = None
    submit_ahead: str | None = None
    submit_only: str | None = None
    endpoint: Callable[[Mapping[str, Any]], str | None] | None = None

    def check_endpoint(self, options: Mapping[str, Any]) -> None:
        """Raise `ConfigError` when the scorer's server does not answer (within its `timeout` option, at most 10 s)."""
        url = self.endpoint(options) if self.endpoint is not None else None
        if url is None:
            return
        given = options.get("timeout")
        limit = min(PROBE_TIMEOUT, float(given)) if isinstance(given, (int, float)) and given > 0 else PROBE_TIMEOUT
        check_reachable(url, f"{self.name} scorer: its endpoint", timeout=limit)

    def recorded(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options a resumed run must share with the run it continues: all but what only decides spending."""
        return {k: v for k, v in options.items() if k not in self.spending}

    def with_cache(self, options: Mapping[str, Any], cache_dir: Path) -> dict[str, Any]:
        """`options`, the cache folder set to `cache_dir / name` when the scorer has a cache and none is given."""
        if self.cache is None or self.cache in options:
            return dict(options)
        return {**options, self.cache: str(cache_dir / self.name)}

    def two_passes(self, options: Mapping[str, Any]) -> bool:
        """Whether `options` ask for every row's requests to be submitted before any is collected."""
        return self.submit_ahead is not None and bool(options.get(self.submit_ahead))

    def submitting(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options of the first of two passes, which only submits."""
        if self.submit_only is None:
            raise ScorerError(f"{self.name} scorer: no submit-only pass")
        return {**options, self.submit_only: True}


def spec_of(name: str) -> ScorerSpec:
    """The spec of the scorer called `name` (a scorer that declares none spends nothing, caches nothing)."""
    spec = getattr(import_module(SCORERS[name]), "SPEC", None) if name in SCORERS else None
    return spec if isinstance(spec, ScorerSpec) else ScorerSpec(name)


def scorer_names() -> tuple[str, ...]:
    """Every scorer name `get_scorer` accepts: the built-in ones and installed plug-ins, sorted."""
    return tuple(sorted({*SCORERS, *plugins(PLUGINS)}))


def _factory(name: str) -> ScorerFactory:
    if name in SCORERS:
        factory: ScorerFactory = import_module(SCORERS[name]).create
        return factory
    plugin = plugins(PLUGINS).get(name)
    if plugin is not None:
        return plugin
    raise ScorerError(f"unknown scorer {name!r}; choose one of: {', '.join(scorer_names())}")


def get_scorer(name: str, options: Mapping[str, Any] | None = None) -> Scorer:
    """The scorer called `name`, set up with `options` (scorer-specific keywords).

    Everything that can be checked before work starts is checked here (unknown options, a missing
    package or API key), and reported as one `ScorerError`.
    """
    return _factory(name)(dict(options or {}))


def parse_options(model: type[OptionsT], options: Mapping[str, Any], scorer: str) -> OptionsT:
    """Validate a scorer's options against its pydantic model; errors become one `ScorerError`."""
    try:
        return model.model_validate(dict(options))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors())
        raise ScorerError(f"{scorer} scorer options: {problems}") from None


async def score_rows(inputs: Sequence[ScoringInput], score_one: Callable[[ScoringInput], Awaitable[Score]], *,
                     concurrency: int) -> list[Score]:
    """Run `score_one` over `inputs`, at most `concurrency` at a time; a raised error fails its row only."""
    gate = asyncio.Semaphore(concurrency)

    async def guarded(item: ScoringInput) -> Score:
        async with gate:
            try:
                return await score_one(item)
            except ScorerError as exc:
                return Score.failed(str(exc))
            except Exception as exc:  # noqa: BLE001  (one row's failure must not abort the batch)
                return Score.failed(f"{type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(guarded(item) for item in inputs)))


def input_key(item: ScoringInput) -> str:
    """A key of an input's content: the same rendered input has the same key in any process."""
    return hashlib.sha256(repr(item).encode()).hexdigest()


class Precomputed:
    """A scorer that looks up scores worked out before, by `input_key` of their inputs.

    An engine that spreads rows over workers uses it for a scorer that must see every row at once
    (the judge's Batch API mode): the driver scores all inputs, the workers look the scores up.
    """

    def __init__(self, name: str, scores: Mapping[str, Score]) -> None:
        self.name = name  # the scorer that worked the scores out
        self._scores = dict(scores)

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """The score of each input; one not scored before fails its row."""
        missing = Score.failed("no score was worked out for this input before the run")
        return [self._scores.get(input_key(item), missing) for item in inputs]
