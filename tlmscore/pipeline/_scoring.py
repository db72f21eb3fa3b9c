"""A chunk's scoring: in this process, or for a CPU-bound scorer in worker processes on every core.

The grounding scorer is pure Python and takes most of an offline run's CPU; the rest (reading,
converting, rendering) runs in this process. A scorer that says it is `cpu_bound` and can be
pickled (the grounding scorer pickles as its options, `Calibrated` as its scorer and calibration)
is sent once to each worker process; each chunk's inputs are cut into one contiguous slice a
worker, and the run prepares the next chunk here while the workers score this one. A score depends
on its input alone, so the rows are those of a run in one process (a test holds it).

A worker is a new interpreter that imports this module (`_BOOT`), not a `multiprocessing` child:
that would import the caller's main module again, and a script without an `if __name__ == "__main__":`
guard would run twice. It takes the run's `sys.path` before it imports anything, talks over two pipes
of its own (pickles, one message a slice), and ends when its pipe from the run closes, so it never
outlives the run, even a killed one.

Worker processes start only for a chunk with at least `POOLED_AT_LEAST` inputs to score: a small
run (a notebook's dozen records) never pays for starting them. A worker that fails leaves its chunk,
and every later one, to this process, with the same scores.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

from tlmscore._cores import cores
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, Scorer

_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from tlmscore.pipeline._scoring import serve; serve(int(sys.argv[2]), int(sys.argv[3]))")
"""A worker's program: the run's import path first, so it imports the run's own tlmscore and scorer."""

POOLED_AT_LEAST = 500
"""The fewest inputs of one chunk that are scored in worker processes rather than in this process."""


def _slices(inputs: Sequence[ScoringInput], parts: int) -> list[Sequence[ScoringInput]]:
    """`inputs` cut into at most `parts` contiguous slices of nearly equal length, in order."""
    size, extra = divmod(len(inputs), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]  # the first `extra` slices one longer
    return [inputs[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class WorkerError(Exception):
    """A worker ended, or answered with something other than scores."""


class _Worker:
    """One scoring process, and the two pipes the run talks to it over, one slice at a time.

    Two chunks may be scored at once (one finishing while the next starts), so a lock keeps each
    slice's request and answer together on the pipes.
    """

    def __init__(self, scorer: bytes) -> None:
        self._turn = threading.Lock()
        to_worker, self._in = os.pipe()
        self._out, from_worker = os.pipe()
        self._process = subprocess.Popen(  # noqa: S603  (this interpreter, this module)
            [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(to_worker), str(from_worker)],
            pass_fds=(to_worker, from_worker), stdin=subprocess.DEVNULL, close_fds=True)
        os.close(to_worker)
        os.close(from_worker)
        self._send: IO[bytes] = os.fdopen(self._in, "wb")
        self._receive: IO[bytes] = os.fdopen(self._out, "rb")
        self._send.write(scorer)
        self._send.flush()

    def score(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """The scores of `inputs` (blocking: the run calls it on a thread of its own)."""
        try:
            with self._turn:
                pickle.dump(list(inputs), self._send, protocol=pickle.HIGHEST_PROTOCOL)
                self._send.flush()
                found = pickle.load(self._receive)  # noqa: S301  (our own worker's answer)
        except (OSError, EOFError, pickle.PickleError, ValueError) as exc:
            raise WorkerError(f"a scoring process ended ({type(exc).__name__})") from exc
        if not isinstance(found, list) or len(found) != len(inputs):
            raise WorkerError(f"a scoring process failed: {found!r}"[:300])
        return found

    def close(self) -> None:
        """Close its pipe (the worker ends on it) and wait for it; kill it if it does not end."""
        for stream in (self._send, self._receive):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class Scoring:
    """How a run scores its chunks: `scorer` in this process, or in `workers` processes when it is CPU-bound.

    `ahead` is how many chunks may be scored while the next is prepared: 1 with worker processes,
    else 0 (a scorer that waits on the network scores one chunk at a time, as it always has).
    """

    def __init__(self, scorer: Scorer, workers: int | None = None) -> None:
        self.scorer = scorer
        self._count = workers if workers is not None else cores()
        self._pooled = self._count > 1 and bool(getattr(scorer, "cpu_bound", False))
        self._workers: list[_Worker] = []

    @property
    def ahead(self) -> int:
        return 1 if self._pooled else 0

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, in order: in worker processes when the scorer and the chunk call for them."""
        if not self._pooled or len(inputs) < POOLED_AT_LEAST:
            return await self.scorer.score_many(inputs)
        try:
            workers = self._workers or await asyncio.to_thread(self._start)
            parts = await asyncio.gather(*(asyncio.to_thread(worker.score, part)
                                           for worker, part in zip(workers, _slices(inputs, len(workers)),
                                                                   strict=False)))
        except (WorkerError, OSError, pickle.PickleError):  # this process scores from here on
            self._pooled = False
            self.close()
            return await self.scorer.score_many(inputs)
        return [score for part in parts for score in part]

    def _start(self) -> list[_Worker]:
        pickled = pickle.dumps(self.scorer, protocol=pickle.HIGHEST_PROTOCOL)
        self._workers = [_Worker(pickled) for _ in range(self._count)]
        return self._workers

    def close(self) -> None:
        """Stop the worker processes (nothing when none was started)."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()


def serve(receive_fd: int, send_fd: int) -> None:
    """A worker's life: the scorer, then one slice after another, until the pipe from the run closes.

    A worker that cannot go on (a pipe broken by a run that ended, a message it cannot read) ends
    quietly: the run sees its pipe close and scores the chunk itself.
    """
    with contextlib.suppress(Exception, KeyboardInterrupt), os.fdopen(receive_fd, "rb") as receive, \
            os.fdopen(send_fd, "wb") as send:
        _serve(receive, send)


def _serve(receive: IO[bytes], send: IO[bytes]) -> None:
    scorer: Scorer = pickle.load(receive)  # noqa: S301  (from the run that started this process)
    while True:
        try:
            inputs = pickle.load(receive)  # noqa: S301
        except EOFError:
            return
        try:
            answer: Any = asyncio.run(scorer.score_many(inputs))
        except Exception as exc:  # noqa: BLE001  (said back to the run, which scores the chunk itself)
            answer = f"{type(exc).__name__}: {exc}"
        pickle.dump(answer, send, protocol=pickle.HIGHEST_PROTOCOL)
        send.flush()
