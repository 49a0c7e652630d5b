"""The fast decoding engine (``DecodeConfig(engine="fast")``, chosen by :mod:`sbd_core.decoding.factory`): rows that
advance on their own in a preallocated cache. See docs/engine.md."""

from .decoder import FastDecoder

__all__ = ["FastDecoder"]
