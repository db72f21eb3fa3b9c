"""Sources: where logs are read from, each kind by a reader that yields transcript records.

- `registry`: `SourceReader`, the built-in readers (`REGISTRY`), the `tlmscore.sources` entry
  points, and `find_reader`, which picks a file's reader by its content (or by name).
- `_tables`: span and observation exports as rows (JSON lines, JSON, Parquet, CSV), streamed.
- `_openinference`: OpenInference / Phoenix spans; `_phoenix`: a live Phoenix server (`with_window`
  puts the command line's `--since`, `--until`, `--limit` into its address).
- `_otlp`, `_genai`: OTLP traces with GenAI spans; `_langfuse`: Langfuse observation exports;
  `_langsmith`: LangSmith run exports.
- `_agents`: the OpenAI Agents SDK's exported spans (a Responses span keeps only its response id);
  `pull`: stored responses by id, and `hydrate`, which fills in a record holding only that id.

A reader's records are ingest's to normalise, so a call renders the same prompt whichever
place it was read from.
"""

from __future__ import annotations

from tlmscore.sources._phoenix import with_window
from tlmscore.sources.registry import REGISTRY, Peek, Read, SourceReader, find_reader, is_live, readers

__all__ = ["REGISTRY", "Peek", "Read", "SourceReader", "find_reader", "is_live", "readers", "with_window"]
