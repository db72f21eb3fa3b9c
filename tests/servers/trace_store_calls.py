"""Calls logged by the real Langfuse and LangSmith OpenAI wrappers, run in a process of its own.

`python -m tests.servers.trace_store_calls CORPUS OPENAI_URL OUT` sends one call per recorded response of
CORPUS to the fake OpenAI server at OPENAI_URL through the official `openai` client, wrapped by
both `langfuse.openai` (which patches the `openai` package for the whole process and installs a
global tracer provider: hence a process of its own) and `langsmith.wrappers.wrap_openai`. Both SDKs
read their keys and endpoints from the environment (`LANGFUSE_*`, `LANGSMITH_*`). One call is made
inside a Langfuse span and a LangSmith chain, so each store also holds an observation and a run that
are not LLM calls. OUT gets `returned.json`: each Response or Chat Completion as the client returned it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

INSTRUCTIONS = "Answer briefly."


def corpus_calls(folder: Path) -> dict[str, dict[str, Any]]:
    """A raw record per corpus response the API returns: the request that gets it, and the response."""
    calls: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        response = json.loads(path.read_text(encoding="utf-8"))
        stem = path.stem
        if response.get("previous_response_id"):
            continue  # a follow-up: its raw record would hold turns that a call of its own does not send
        if response.get("object") == "chat.completion":
            request: dict[str, Any] = {"model": stem, "messages": [
                {"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": f"About {stem}?"}]}
        elif response.get("object") == "response":
            request = {"model": stem, "input": f"About {stem}?", "instructions": INSTRUCTIONS}
        else:
            continue  # an API error object: the API would not return it as a response
        calls[stem] = {"request": request, "response": response}
    return calls


def main(corpus: Path, openai_url: str, out: Path) -> None:
    import langsmith
    from langfuse import get_client
    from langfuse.openai import OpenAI
    from langsmith.wrappers import wrap_openai

    langfuse = get_client()
    runs = langsmith.Client()
    client = wrap_openai(OpenAI(base_url=openai_url, api_key="sk-fake", max_retries=0),
                         tracing_extra={"client": runs})

    def create(request: dict[str, Any]) -> Any:
        method = client.chat.completions.create if "messages" in request else client.responses.create
        return method(**request)

    @langsmith.traceable(run_type="chain", name="answer", client=runs)
    def in_a_chain(request: dict[str, Any]) -> Any:
        with langfuse.start_as_current_observation(as_type="span", name="answer"):
            return create(request)

    returned: dict[str, Any] = {}
    for number, (stem, call) in enumerate(corpus_calls(corpus).items()):
        response = in_a_chain(call["request"]) if number == 0 else create(call["request"])
        returned[stem] = response.model_dump(mode="json", exclude_unset=True)
    langfuse.flush()
    langfuse.shutdown()
    runs.flush()
    (out / "returned.json").write_text(json.dumps(returned), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
