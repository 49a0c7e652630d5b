"""The fast decoding engine (``DecodeConfig(engine="fast")``): same API and results as the reference decoder
:mod:`sbd_core.decode`, with rows that advance on their own in a preallocated cache. See :mod:`.decoder`."""

from .decoder import FastDecoder

__all__ = ["FastDecoder"]
