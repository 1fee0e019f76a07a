"""Finding and running the tftrace command-line programs (tfdump, tfdiff).

Some answers of the reader API are the C tools' own: ``Trace.summary()`` is
``tfdump --json TRACE`` and ``tftrace.diff()`` is ``tfdiff --json GOLDEN
BAD``, so Python and the command line never disagree. A program is looked
for, first match wins:

1. the environment variable ``TFT_TFDUMP`` / ``TFT_TFDIFF`` (a path; set
   but not an executable file is an error, not a reason to look further);
2. next to the loaded libtftrace.so: ``../bin`` (an installed tree,
   ``PREFIX/lib/libtftrace.so`` -> ``PREFIX/bin/tfdump``; also
   ``PREFIX/lib/<multiarch>/``), the build tree's layout
   (``build/tracer/libtftrace.so`` -> ``build/analyzer/tfdump``) and the
   library's own directory; both the path the library was loaded from and
   its real path (symbolic links resolved) are tried;
3. ``PATH``.

When none is found, ``ToolNotFoundError`` names every place tried. The
programs run with this process's environment minus the recorder (a
libtftrace.so in ``LD_PRELOAD`` is removed and ``TFT_DISABLE=1`` is set),
so a script that itself runs under ``tftrace`` does not record its tools.
"""

import os
import shutil
import subprocess

from . import _lib

_ENV = {"tfdump": "TFT_TFDUMP", "tfdiff": "TFT_TFDIFF"}


class ToolNotFoundError(RuntimeError):
    """A tftrace program (tfdump, tfdiff) could not be found; the message says where it was looked for."""


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _lib_dirs(tried):
    """Directories of the loaded libtftrace.so (as loaded, then resolved), or [] noting why."""
    try:
        path = _lib.library_path()
    except _lib.TftLibraryError as e:
        tried.append("next to libtftrace.so: not loaded (%s)" % str(e).splitlines()[0])
        return []
    if os.sep not in path:  # a bare soname from the linker's search: no directory to go by
        tried.append("next to libtftrace.so: loaded as %r, no directory known" % path)
        return []
    dirs = []
    for p in (path, os.path.realpath(path)):
        d = os.path.dirname(os.path.abspath(p))
        if d not in dirs:
            dirs.append(d)
    return dirs


def find(tool):
    """Absolute path of the program ``tool`` ("tfdump" or "tfdiff").

    Raises ToolNotFoundError naming every candidate tried, or ValueError for
    another tool name.
    """
    if tool not in _ENV:
        raise ValueError("tftrace: unknown tool %r (tfdump or tfdiff)" % (tool,))
    var = _ENV[tool]
    env = os.environ.get(var)
    if env:
        if _executable(env):
            return os.path.abspath(env)
        raise ToolNotFoundError("tftrace: %s=%s is not an executable file" % (var, env))
    tried = ["%s: not set" % var]
    for d in _lib_dirs(tried):
        for rel in ("../bin", "../../bin", "../analyzer", "."):
            cand = os.path.normpath(os.path.join(d, rel, tool))
            if _executable(cand):
                return cand
            tried.append("%s: not there" % cand)
    found = shutil.which(tool)
    if found:
        return os.path.abspath(found)
    tried.append("PATH: no %s" % tool)
    raise ToolNotFoundError("tftrace: %s not found; set %s to its path. Tried:\n  %s"
                            % (tool, var, "\n  ".join(tried)))


def _child_env():
    """This process's environment without the recorder (see the module docstring)."""
    env = dict(os.environ)
    pre = env.get("LD_PRELOAD")
    if pre is not None:
        keep = [p for p in pre.replace(":", " ").split()
                if not os.path.basename(p).startswith("libtftrace")]
        if keep:
            env["LD_PRELOAD"] = " ".join(keep)
        else:
            del env["LD_PRELOAD"]
    env["TFT_DISABLE"] = "1"
    return env


def run(tool, args):
    """Runs ``tool`` (found with find()) with the list ``args``; returns the
    subprocess.CompletedProcess (stdout and stderr as text, any exit status).
    Raises ToolNotFoundError, or OSError when it cannot be started."""
    exe = find(tool)
    return subprocess.run([exe] + [os.fsdecode(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=_child_env(), universal_newlines=True,
                          errors="replace", check=False)
