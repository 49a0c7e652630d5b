"""Set Block Decoding (SBD): training objective, exact-KV-cache block decoder and solvers for Hugging Face causal LMs."""

__version__ = "0.1.0"
