"""CARE: CMedTEB evaluation harness and the CARE asymmetric retriever.

Paper: "Benchmarking and Enabling Efficient Chinese Medical Retrieval via
Asymmetric Encoders" (ACL 2026).
"""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
