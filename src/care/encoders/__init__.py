"""Encoders behind one protocol with query / document roles (see :mod:`care.encoders.base`)."""

from care.encoders.base import Encoder, LexicalRetriever

__all__ = ["Encoder", "LexicalRetriever"]
