"""From model to service: the HTTP search service, its micro-batcher, ONNX query encoding and load tests.

Heavy modules (FastAPI, onnxruntime, torch) are imported by the modules that need them, so that
``care --help`` stays fast.
"""
