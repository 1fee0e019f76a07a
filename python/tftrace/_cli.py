"""The console scripts ``tftrace``, ``tfdump`` and ``tfdiff`` of the wheel.

``pip install .`` at the repository's top builds the C programs into the
package (``tftrace/_native/bin``, beside ``_native/lib/libtftrace.so``);
each script replaces itself with its program (``os.execv``), so signals,
exit status, the terminal and ``/proc/self/exe`` are the program's own.
"""

import os
import sys


def _exec(name):
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "bin", name)
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            "%s: this tftrace package has no native programs (%s is missing): it was installed from "
            "python/ alone, which is the trace reader only. Install the whole project instead: "
            "pip install . at the repository's top (or build it with CMake).\n" % (name, exe))
        sys.exit(2)
    try:
        os.execv(exe, [name] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("%s: cannot run %s: %s\n" % (name, exe, e))
        sys.exit(2)


def tftrace():
    _exec("tftrace")


def tfdump():
    _exec("tfdump")


def tfdiff():
    _exec("tfdiff")
