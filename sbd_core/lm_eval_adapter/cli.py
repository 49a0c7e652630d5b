"""lm-eval's own command line with the ``sbd`` and ``sbd-replay`` models registered.

lm-eval 0.4.13 has no plugin hook for models, so ``lm-eval run --model sbd`` alone cannot find ours. This module
imports the registration and hands the arguments to lm-eval's CLI unchanged:

    python -m sbd_core.lm_eval_adapter.cli run --model sbd \\
        --model_args pretrained=results/embedded/models/tiny-llama/sbd,solver=eb,gamma=0.1,block_size=16 \\
        --tasks gsm8k --batch_size 8
"""

from . import model  # noqa: F401  (registers "sbd" and "sbd-replay")


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
