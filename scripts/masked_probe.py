"""Teacher-forced probe of an SBD model's masked mode, by position in the block (docs/claim-study.md).

On problems of a synthetic task's split, every target token is predicted twice from the same clean prefix: by the NTP
head (from the token before it) and by the mask query at its place in a block of ``k`` masks, the block starting where
the decoder's would (blocks tile the target from its first token; the prompt is the clean prefix). Prints the two
accuracies by position in the block, for the tokens a solution computes (math: the digits of a column result, a step
result and the answer), for a code answer's closing newline (where the decoder must stop) and for the rest (copied
operands, template). One forward per problem: the training layout ``[clean | noised]`` with every target token masked
in the noised half. A model trained with shifted MATP labels (``matp_shift``) is read as its decoder reads it: a
block's first token from the NTP logit, the token at block position j from the noised position j - 1 (with
``matp_shift: revealed``, from its own mask query: every target token is masked).

    python scripts/masked_probe.py results/study-r0/models/tiny-llama/sbd --task math --problems 200 --block 6
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import torch

from sbd_core.checkpoint import load
from sbd_core.decoding.setup import shifted_matp
from sbd_core.mask_token import mask_token_id
from sbd_core.masking import SBDBatch, backend_mask, dense_mask
from sbd_core.tasks import get_task
from sbd_core.train import tokenize_examples
from sbd_core.train_config import SHIFT_REVEALED

_COMPUTED = {  # per task, the groups a solution computes
    "math": re.compile(r"=(-?\d+)|So (-?\d+)|#### (-?\d+)"),  # column, step and final results
    # the folded slope and intercept
    "code_affine": re.compile(r"x \* (\d+)|(?<=[\dx]) [+-] (\d+)|return \(?(-?\d+) - "),
}
_COMPUTED["math_long"] = _COMPUTED["math_direct"] = _COMPUTED["math_graded"] = _COMPUTED["math"]


def computed_chars(task: str, target: str) -> set[int]:
    """Character offsets of ``target`` a solution computes (math and code_affine; empty for other tasks)."""
    if task not in _COMPUTED:
        return set()
    return {i for m in _COMPUTED[task].finditer(target) for g in range(1, (m.re.groups or 0) + 1) if m.group(g)
            for i in range(m.start(g), m.end(g))}


def token_kind(target: str, start: int, end: int, computed: set[int], last: bool) -> str:
    """The kind of the target token at characters ``start:end``: ``end`` for the target's last token where it is
    whitespace (a code answer's closing newline: where the decoder must stop), ``computed`` where it holds a character
    a solution computes (:func:`computed_chars`), ``other`` for the rest (copied operands, template)."""
    if last and not target[start:end].strip():
        return "end"
    return "computed" if computed & set(range(start, end)) else "other"


def probe_layout(ids: list[int], target: list[int], block: int, mask_id: int, pad_id: int,
                 end_of_text: int | None = None) -> tuple[SBDBatch, int]:
    """The ``[clean | noised]`` batch of one example (``ids`` with its response mask ``target``), every response
    token masked in the noised half, and front padding so that blocks of ``block`` start at the first response token;
    returns the batch and the padding length. ``end_of_text`` (its id): the row runs on with that token to the
    end of the block that holds its end of text, all masked, as the decoder's last block holds masks after an answer's
    end (training shows a query no such mask unless ``matp_past_end``)."""
    first = target.index(1)
    pad = (block - first % block) % block
    if end_of_text is not None:
        more = (1 - pad - len(ids)) % block or block  # the clean half (ids[:-1]) then ends on a block's end
        ids, target = ids + [end_of_text] * more, target + [1] * more
    clean = torch.tensor([pad_id] * pad + ids[:-1])
    docs = torch.tensor([-1] * pad + [0] * (len(ids) - 1))
    response = torch.tensor([0] * pad + target[:-1], dtype=torch.bool)
    noised = clean.masked_fill(response, mask_id)
    positions = torch.clamp(torch.arange(len(clean)) - pad, min=0)
    batch = SBDBatch(input_ids=torch.cat([clean, noised])[None], position_ids=torch.cat([positions, positions])[None],
                     labels=torch.full((1, 2 * len(clean)), -100), doc_ids=docs[None], block_size=block,
                     objective="sbd")
    return batch, pad


def masked_row(n: int, col: int, position: int, shift: bool | str, before_masked: bool = True) -> int:
    """The row of the probe's ``[clean N | noised N]`` logits that predicts clean column ``col`` (at ``position`` in
    its block) in SBD mode: its own mask query; for a shifted model (``shift``, :func:`shifted_matp`) the noised token
    before it, and at a block's first position the clean token before it (the NTP logit); for ``shift="revealed"``
    its own mask query again where the token before it is masked (``before_masked``)."""
    if not shift:
        return n + col
    if position == 0:
        return col - 1
    return n + col if shift == SHIFT_REVEALED and before_masked else n + col - 1


@torch.no_grad()
def probe(model, tokenizer, task: str, problems: list[dict], block: int, past_end: bool = False) -> dict:
    """Counts ``{(kind, position in block): [tokens, NTP right, masked right]}`` over ``problems``; ``past_end``: the
    decoder's view of the last block (:func:`probe_layout`), and the end-of-text token itself probed as kind ``eos``."""
    spec = get_task(task)
    mask_id, shift = mask_token_id(model), shifted_matp(model)
    counts: dict = defaultdict(lambda: [0, 0, 0])
    for problem in problems:
        prompt, target_text = spec.prompt_text(problem), spec.target_text(problem)
        encoded = tokenize_examples(tokenizer, [(prompt, target_text)], max_length=10**9)[0]
        ids, target = list(encoded["input_ids"]), list(encoded["target"])
        eos = tokenizer.eos_token_id if past_end else None
        batch, pad = probe_layout(ids, target, block, mask_id, tokenizer.pad_token_id, eos)
        logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                       attention_mask=backend_mask(model, dense_mask(batch)), use_cache=False).logits[0]
        n = batch.half
        computed = computed_chars(task, target_text)
        first = target.index(1)
        offsets = tokenizer(target_text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
        last = len(ids) - 2  # the last token probed: the end of text after it has no column of its own
        stop = last + 2 if past_end else last + 1  # past_end: the end of text itself too
        for j in range(first, stop):  # the target's tokens (tokenised on its own, as training does)
            col = j + pad
            if j > last:  # past_end: the end of text now has a column
                kind = "eos"
            else:
                start, end = offsets[j - first]
                kind = token_kind(target_text, start, end, computed, last=j == last)
            position = (j - first) % block
            cell = counts[(kind, position)]
            cell[0] += 1
            cell[1] += int(logits[col - 1].argmax() == ids[j])
            cell[2] += int(logits[masked_row(n, col, position, shift)].argmax() == ids[j])
    return dict(counts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="an SBD checkpoint folder")
    parser.add_argument("--task", default="math", help="a synthetic task: math, code, code_chain")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--block", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--past-end", action="store_true",
                        help="the last block as the decoder sees it: masks after the end of text, to the block's end")
    args = parser.parse_args(argv)
    model, tokenizer = load(args.model)
    problems = get_task(args.task).make_problems(args.split, args.problems, args.seed)
    counts = probe(model, tokenizer, args.task, problems, args.block, args.past_end)
    view = ", masks past the end" if args.past_end else ""
    print(f"{args.model}: {args.task} {args.split}, {len(problems)} problems, blocks of {args.block}{view}")
    print("kind      pos  tokens  NTP    masked")
    for kind, pos in sorted(counts):
        n, ntp, masked = counts[(kind, pos)]
        print(f"{kind:9} {pos:3}  {n:6}  {ntp / n:.3f}  {masked / n:.3f}")


if __name__ == "__main__":
    main()
