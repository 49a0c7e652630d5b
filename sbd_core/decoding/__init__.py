"""Decoding: the reference block decoder, the fast engine, the training-free peers and the verify loop, behind one
factory (:mod:`.factory`). Nothing is imported here, so ``sbd_core.decoding.<module>`` loads only what it needs."""
