"""Writes the Responses API recordings in ``recorded-responses/`` (run once; the files are committed).

The event shapes follow https://platform.openai.com/docs/api-reference/responses-streaming as
OpenAI sends them (``event:`` line, ``data:`` with the same ``type`` and a ``sequence_number``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "recorded-responses"
MODEL = "o4-mini-2025-04-16"
USAGE = {
    "input_tokens": 1200,
    "input_tokens_details": {"cached_tokens": 1024},
    "output_tokens": 230,
    "output_tokens_details": {"reasoning_tokens": 192},
    "total_tokens": 1430,
}
ENCRYPTED = "gAAAAABo" + "Zk9yZW5jcnlwdGVkLXJlYXNvbmluZy1ibG9i" * 3 + "=="


def response(status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_68af1c2e9d6c8190a1b2c3d4e5f60718",
        "object": "response",
        "created_at": 1756306478,
        "status": status,
        "model": MODEL,
        "output": output,
        "usage": None,
        "error": None,
        "incomplete_details": None,
        "store": False,
        **extra,
    }


class Stream:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})

    def start(self) -> None:
        self.add("response.created", response=response("in_progress", []))
        self.add("response.in_progress", response=response("in_progress", []))

    def message(self, index: int, item_id: str, pieces: list[str]) -> dict[str, Any]:
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        self.add("response.output_item.added", output_index=index, item=item)
        part = {"type": "output_text", "annotations": [], "text": ""}
        self.add("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part)
        for piece in pieces:
            self.add(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        text = "".join(pieces)
        self.add("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text)
        done_part = {**part, "text": text}
        self.add("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=done_part)
        done = {**item, "status": "completed", "content": [done_part]}
        self.add("response.output_item.done", output_index=index, item=done)
        return done

    def reasoning(self, index: int, item_id: str, parts: list[list[str]]) -> dict[str, Any]:
        item = {"id": item_id, "type": "reasoning", "summary": []}
        self.add("response.output_item.added", output_index=index, item=item)
        summary = []
        for number, pieces in enumerate(parts):
            empty = {"type": "summary_text", "text": ""}
            self.add(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=index,
                summary_index=number,
                part=empty,
            )
            for piece in pieces:
                self.add(
                    "response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=index,
                    summary_index=number,
                    delta=piece,
                )
            text = "".join(pieces)
            self.add(
                "response.reasoning_summary_text.done",
                item_id=item_id,
                output_index=index,
                summary_index=number,
                text=text,
            )
            full = {"type": "summary_text", "text": text}
            self.add(
                "response.reasoning_summary_part.done",
                item_id=item_id,
                output_index=index,
                summary_index=number,
                part=full,
            )
            summary.append(full)
        done = {"id": item_id, "type": "reasoning", "summary": summary, "encrypted_content": ENCRYPTED}
        self.add("response.output_item.done", output_index=index, item=done)
        return done

    def silent_reasoning(self, index: int, item_id: str) -> dict[str, Any]:
        """A reasoning item that streams no summary (none was asked for), only its encrypted content."""
        self.add(
            "response.output_item.added", output_index=index, item={"id": item_id, "type": "reasoning", "summary": []}
        )
        done = {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": ENCRYPTED[::-1]}
        self.add("response.output_item.done", output_index=index, item=done)
        return done

    def call(self, index: int, item_id: str, call_id: str, name: str, pieces: list[str]) -> dict[str, Any]:
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        self.add("response.output_item.added", output_index=index, item=item)
        for piece in pieces:
            self.add("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
        arguments = "".join(pieces)
        self.add("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        done = {**item, "status": "completed", "arguments": arguments}
        self.add("response.output_item.done", output_index=index, item=done)
        return done

    def web_search(self, index: int) -> dict[str, Any]:
        item = {"id": "ws_68af1c30a1b2", "type": "web_search_call", "status": "in_progress"}
        self.add("response.output_item.added", output_index=index, item=item)
        self.add("response.web_search_call.in_progress", output_index=index, item_id=item["id"])
        self.add("response.web_search_call.searching", output_index=index, item_id=item["id"])
        self.add("response.web_search_call.completed", output_index=index, item_id=item["id"])
        done = {**item, "status": "completed", "action": {"type": "search", "query": "weather Zürich"}}
        self.add("response.output_item.done", output_index=index, item=done)
        return done

    def body(self) -> bytes:
        return "".join(
            f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}\n\n"
            for e in self.events
        ).encode()


def write(name: str, stream: Stream, cut: int | None = None) -> None:
    body = stream.body()
    if cut is not None:
        events = body.split(b"\n\n")
        body = b"\n\n".join(events[:cut]) + b"\n\n"
    (HERE / f"{name}.sse").write_bytes(body)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    pieces = ["Café coûte 5 € ", "😀 ", "你好世界"]

    text = Stream()
    text.start()
    out = [text.message(0, "msg_68af1c2f01", pieces)]
    text.add("response.completed", response=response("completed", out, usage=USAGE))
    write("text", text)
    write("truncated", text, cut=7)

    reasoning = Stream()
    reasoning.start()
    out = [
        reasoning.reasoning(0, "rs_68af1c2f00", [["**Greeting**\n\nThe user ", "greets; "], ["answer **briefly**."]]),
        reasoning.message(1, "msg_68af1c2f01", ["Hi — ", "how can I help?"]),
    ]
    reasoning.add("response.completed", response=response("completed", out, usage=USAGE))
    write("reasoning", reasoning)

    tool = Stream()
    tool.start()
    out = [
        tool.reasoning(0, "rs_68af1c2f00", [["Need the weather."]]),
        tool.call(1, "fc_68af1c2f02", "call_Qx7fJ2", "get_weather", ['{"city"', ':"Zürich"}']),
    ]
    tool.add("response.completed", response=response("completed", out, usage=USAGE))
    write("tool-call", tool)

    replay = Stream()
    replay.start()
    out = [
        replay.silent_reasoning(0, "rs_68af1c2f10"),
        replay.call(1, "fc_68af1c2f11", "call_R3", "get_weather", ['{"city":"Genève"}']),
    ]
    replay.add("response.completed", response=response("completed", out, usage=USAGE))
    write("replay", replay)

    parallel = Stream()
    parallel.start()
    out = [
        parallel.call(0, "fc_68af1c2f02", "call_A1", "get_weather", ['{"city":', '"Paris"}']),
        parallel.call(1, "fc_68af1c2f03", "call_B2", "get_time", ['{"tz":"Europe/Paris"}']),
    ]
    parallel.add("response.completed", response=response("completed", out, usage=USAGE))
    write("parallel-tool-calls", parallel)

    usage = Stream()
    usage.start()
    out = [usage.web_search(0), usage.message(1, "msg_68af1c2f01", ["Sunny, 21 °C."])]
    usage.add("response.completed", response=response("completed", out, usage=USAGE))
    write("usage", usage)

    failed = Stream()
    failed.start()
    item = {"id": "msg_68af1c2f01", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    failed.add("response.output_item.added", output_index=0, item=item)
    failed.add(
        "response.output_text.delta",
        item_id="msg_68af1c2f01",
        output_index=0,
        content_index=0,
        delta="Partial",
        logprobs=[],
    )
    error = {"code": "server_error", "message": "The model produced invalid content. Please retry."}
    failed.add("response.failed", response=response("failed", [], error=error))
    write("in-band-error", failed)


if __name__ == "__main__":
    main()
