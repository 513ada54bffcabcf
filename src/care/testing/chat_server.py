"""A deterministic OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

It understands the judging prompt (:mod:`care.curate.judges.prompt`): it reads the query and the
numbered passages back out of the user message and answers with a grade per passage from
``grade_fn(model, query, passage)``. Faults are scripted per request (consumed in order):

- ``"malformed"``: a reply that is not JSON;
- ``"missing"``: a fenced JSON array that leaves out the last passage, followed by prose;
- ``"timeout"``: sleeps ``timeout_sleep_s`` and then drops the connection;
- ``"429"``: HTTP 429 with ``Retry-After: <retry_after_s>``;
- ``"500"`` / ``"503"``: a server error.

``answered`` logs every (model, query, passage) the server graded in a successful reply — what a
paid API would have charged for. ``stall_after(n)`` makes requests after the n-th answered one
block until :meth:`FakeChatServer.release` (used to kill a client mid-run deterministically).
Also serves a generic chat answer via ``reply_fn`` for prompts it does not recognise (STS
generation tests).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from care.curate.judges.base import GRADES
from care.hashes import hex_digest

_QUERY = re.compile(r"查询：(.*?)\n\n候选段落：\n", re.DOTALL)
_PASSAGE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
CHARS_PER_TOKEN = 2
POLL_INTERVAL_S = 0.05


def hash_grade(model: str, query: str, passage: str) -> str:
    """A deterministic pseudo-random grade (same for every model)."""
    first_byte = int(hex_digest(f"{query}\x00{passage}", length=2), 16)
    return GRADES[first_byte % len(GRADES)]


class FakeChatServer:
    """Start with ``with FakeChatServer() as server: ... server.base_url``."""

    def __init__(
        self,
        grade_fn: Callable[[str, str, str], str] = hash_grade,
        *,
        delay_s: float = 0.0,
        timeout_sleep_s: float = 2.0,
        retry_after_s: float = 0.05,
        reply_fn: Callable[[str, list[dict[str, str]]], str] | None = None,
    ) -> None:
        self.grade_fn = grade_fn
        self.delay_s = delay_s
        self.timeout_sleep_s = timeout_sleep_s
        self.retry_after_s = retry_after_s
        self.reply_fn = reply_fn
        self.faults: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.answered: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._stall_after: int | None = None
        self._answered_calls = 0
        self._released = threading.Event()
        self._released.set()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()

    def add_faults(self, *faults: str) -> None:
        with self._lock:
            self.faults.extend(faults)

    def stall_after(self, n_calls: int) -> None:
        """Block every request after the ``n_calls``-th answered one until :meth:`release`."""
        self._stall_after = n_calls
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    @property
    def stalled(self) -> int:
        """Requests currently blocked by :meth:`stall_after`."""
        with self._lock:
            return sum(1 for r in self.requests if r.get("stalled") and not r.get("done"))

    # --- request handling ---------------------------------------------------------------------

    def _respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes, list[tuple[str, str, str]]]:
        model = body.get("model", "")
        messages = body.get("messages", [])
        user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        with self._lock:
            fault = self.faults.popleft() if self.faults else "ok"
        record = {"model": model, "fault": fault}
        with self._lock:
            self.requests.append(record)
        if fault == "timeout":
            time.sleep(self.timeout_sleep_s)
            return -1, {}, b"", []
        if fault in ("429", "500", "503"):
            headers = {"Retry-After": f"{self.retry_after_s}"} if fault == "429" else {}
            err = {"error": {"message": f"scripted {fault}", "type": "server_error", "code": fault}}
            return int(fault), headers, json.dumps(err).encode(), []
        qm = _QUERY.search(user)
        graded: list[tuple[str, str, str]] = []
        if qm:
            query = qm.group(1).strip()
            passages = [(int(i), text) for i, text in _PASSAGE.findall(user[qm.end():])]
            record["query"], record["passages"] = query, [t for _, t in passages]
            items = [{"id": i, "grade": self.grade_fn(model, query, t)} for i, t in passages]
            graded = [(model, query, t) for _, t in passages]
            if fault == "malformed":
                content = "Sorry, here are the grades: id 1 -> S, id 2 ->"
                graded = []
            elif fault == "missing":
                items, graded = items[:-1], graded[:-1]
                content = "```json\n" + json.dumps(items, ensure_ascii=False) + "\n```\nI could not judge the last one."
            else:
                content = json.dumps(items, ensure_ascii=False)
        else:
            content = self.reply_fn(model, messages) if self.reply_fn else "OK"
        answer = {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user) // CHARS_PER_TOKEN, "completion_tokens": len(content) // CHARS_PER_TOKEN,
                      "total_tokens": (len(user) + len(content)) // CHARS_PER_TOKEN},
        }
        return 200, {}, json.dumps(answer, ensure_ascii=False).encode(), graded

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if server._stall_after is not None and server._answered_calls >= server._stall_after:
                    with server._lock:
                        server.requests.append({"stalled": True})
                        rec = server.requests[-1]
                    server._released.wait()
                    rec["done"] = True
                    self.close_connection = True
                    return
                if server.delay_s:
                    time.sleep(server.delay_s)
                status, headers, payload, graded = server._respond(body)
                if status < 0:
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                if graded:
                    with server._lock:
                        server.answered.extend(graded)
                        server._answered_calls += 1

        return Handler
