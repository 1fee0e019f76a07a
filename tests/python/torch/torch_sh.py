"""The one way the PyTorch tests run a command: without the caller's
LD_PRELOAD, text output, a time limit; a status outside ok fails the test
with its output. run() returns the finished process (test_torch.py,
test_dist.py, test_procs.py, test_api.py, test_compile.py add their own
environment), sh() its stdout (test_amp.py, test_optim.py, test_resume.py)."""

import os
import subprocess

import pytest


def run(cmd, timeout=300, ok=(0,), env=None, cwd=None):
    """Runs cmd with env added to the environment; returns the process.
    ok None: any status."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.update(env or {})
    p = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=e, cwd=cwd)
    if ok is not None and p.returncode not in ok:
        pytest.fail("%s exited %d\nstdout: %s\nstderr: %s" % (" ".join(cmd), p.returncode, p.stdout[-3000:],
                                                       p.stderr[-3000:]))
    return p


def sh(args, ok=(0,), cwd=None):
    """Runs args; returns its stdout."""
    return run(args, ok=ok, cwd=cwd).stdout
