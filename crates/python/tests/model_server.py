"""An OpenAI-compatible Chat Completions server on loopback whose every answer is the
first value the request's JSON Schema allows, after an optional delay: the model of the
Python package's tests and benchmark, where what matters is the binding, not the model.
An `answer` function of the request and its schema may script the answer instead (the
ACP tests' model, whose answers depend on what the prompt holds)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def first_value(schema: dict[str, Any]) -> Any:
    """The first value a JSON Schema allows (for the schemas sap sends)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return first_value(schema[union][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: first_value(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [first_value(schema.get("items", {}))] * max(schema.get("minItems", 1), 1)
    if kind == "string":
        return "x" * max(schema.get("minLength", 0), 3)
    if kind == "integer":
        return max(schema.get("minimum", 1), 1) if "maximum" not in schema else schema["minimum"]
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    return None


class ModelServer:
    """An OpenAI-compatible Chat Completions server answering after `delay` seconds."""

    def __init__(
        self,
        delay: float = 0.0,
        answer: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
        port: int = 0,
    ) -> None:
        self.delay = delay
        self.answer = answer
        self.requests = 0
        self.last: dict[str, Any] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.requests += 1
                server.last = body
                time.sleep(server.delay)
                rf = body.get("response_format") or {}
                schema = (rf.get("json_schema") or {}).get("schema") or rf.get("schema") or {}
                value = server.answer(body, schema) if server.answer else first_value(schema)
                content = json.dumps(value)
                if body.get("stream"):
                    chunk = {"choices": [{"index": 0, "delta": {"content": content}}]}
                    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                    data = "".join(f"data: {json.dumps(c)}\n\n" for c in (chunk, end, usage))
                    data += "data: [DONE]\n\n"
                    kind = "text/event-stream"
                else:
                    data = json.dumps({
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                    })
                    kind = "application/json"
                raw = data.encode()
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def options(self) -> dict[str, Any]:
        return {"provider": "openai", "base_url": self.url, "model": "test"}

    def close(self) -> None:
        self.httpd.shutdown()
