"""A stand-in for OpenAI's streaming Responses endpoint that sends its text deltas at a
fixed pace, for the streaming tests and ``benchmarks/bench_streaming.py``.

``POST /v1/responses`` with ``stream: true`` answers as OpenAI does (the events, their
shapes and ``sequence_number``\\ s, ``store: false`` echoed back), so the official
``openai`` client parses it: ``response.created``, ``response.in_progress``, one
message's ``output_item.added`` and ``content_part.added``, one
``response.output_text.delta`` per word every ``pace`` seconds, the ``done`` events,
then ``response.completed`` (``response.incomplete`` with reason
``max_output_tokens`` when the request's ``max_output_tokens`` is below the number of
words). The text is ``"<n> input items; last: <text>"``, padded with filler words up to
``words``, so a caller can see what history it was given.

A test steers one instance: ``hold`` (the rest waits for it after the first delta),
``fail_after`` and ``failure`` (after that many deltas: ``response.failed``, an
``error`` event, or ``drop``: the connection cut mid-body), and reads ``requests``,
``sent_last`` and ``abandoned`` (set when the client of a stream went away before its
end). Run alone it serves on a port: ``python tests/paced_upstream.py --port 8900``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import uuid
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def _last_text(items: list[Any]) -> str:
    for item in reversed(items):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            return content
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                return str(part["text"])
    return ""


def sse(kind: str, number: int, fields: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': number, **fields})}\n\n".encode()


class PacedUpstream:
    """The stand-in; :attr:`app` is its ASGI app."""

    def __init__(self, pace: float = 0.0, words: int = 0) -> None:
        self.pace = pace
        self.words = words
        self.hold: asyncio.Event | None = None
        self.fail_after: int | None = None
        self.failure = "response.failed"
        self.requests: list[dict[str, Any]] = []
        self.sent_last = False
        self.abandoned = asyncio.Event()
        self.app = Starlette(routes=[Route("/v1/responses", self.create, methods=["POST"])])

    def deltas(self, body: dict[str, Any]) -> list[str]:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        pieces = f"{len(items)} input items; last: {_last_text(items)}".split(" ")
        pieces += ["filler"] * (self.words - len(pieces))
        return [piece if n == 0 else " " + piece for n, piece in enumerate(pieces)]

    async def create(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        if body.get("stream") is not True:
            return JSONResponse({"error": {"message": "this stand-in only streams", "type": "invalid_request_error",
                                           "param": "stream", "code": None}}, status_code=400)
        return StreamingResponse(self.events(body), media_type="text/event-stream")

    async def events(self, body: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._events(body):
                yield chunk
        except BaseException:  # cancelled (uvicorn saw the client go) or closed
            self.abandoned.set()
            raise

    async def _events(self, body: dict[str, Any]) -> AsyncIterator[bytes]:
        numbers, deltas = itertools.count(), self.deltas(body)
        limit = body.get("max_output_tokens")
        cut = isinstance(limit, int) and limit < len(deltas)
        if cut:
            deltas = deltas[:limit]
        rid = f"resp_{uuid.uuid4().hex}"  # upstream's own: the gateway must not send it on
        response = self.response(body, rid, "in_progress", [])
        yield sse("response.created", next(numbers), {"response": response})
        yield sse("response.in_progress", next(numbers), {"response": response})
        item = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "in_progress", "content": [],
                "role": "assistant"}
        at = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        yield sse("response.output_item.added", next(numbers), {"output_index": 0, "item": item})
        yield sse("response.content_part.added", next(numbers), {**at, "part": part})
        for n, delta in enumerate(deltas):
            if n == self.fail_after:
                async for chunk in self.fail(body, rid, numbers):
                    yield chunk
                return
            await asyncio.sleep(self.pace)
            yield sse("response.output_text.delta", next(numbers), {**at, "delta": delta, "logprobs": []})
            if n == 0 and self.hold is not None:
                await self.hold.wait()
        self.sent_last = True
        text = "".join(deltas)
        part = {**part, "text": text}
        status = "incomplete" if cut else "completed"
        item = {**item, "status": status, "content": [part]}
        yield sse("response.output_text.done", next(numbers), {**at, "text": text, "logprobs": []})
        yield sse("response.content_part.done", next(numbers), {**at, "part": part})
        yield sse("response.output_item.done", next(numbers), {"output_index": 0, "item": item})
        done = self.response(body, rid, status, [item], usage=len(deltas))
        if cut:
            done["incomplete_details"] = {"reason": "max_output_tokens"}
        yield sse(f"response.{status}", next(numbers), {"response": done})

    async def fail(self, body: dict[str, Any], rid: str, numbers: Any) -> AsyncIterator[bytes]:
        error = {"code": "server_error", "message": "The stand-in failed on purpose."}
        if self.failure == "drop":
            raise ConnectionResetError("the stand-in cuts the stream")  # uvicorn drops the connection
        if self.failure == "error":
            yield sse("error", next(numbers), {**error, "param": None})
        else:
            yield sse("response.failed", next(numbers), {"response": {**self.response(body, rid, "failed", []),
                                                                       "error": error}})

    def response(self, body: dict[str, Any], rid: str, status: str, output: list[Any],
                 usage: int = 0) -> dict[str, Any]:
        return {
            "id": rid, "object": "response", "created_at": 0, "status": status,
            "model": body.get("model", "paced"), "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "store": body.get("store", True), "error": None, "incomplete_details": None,
            "usage": {"input_tokens": 1, "output_tokens": usage, "total_tokens": 1 + usage,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
            if status != "in_progress" else None,
        }


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser(description="serve the paced stand-in upstream on loopback")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pace-ms", type=float, default=20.0, help="between two deltas")
    p.add_argument("--words", type=int, default=0, help="deltas per answer, at least")
    args = p.parse_args()
    upstream = PacedUpstream(args.pace_ms / 1000, args.words)
    uvicorn.run(upstream.app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
