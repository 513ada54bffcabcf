"""The million-vector search benchmark (``python -m benchmarks.search_1m``): which FAISS index reaches p50 <= 2 ms at
recall@10 >= 0.95 over a million e5-structured vectors, and at what cost. :mod:`.data` builds the vectors,
:mod:`.indexes` the ground truth, builds and timings, :mod:`.report` the record."""
