"""The lm-eval model ``sbd-replay``: stored completions scored by lm-eval's own task code without decoding again.

Its own module, apart from :mod:`sbd_core.lm_eval_adapter.model`'s decoding model, so that a score job imports no
model code (torch, transformers and the decoders cost a score job about 7 seconds of start-up).
Importing it registers the name and imports ``lm_eval.models`` first: lm-eval's ``get_model`` only loads its built-in
model table when the registry is empty, so registering ours first would otherwise hide ``hf`` & co.
"""

from __future__ import annotations

import os

import lm_eval.models  # noqa: F401  (see module doc: keeps lm-eval's built-in models registered)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from sbd_core.decoding.setup import cut_at_stop
from sbd_core.records.generations import read_generations

from .base import problem_id

__all__ = ["MissingGenerationError", "ReplayLM", "request_id", "stop_strings"]


def stop_strings(until) -> tuple[str, ...]:
    """Normalise a request's ``until`` (None, a string or a list of strings); empty strings are dropped."""
    if until is None:
        return ()
    if isinstance(until, str):
        until = [until]
    if not isinstance(until, (list, tuple)) or not all(isinstance(s, str) for s in until):
        raise ValueError(f"'until' must be a string or a list of strings, got {until!r}")
    return tuple(s for s in until if s)


class MissingGenerationError(KeyError):
    """A request's problem has no stored completion."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


def request_id(request) -> str:
    """The problem id of an lm-eval request: its document's id (``sbd_id``, else ``task_id``), else its row index."""
    return problem_id(request.doc or {}, request.doc_id)


@register_model("sbd-replay")
class ReplayLM(LM):
    """lm-eval model that returns stored completions, looked up by problem id, instead of generating."""

    def __init__(self, generations, batch_size=None, max_batch_size=None, device=None):
        """``generations``: a generations file (JSON lines ``{"id", "completion"}``) or a ``{id: completion}``
        mapping. ``batch_size``/``max_batch_size``/``device`` are accepted because ``simple_evaluate`` passes them.
        """
        super().__init__()
        if isinstance(generations, dict):
            self.source, self.completions = "the given completions", dict(generations)
        else:
            self.source, self.completions = os.fspath(generations), read_generations(generations)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Stored completion of each request's problem, cut at the request's ``until`` strings (idempotent when the
        stored text was decoded with the same stops). ``max_gen_toks`` is not applied (no tokenizer)."""
        ids = [request_id(req) for req in requests]
        missing = [i for i in ids if i not in self.completions]
        if missing:
            raise MissingGenerationError(f"{len(missing)} of {len(requests)} problems have no stored completion in "
                                         f"{self.source}; first missing id: {missing[0]!r}")
        return [cut_at_stop(self.completions[i], stop_strings((req.args[1] or {}).get("until")))
                for i, req in zip(ids, requests)]

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        """Not available: stored generations carry no scores."""
        raise NotImplementedError("ReplayLM only replays stored generations (generate_until); use SBDLM to score "
                                  "log-likelihoods")

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        """Not available: stored generations carry no scores."""
        raise NotImplementedError("ReplayLM only replays stored generations (generate_until); use SBDLM for "
                                  "rolling log-likelihoods")
