"""The body's deadline as an ASGI layer, on its own: a body that does not arrive in time is answered 408 and
the app told the client left; once the body is in, receive() is not bounded any more."""

from __future__ import annotations

import asyncio
import json

from care.serve.body_deadline import BODY_PHASE, BodyDeadline

SCOPE = {"type": "http", "method": "POST", "path": "/search", "client": ("127.0.0.1", 1)}
TIMEOUT_S = 0.2


def _run(app, receive) -> tuple[list[dict], list[str]]:
    sent: list[dict] = []
    phases: list[str] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def main() -> None:
        await BodyDeadline(app, timeout_s=TIMEOUT_S, on_timeout=phases.append)(SCOPE, receive, send)

    asyncio.run(main())
    return sent, phases


def test_a_body_that_never_ends_is_answered_408_and_the_app_sees_a_disconnect():
    seen = []

    async def app(scope, receive, send):
        seen.append(await receive())  # the first chunk
        seen.append(await receive())  # never comes: the deadline turns it into a disconnect
        await send({"type": "http.response.start", "status": 200, "headers": []})  # dropped

    chunks = [{"type": "http.request", "body": b'{"que', "more_body": True}]

    async def receive():
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)

    sent, phases = _run(app, receive)
    assert [m["type"] for m in seen] == ["http.request", "http.disconnect"]
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert "did not arrive within 0.2s" in json.loads(sent[1]["body"])["detail"]
    assert phases == [BODY_PHASE] and len(sent) == 2


def test_once_the_body_is_in_receive_waits_unbounded_and_nothing_is_cut():
    async def app(scope, receive, send):
        await receive()
        message = await receive()  # e.g. a streaming answer listening for the client's disconnect
        assert message["type"] == "http.disconnect"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    messages = [{"type": "http.disconnect"}, {"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive():
        message = messages.pop()
        if message["type"] == "http.disconnect":
            await asyncio.sleep(TIMEOUT_S * 2)  # longer than the deadline, after the body
        return message

    sent, phases = _run(app, receive)
    assert sent[0]["status"] == 200 and phases == []
