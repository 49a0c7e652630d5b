"""The one place a sampler or a solver picks its decoder: :func:`make_solver` builds a sampler's solver,
:func:`make_decoder` its decoder (a peer: :class:`.peers.PeerDecoder`; NTP and the block solvers:
:func:`make_block_decoder`, which picks the engine from ``DecodeConfig.engine``)."""

from __future__ import annotations

import logging
from dataclasses import replace

from ..decode_config import DecodeConfig
from ..samplers import Sampler, as_sampler
from .engine import FastDecoder
from .peers import PeerDecoder
from .reference import BlockDecoder
from .solvers import Solver, get_solver

log = logging.getLogger("sbd_core")


def make_solver(sampler: Sampler | dict) -> Solver:
    """The solver of a sampler (NTP decoding: the next token, greedy or sampled); the peers have none."""
    sampler = as_sampler(sampler)
    if sampler.is_peer:
        raise ValueError(f"sampler {sampler.tag!r} is a training-free peer (Hugging Face generate): it has no block "
                         "solver; make_decoder gives its decoder")
    return get_solver(sampler.rule_name, **sampler.params)


def make_decoder(model, tokenizer, config: DecodeConfig, sampler: Sampler | dict):
    """The decoder of a sampler; ``config`` is a DecodeConfig in the sampler's ``decode_mode``."""
    sampler = as_sampler(sampler)
    if sampler.is_peer:
        return PeerDecoder(model, tokenizer, config, sampler)
    return make_block_decoder(model, tokenizer, config, make_solver(sampler))


def make_block_decoder(model, tokenizer, config: DecodeConfig | None = None, solver=None):
    """The decoder ``config.engine`` names for ``solver``: the fast engine (:class:`.engine.FastDecoder`) or the
    reference (:class:`.reference.BlockDecoder`). ``verify: sample`` always decodes on the reference: the engine
    verifies greedy drafts only (its speculative-sampling rule is tested on the reference)."""
    config = config or DecodeConfig()
    if config.engine == "fast" and verify_mode(config, solver) == "sample":
        log.info("verify: sample: decoding with the reference decoder (the engine verifies greedy drafts only)")
        config = replace(config, engine="reference")
    decoder = FastDecoder if config.engine == "fast" else BlockDecoder
    return decoder(model, tokenizer, config, solver)


def verify_mode(config: DecodeConfig, solver) -> str:
    """The verify mode a solver decodes with in ``config``'s mode: ``none`` in NTP mode or without a solver."""
    return getattr(solver, "verify", "none") if config.mode == "sbd" else "none"


def generate(model, tokenizer, prompts, config: DecodeConfig | None = None, solver=None, progress=False):
    """Convenience wrapper: ``make_block_decoder(model, tokenizer, config, solver).generate(prompts)``."""
    return make_block_decoder(model, tokenizer, config, solver).generate(prompts, progress=progress)
