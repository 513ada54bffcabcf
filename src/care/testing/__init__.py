"""Stand-ins for trying CARE and testing against it without weights or network, importable by users:

- :mod:`care.testing.tiny_model`: a random-init tiny CARE model and a small medical corpus
  (``make_tiny_care_model``, ``write_corpus``, ``SAMPLE_DOCS``, ``SAMPLE_QUERIES``): every path —
  index build, serve, ONNX export — runs as with a trained model, in seconds on a CPU;
- :mod:`care.testing.chat_server`: ``FakeChatServer``, a deterministic OpenAI-compatible chat server
  on 127.0.0.1 that grades the judging prompt and scripts faults (timeouts, 429, malformed replies);
- :mod:`care.testing.emulated_encoder`: ``EmulatedEncoder``, an encoder of known cost (hashed characters
  plus a sleep emulating a throughput), to measure the harness's own time against it.

Nothing else in ``care`` imports this package.
"""
