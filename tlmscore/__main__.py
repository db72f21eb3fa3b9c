"""The `tlmscore` executable (also `python -m tlmscore`): the command line in a process of its own."""

from __future__ import annotations

import gc
import os
import sys
from typing import NoReturn

__all__ = ["own_process", "start"]


def start() -> NoReturn:
    """Run `tlmscore.cli.main` on `sys.argv` and exit with its code.

    The objects made at start-up are frozen out of the garbage collector's reach, so its passes
    during the run walk only what the run makes; and again at the end, so the interpreter's
    closing passes do not walk a whole batch's objects only to free memory the operating system
    takes back anyway.
    """
    argv = sys.argv[1:]
    own_process()
    from tlmscore.cli import main  # noqa: PLC0415

    gc.freeze()
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    sys.exit(code)


def own_process() -> None:
    """Set up the executable's own process before the command line is imported.

    Only the executable's process: a library call leaves its host's modules and environment alone.
    """
    # httpx imports its own command line (click, pygments, rich) whenever those are installed,
    # at every start; this process never runs it, so it is marked as absent.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "no such module"
    # numpy, which pyarrow loads for a Parquet output, starts a BLAS thread per core that spins
    # while the batch is fetching; the command line does no linear algebra.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pydantic imports every installed plug-in of its own when the first model is made (logfire's
    # brings its whole SDK: a quarter of a second of CPU at every start); this process validates
    # only its own settings. PYDANTIC_DISABLE_PLUGINS set to anything (empty: none) is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


if __name__ == "__main__":
    start()
