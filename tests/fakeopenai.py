"""A stand-in for the OpenAI Responses endpoint on loopback, for code that runs the
Agents SDK's ``Runner`` as written (README blocks): point ``OPENAI_BASE_URL`` at it.

``POST /v1/responses`` answers one assistant message, ``"<n> input items; last: <text>"``,
so a caller can see what history the model was given. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _last_text(items: list[Any]) -> str:
    for item in reversed(items):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    return str(part["text"])
    return ""


def response_body(request: dict[str, Any]) -> dict[str, Any]:
    items = request.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
    text = f"{len(items)} input items; last: {_last_text(items)}"
    return {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": 0, "model": request.get("model", "fake"),
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.path.rstrip("/").endswith("/responses"):
            self.send_error(404)
            return
        payload = json.dumps(response_body(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


class FakeOpenAI:
    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def env(self) -> dict[str, str]:
        """What a process needs to talk to this instead of OpenAI (no tracing upload)."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "sk-test-not-a-key",
                "OPENAI_AGENTS_DISABLE_TRACING": "1"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
