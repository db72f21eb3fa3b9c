"""`image_generation_call`: the prompt the image model got, and the image (a placeholder) or error."""

from __future__ import annotations

from typing import Any

from tlmscore.convert._outputs import api_object, image_placeholder
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn

IMAGE_GENERATION = "image_generation"
_SETTINGS = ("action", "size", "quality", "background", "output_format")


def _arguments(item: dict[str, Any]) -> dict[str, Any]:
    prompt = item.get("revised_prompt") or item.get("prompt")
    arguments: dict[str, Any] = {"prompt": prompt} if prompt else {}
    arguments |= {k: item[k] for k in _SETTINGS if item.get(k) is not None}
    return arguments


def convert_image_generation(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The generation as a call; the image as a placeholder with kind, size and hash, never base64."""
    call_id = str(item.get("id") or "")
    ctx.use_tool(IMAGE_GENERATION)
    call = ToolCall(name=IMAGE_GENERATION, arguments=_arguments(item), call_id=call_id, server=True)
    output: Any
    if item.get("error"):
        output = {"error": api_object(item["error"])}
    elif isinstance(item.get("result"), str) and item["result"]:
        media = f"image/{item.get('output_format') or 'png'}".replace("svg", "svg+xml")
        output = {"image": image_placeholder(item["result"], media)}
    elif item.get("status") == "failed":
        output = {"error": "the image could not be generated", "status": "failed"}
    else:
        ctx.warn("image_generation_call has no result: the generated image was not logged")
        output = {"image": image_placeholder(None)}
    return [call, ToolResult(name=IMAGE_GENERATION, call_id=call_id, output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "image_generation_call": ItemConverter(convert_image_generation),
}
