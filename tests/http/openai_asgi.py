"""An OpenAI-compatible server on uvicorn (h11): answers every chat completion with
the verdict `Match`, streamed (server-sent events, chunked) when asked. `/stats`
reports the requests served and the connections opened (its own included).

    python openai_asgi.py PORT        (prints "ready" when listening)
"""

import asyncio
import json
import sys

import uvicorn

ANSWER = '{"value":"Match"}'
served = 0
connections = set()


async def respond(send, status, headers, body, more=False):
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": more})


def event(payload):
    return f"data: {json.dumps(payload)}\n\n".encode()


async def app(scope, receive, send):
    global served
    if scope["type"] != "http":
        return
    connections.add(tuple(scope["client"]))
    if scope["path"] == "/stats":
        body = json.dumps({"served": served, "connections": len(connections)}).encode()
        await respond(send, 200, [(b"content-type", b"application/json")], body)
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    request = json.loads(b"".join(chunks))
    served += 1
    usage = {"prompt_tokens": 40, "completion_tokens": 5}
    if not request.get("stream"):
        body = json.dumps({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                         "finish_reason": "stop"}],
            "usage": usage,
        }).encode()
        await respond(send, 200, [(b"content-type", b"application/json")], body)
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    pieces = [ANSWER[:6], ANSWER[6:]]
    for piece in pieces:
        delta = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        await send({"type": "http.response.body", "body": event(delta), "more_body": True})
        await asyncio.sleep(0.001)
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
    await send({"type": "http.response.body", "body": event(end), "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b""})


class Ready(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets)
        print("ready", flush=True)


config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), http="h11",
                        lifespan="off", log_level="warning")
asyncio.run(Ready(config).serve())
