"""Every Responses item type: a converter for each SDK type, and how each renders (fixtures/items.jsonl)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses import Response, ResponseInputItem, ResponseOutputItem
from pydantic import TypeAdapter

from tests.support.paths import ROOT
from tlmscore import MemoryPages, Settings, prepare, read_transcripts
from tlmscore.convert import REGISTRY, convert_items, convert_transcript, split_answer
from tlmscore.convert._tools import DECLARATIONS, declare_tools
from tlmscore.model import Message, ToolCall, ToolResult
from tlmscore.rendering import render_prompt, render_response

ITEMS = ROOT / "fixtures" / "items.jsonl"
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
ANSWER_TYPES = {"message", "function_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call",
                "custom_tool_call", "mcp_approval_request", "tool_search_call", "program"}


def union_types(union: Any) -> set[str]:
    """The `type` literals of the members of an SDK item union (an Annotated Union of models)."""
    members = typing.get_args(typing.get_args(union)[0])
    found: set[str] = set()
    for model in members:
        annotation = model.model_fields["type"].annotation
        literals = [a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal] or [annotation]
        found.update(str(v) for lit in literals for v in typing.get_args(lit))
    return found


def records() -> dict[str, Any]:
    return {t.id: t for t in read_transcripts(ITEMS)}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = Settings(offline=True, cache_dir=tmp_path_factory.mktemp("cache"))
    return prepare(ITEMS, settings, pages=MemoryPages()).set_index("id")


def test_every_output_item_type_of_the_sdk_has_a_converter() -> None:
    types = union_types(ResponseOutputItem)
    assert len(types) >= 28, types
    missing = sorted(types - set(REGISTRY))
    assert not missing, f"no converter for {missing}: add one to a family module's CONVERTERS"


def test_every_input_item_type_of_the_sdk_has_a_converter() -> None:
    missing = sorted(union_types(ResponseInputItem) - set(REGISTRY))
    assert not missing, f"no converter for {missing}"


def test_item_kinds_decide_the_answer() -> None:
    assert {t for t, spec in REGISTRY.items() if spec.kind == "answer"} == ANSWER_TYPES
    assert {t for t, spec in REGISTRY.items() if spec.kind == "transparent"} >= {"reasoning", "compaction"}


def test_fixture_responses_and_inputs_follow_the_sdk_types() -> None:
    inputs = TypeAdapter(ResponseInputItem)
    for t in records().values():
        if t.fmt == "responses" and not t.id.startswith("xai-"):
            Response.model_validate(t.response)
        for item in t.request.get("input") if isinstance(t.request.get("input"), list) else []:
            inputs.validate_python(item)


def test_fixtures_cover_every_sdk_output_type() -> None:
    seen = {item["type"] for t in records().values() for item in t.response.get("output") or []}
    seen |= {i.get("type", "message") for t in records().values()
             for i in (t.request.get("input") if isinstance(t.request.get("input"), list) else [])}
    demo = {i["type"] for t in read_transcripts(ITEMS.parent / "demo.jsonl") for i in t.response.get("output") or []}
    assert union_types(ResponseOutputItem) <= seen | demo


def test_items_fixture_prepares_cleanly_without_base64(prepared: Any) -> None:
    assert prepared.error.isna().all(), prepared.error.dropna().tolist()
    assert not [w for ws in prepared.warnings for w in ws if "unhandled item type" in w]
    for text in [*prepared.prompt, *prepared.response]:
        assert PNG_B64[:24] not in text and "base64," not in text


def test_mcp_tools_are_declared_by_server_and_calls_use_those_names(prepared: Any) -> None:
    prompt = prepared.loc["mcp-call", "prompt"]
    assert '"name":"deepwiki.read_wiki_structure"' in prompt and '"name":"deepwiki.ask_question"' in prompt
    assert '"name": "deepwiki.ask_question"' in prompt
    assert "Streamable HTTP transports." in prompt
    error = prepared.loc["mcp-call-error", "prompt"]
    assert '"type": "mcp_protocol_error"' in error and "Repository not found" in error


def test_mcp_approval_request_is_the_answer_and_a_denial_is_its_response(prepared: Any) -> None:
    assert prepared.loc["mcp-approval-request", "response"].startswith('<tool_call>\n{\n  "name": '
                                                                        '"shortener.create_short_url"')
    denied = prepared.loc["mcp-approval-denied", "prompt"]
    assert '"approved": false' in denied and "the tool did not run" in denied
    assert "Not allowed to create public links." in denied
    assert prepared.loc["mcp-approval-denied", "history_complete"]


def test_code_interpreter_logs_images_and_missing_outputs(prepared: Any) -> None:
    prompt = prepared.loc["code-interpreter-logs-image", "prompt"]
    assert '"logs": "growth 58.3%\\n"' in prompt
    assert '"image": "[image: image/png, 70 bytes, sha256:' in prompt
    assert '"name":"code_interpreter"' in prompt
    assert any("code_interpreter_call has no outputs" in w for w in prepared.loc["code-interpreter-no-outputs",
                                                                                 "warnings"])


def test_computer_use_actions_and_screenshots(prepared: Any) -> None:
    prompt, response = prepared.loc["computer-use", ["prompt", "response"]]
    assert '"screenshot": "[image: image/png, 70 bytes, sha256:' in prompt
    assert "The display is 1280x800 pixels (browser)." in prompt
    assert '"x": 640' in response and '"code": "malicious_instructions"' in response


def test_image_generation_result_and_blocked_request(prepared: Any) -> None:
    prompt = prepared.loc["image-generation", "prompt"]
    assert '"prompt": "A minimal flat teal square icon on a white background."' in prompt
    assert '"image": "[image: image/png, 70 bytes, sha256:' in prompt
    blocked = prepared.loc["image-generation-blocked", "prompt"]
    assert '"code": "moderation_blocked"' in blocked


def test_shells_and_patches(prepared: Any) -> None:
    local = prepared.loc["local-shell", "prompt"]
    assert '"output": "412M\\t.\\n"' in local and '"exit_code": 0' in local
    assert '"command": [\n      "du",\n      "-sh",\n      ".git"' in prepared.loc["local-shell", "response"]
    hosted = prepared.loc["shell-hosted", "prompt"]
    assert '"stdout": "Python 3.12.7\\n"' in hosted and '"timed_out": true' in hosted
    patch = prepared.loc["apply-patch", "prompt"]
    assert '"status": "failed"' in patch and "Hunk 1 failed" in patch
    assert '"diff": "@@\\n-def greet(name):\\n+def say_hello(name):\\n"' in prepared.loc["apply-patch", "response"]


def test_custom_tools_declare_their_grammar_and_outputs_become_text(prepared: Any) -> None:
    prompt = prepared.loc["custom-tool-grammar", "prompt"]
    assert '"name":"sql_query"' in prompt and "Input that matches this lark grammar:" in prompt
    assert '"input": "SELECT count FROM orders WHERE status = \'late\'"' in prompt
    assert '"output": "count\\n17\\n[image: image/png, 70 bytes, sha256:' in prompt
    parts = prepared.loc["function-output-parts", "prompt"]
    assert '"output": "Invoice INV-2291 attached.\\n[file: INV-2291.pdf, application/pdf, ' in parts


def test_tool_search_additional_tools_and_programs(prepared: Any) -> None:
    hosted = prepared.loc["tool-search-hosted", "prompt"]
    assert '"name": "tool_search"' in hosted and '"loaded": [\n      "get_weather"\n    ]' in hosted
    assert prepared.loc["tool-search-client", "response"].startswith('<tool_call>\n{\n  "name": "tool_search"')
    added = prepared.loc["additional-tools", "prompt"]
    assert "System: Tools added: get_weather" in added and '"name":"get_weather"' in added
    program = prepared.loc["program-output", "prompt"]
    assert '"name": "program"' in program and '"output": "{\\"rome\\":24,\\"oslo\\":9}"' in program


def test_compaction_and_item_references(prepared: Any) -> None:
    compacted = prepared.loc["compaction-replay", "prompt"]
    assert compacted.startswith("System: [Earlier turns of this conversation were compacted")
    assert "gAAAA" not in compacted
    reference = prepared.loc["item-reference", "prompt"]
    assert "Assistant: Signups grew 58.3% from the first month" in reference
    assert prepared.loc["item-reference", "warnings"] == []


def test_compaction_at_the_end_of_the_output_is_not_part_of_the_answer() -> None:
    output = [{"type": "message", "role": "assistant", "content": "Here is the summary."},
              {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA"}]
    conv = convert_items([{"role": "user", "content": "Summarize."}, *output], answer_start=1 + split_answer(output))
    assert render_response(conv) == "Here is the summary."


def test_structured_outputs_are_calls_to_the_schema(prepared: Any) -> None:
    prompt, response = prepared.loc["structured-output", ["prompt", "response"]]
    assert '"name":"structured_output","description":"Give the final answer as JSON that follows the schema ' \
           "'order_issue'.\"" in prompt
    assert '"issue":{"type":"string","enum":["late","damaged","missing"]}' in prompt
    assert json.loads(response.split("<tool_call>\n")[1].split("\n</tool_call>")[0])["arguments"] == {
        "order_id": "8812", "issue": "damaged", "refund_eligible": True}
    malformed = prepared.loc["structured-output-malformed"]
    assert '"arguments": "{\\"order_id\\":\\"77\\",\\"issue\\":\\"missing\\",\\"refund_"' in malformed.response
    assert "the answer is not valid JSON for its json_schema text format; shown verbatim" in malformed.warnings
    assert '"name": "structured_output"' in prepared.loc["configuration-update", "response"]


def test_a_refusal_under_a_schema_stays_a_refusal(demo_path: Path) -> None:
    (t,) = [t for t in read_transcripts(demo_path) if t.id == "triage-refusal"]
    conv = convert_transcript(t)
    assert [d["name"] for d in conv.tools] == ["structured_output"]
    assert isinstance(conv.answer[-1], Message)


def test_replayed_items_render_like_output_items() -> None:
    call = {"type": "shell_call", "id": "sh_1", "call_id": "call_1", "status": "completed",
            "action": {"commands": ["ls"]}}
    result = {"type": "shell_call_output", "id": "sho_1", "call_id": "call_1", "status": "completed",
              "output": [{"outcome": {"type": "exit", "exit_code": 0}, "stdout": "a\n", "stderr": ""}]}
    user = {"role": "user", "content": "list files"}
    answer = {"type": "message", "role": "assistant", "content": "There is one file, a."}
    replayed = convert_items([user, call, result, answer], answer_start=3)
    produced = convert_items([user, call, result, answer], answer_start=1 + split_answer([call, result, answer]))
    assert render_prompt(replayed) == render_prompt(produced)
    assert [type(t) for t in replayed.turns] == [Message, ToolCall, ToolResult]


def test_unknown_types_still_render_generically() -> None:
    conv = convert_items([{"role": "user", "content": "q"}, {"type": "teleport_call", "id": "t1", "to": "Mars"}],
                         answer_start=2)
    assert conv.warnings == ("unhandled item type 'teleport_call': rendered as a generic tool call",)


def test_existing_declarations_are_unchanged_and_built_ins_are_declared_when_used() -> None:
    assert declare_tools([{"type": "file_search"}, {"type": "web_search_preview"}], {}) == [
        DECLARATIONS["file_search"]({})[0], DECLARATIONS["web_search"]({})[0]]
    assert declare_tools([], {"file_search": {"type": "file_search"}}) == []
    used = {"code_interpreter": {"type": "code_interpreter"}, "custom:f": {"type": "custom", "name": "f"}}
    assert [d["name"] for d in declare_tools([{"type": "custom", "name": "f"}], used)] == ["f", "code_interpreter"]


def test_a_logged_sdk_text_format_schema_is_the_structured_output() -> None:
    schema = {"title": "City", "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    (t,) = read_transcripts({"request": {"input": "Capital of France?", "text_format": schema},
                             "response": {"id": "resp_1", "output": [{"type": "message", "role": "assistant",
                                          "content": [{"type": "output_text", "text": '{"name": "Paris"}'}]}]}})
    conv = convert_transcript(t)
    assert conv.tools[-1]["parameters"] == schema and "'City'" in conv.tools[-1]["description"]
    assert conv.answer == (ToolCall(name="structured_output", arguments={"name": "Paris"},
                                    call_id="structured_output"),)
