"""Encoders behind one protocol with query / document roles (see :mod:`care.encoders.base`).

``load_model(spec)`` names any of them with one string (grammar in :mod:`care.encoders.registry`
and ``docs/encoders.md``); importing this package stays light (torch loads on first use).
"""

from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.registry import load_model

__all__ = ["Encoder", "LexicalRetriever", "load_model"]
