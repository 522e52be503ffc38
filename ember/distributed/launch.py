"""``python -m ember.distributed.launch`` (deprecated, as ``torch.distributed.launch``): the
old launcher, now ``ember.distributed.run`` with one difference kept for old scripts --
unless ``--use-env`` is given, each worker also gets ``--local-rank=<its local rank>`` as an
argument (after the script, before the script's own arguments). Calling ``main`` emits
torch's ``FutureWarning``. New code should use ``python -m ember.distributed.run``."""
from __future__ import annotations

import warnings

from .run import get_args_parser, run

__all__ = ["parse_args", "launch", "main"]

_DEPRECATION = ("The module torch.distributed.launch is deprecated\n"
                "and will be removed in future. Use torchrun.\n"
                "Note that --use-env is set by default in torchrun.\n"
                "If your script expects `--local-rank` argument to be set, please\n"
                "change it to read from `os.environ['LOCAL_RANK']` instead. See \n"
                "https://pytorch.org/docs/stable/distributed.html#launch-utility for \n"
                "further instructions\n")


def parse_args(args):
    """torchrun's options plus ``--use-env`` (default off: pass ``--local-rank``)."""
    parser = get_args_parser()
    parser.add_argument("--use-env", "--use_env", default=False, action="store_true",
                        help="Pass the local rank in LOCAL_RANK only, not as a --local-rank argument.")
    return parser.parse_args(args)


def launch(args):
    if args.no_python and not args.use_env:
        raise ValueError("When using the '--no-python' flag, you must also set the '--use-env' flag.")
    run(args)


def main(args=None):
    warnings.warn(_DEPRECATION, FutureWarning, stacklevel=2)
    launch(parse_args(args))


if __name__ == "__main__":
    main()
