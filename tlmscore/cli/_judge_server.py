"""`tlmscore judge-server`: serve a local judge model (OpenAI-compatible, llama.cpp) for `--scorer judge`.

`--model PATH` serves a GGUF file; `--fetch NAME` first fetches a known model into the cache's
`models/` folder, verified by size and SHA-256 (`tlmscore.local_judge`), and `--fetch-only` stops
there, printing the file's path. Serving needs the `local-judge` extra (xllamacpp).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError
from tlmscore.local_judge import MODELS, cached_models, check_model_file, fetch, serve
from tlmscore.settings import default_cache_dir

EXAMPLES = """\
examples:
  tlmscore judge-server --fetch qwen2.5-coder-1.5b            # fetch (once), verify, serve on 127.0.0.1:8080
  tlmscore judge-server --model ./my-model.gguf --port 8081
  tlmscore score logs.jsonl -o scores.parquet --scorer judge --base-url http://127.0.0.1:8080/v1 \\
      --model qwen2.5-coder-1.5b --option mode=claims
"""
_PORTS = (1, 65535)
_SMALLEST_CONTEXT = 512


def add_judge_server_parser(sub: Any, formatter: Any) -> None:
    """The `judge-server` command's flags."""
    parser = sub.add_parser("judge-server", help="serve a local judge model (llama.cpp, OpenAI-compatible) "
                                                 "for --scorer judge", epilog=EXAMPLES, formatter_class=formatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", type=Path, metavar="PATH", help="a GGUF model file to serve")
    which.add_argument("--fetch", choices=sorted(MODELS), metavar="NAME",
                       help=f"fetch a known model (verified by SHA-256) and serve it: {', '.join(sorted(MODELS))}")
    parser.add_argument("--fetch-only", action="store_true", help="with --fetch: print the model's path and exit")
    parser.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                        help="where fetched models are kept, in DIR/models (default: the page cache's folder)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument("--context", type=int, default=4096, metavar="TOKENS",
                        help="the model's context in tokens (default 4096)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: llama.cpp's choice)")


def check_judge_server(args: argparse.Namespace) -> None:
    """Refuse bad flags and paths (one line, exit 2) before any download or model load."""
    if not _PORTS[0] <= args.port <= _PORTS[1]:
        raise ConfigError(f"--port {args.port}: give a port from {_PORTS[0]} to {_PORTS[1]}")
    if args.context < _SMALLEST_CONTEXT:
        raise ConfigError(f"--context {args.context}: give at least {_SMALLEST_CONTEXT} tokens")
    if args.threads < 0:
        raise ConfigError(f"--threads {args.threads}: give 0 (llama.cpp's choice) or more")
    if args.fetch_only and args.fetch is None:
        raise ConfigError("--fetch-only goes with --fetch NAME")
    if args.model is not None:
        check_model_file(args.model)


def run_judge_server(args: argparse.Namespace) -> int:
    """Fetch the model when asked, then serve it until Ctrl-C (or print its path with `--fetch-only`)."""
    if args.fetch is not None:
        folder = cached_models(args.cache_dir or default_cache_dir())
        print(f"tlmscore: fetching {args.fetch} into {folder} (once; verified by SHA-256) …", file=sys.stderr)
        path = fetch(args.fetch, folder)
        print(f"tlmscore: {path.name}: {MODELS[args.fetch].licence}", file=sys.stderr)
        if args.fetch_only:
            print(path)
            return 0
    else:
        path = args.model
    name = args.fetch or path.stem

    def ready(url: str) -> None:
        print(f"tlmscore: judge server at {url} ({path.name}); score with --scorer judge --base-url {url} "
              f"--model {name} --option mode=claims; Ctrl-C stops it", file=sys.stderr)

    serve(path, args.host, args.port, context=args.context, threads=args.threads, ready=ready)
    return 0
