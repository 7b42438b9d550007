"""Runs a PyTriton program file as ``__main__`` (its argv after the file
name), unchanged: with ``--redirect`` its ``pytriton`` imports are
redirected to ``tritonserver.pytriton`` (pytriton_redirect.py); without,
it runs on whatever ``pytriton`` the interpreter has (PyTriton's own, for
a reference run). ``random``, NumPy and (when PYTRITON_LAUNCH_SEED_TORCH
is set) PyTorch are seeded first, so that both runs of an example draw the
same random inputs and weights. tests/run_pytriton_examples.sh uses it.

    python pytriton_launch.py [--redirect] program.py [args...]
"""

import os
import random
import runpy
import sys

if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments and arguments[0] == "--redirect":
        arguments = arguments[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import pytriton_redirect

        pytriton_redirect.install()
    if not arguments:
        sys.exit("usage: pytriton_launch.py [--redirect] program.py [args...]")
    random.seed(0)
    import numpy

    numpy.random.seed(0)
    if os.environ.get("PYTRITON_LAUNCH_SEED_TORCH"):
        import torch

        torch.manual_seed(0)
    program = os.path.abspath(arguments[0])
    sys.argv = [program, *arguments[1:]]
    sys.path.insert(0, os.path.dirname(program))
    runpy.run_path(program, run_name="__main__")
