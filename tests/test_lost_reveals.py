"""scripts/lost_reveals.py: which logged forward revealed a block position (blocks end when nothing in them stays
masked), and the LoggingSolver leaving the solver's decisions as they are."""

import importlib.util
from pathlib import Path

import pytest
import torch

from sbd_core.decoding.solvers import get_solver

_SPEC = importlib.util.spec_from_file_location("lost_reveals", Path(__file__).parents[1] / "scripts" / "lost_reveals.py")
lost = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(lost)

T, F = True, False
CALLS = [  # (masked before the forward, revealed by it, confidence): two blocks of 3
    ([T, T, T], [T, F, T], [1.0, 0.4, 0.99]),
    ([F, T, F], [F, T, F], [1.0, 0.4, 0.99]),  # block 0 ends: its last masked position revealed
    ([T, T, T], [F, T, F], [0.3, 0.6, 0.5]),
    ([T, F, T], [T, F, T], [0.9, 1.0, 0.8]),
]


def test_the_call_that_revealed_a_position_is_found_in_its_block():
    assert lost.revealing_call(CALLS, 0, 1) == CALLS[1]
    assert lost.revealing_call(CALLS, 0, 2) == CALLS[0]
    assert lost.revealing_call(CALLS, 1, 1) == CALLS[2]  # not block 0's reveal of the same position
    assert lost.revealing_call(CALLS, 1, 0) == CALLS[3]
    with pytest.raises(ValueError, match="no forward revealed position 2 of block 2"):
        lost.revealing_call(CALLS, 2, 2)


def test_logging_solver_records_first_rows_and_changes_nothing():
    solver = get_solver("confidence_threshold", threshold=0.9, order="prefix")
    logits = torch.log(torch.tensor([[[0.95, 0.05], [0.5, 0.5], [0.99, 0.01]]] * 2))
    masked = torch.tensor([[T, T, T], [F, T, T]])
    logged = lost.LoggingSolver(solver)
    reveal, tokens = logged(logits, masked)
    expected = solver(logits, masked)
    assert torch.equal(reveal, expected[0]) and torch.equal(tokens, expected[1])
    assert logged.calls == [([T, T, T], [T, F, F], pytest.approx([0.95, 0.5, 0.99]))]
    assert logged.rule.order == "prefix"  # the solver's settings pass through
