"""The one way the small PyTorch tests (test_amp.py, test_optim.py,
test_resume.py) run a command: without the caller's LD_PRELOAD, text
output, a time limit; a status outside ok fails the test with its output."""

import os
import subprocess

import pytest


def sh(args, ok=(0,), cwd=None):
    """Runs args; returns its stdout."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=cwd,
                       timeout=300)
    if p.returncode not in ok:
        pytest.fail("%s exited %d: %s %s" % (" ".join(args), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout
