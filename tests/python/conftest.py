"""What the Python tests (reader/test_reader.py, torch/test_torch.py) are
given: the paths of the built tools, as options, which ctest passes
(tests/python/CMakeLists.txt, torch/CMakeLists.txt). By hand, from the
repository root after a build:

    python3 -m pytest tests/python/reader/test_reader.py --frame dict \\
        --tftrace build/tracer/tftrace --tfdump build/analyzer/tfdump \\
        --tfdiff build/analyzer/tfdiff --tftrain build/runtime/tftrain \\
        --lib build/tracer/libtftrace.so

(with TFT_LIB=build/tracer/libtftrace.so and PYTHONPATH=python).

Both suites count their checks; the counts are printed at the end
(``tftrace checks:``) and a test that made none fails.
"""

import os
import shutil
import tempfile

import pytest

# (option, help); all are paths unless said
_OPTIONS = (
    ("--tftrace", "the tftrace launcher"),
    ("--tfdump", "tfdump"),
    ("--tfdiff", "tfdiff"),
    ("--tftrain", "tftrain, or 'none' when the build has none (reader tests: the cases that need it skip)"),
    ("--lib", "libtftrace.so"),
    ("--mpi", "ON when the build has MPI (reader test mpi)"),
    ("--python", "the python of the virtual environment with torch (torch tests)"),
    ("--gpt", "examples/pytorch/gpt_train.py (torch tests)"),
    ("--pythonpath", "the python/ folder of the package (torch tests)"),
    ("--tft-version", "the project's version, MAJOR.MINOR.PATCH (torch tests)"),
    ("--work", "torch tests: the folder for their traces (default: a fresh one, removed after)"),
)

_CHECKS = pytest.StashKey()


def pytest_addoption(parser):
    g = parser.getgroup("tftrace", "the tftrace build under test")
    for opt, what in _OPTIONS:
        g.addoption(opt, metavar=opt.lstrip("-").upper().replace("-", "_"), help=what)
    g.addoption("--frame", action="append", choices=("dict", "pandas"),
                help="reader tests: the tables checked, dicts of numpy arrays (dict) or pandas "
                     "DataFrames (pandas); twice for both. Default: both, pandas skipped where it "
                     "does not import; named, pandas must import")
    g.addoption("--keep", action="store_true", help="torch tests: leave --work as it is (the golden "
                "case leaves its trace there for the bug cases)")


def pytest_configure(config):
    config.stash[_CHECKS] = []


def pytest_generate_tests(metafunc):
    if "frame" in metafunc.fixturenames:
        metafunc.parametrize("frame", metafunc.config.getoption("frame") or ["dict", "pandas"])


@pytest.fixture(scope="session")
def tools(request):
    """The options above as attributes (tools.tftrace, ..., tools.tft_version,
    tools.work, tools.keep); reading one that was not given fails the test
    (but work: None, mpi: "OFF")."""
    return _Given(request.config)


class _Given:
    def __init__(self, config):
        self._config = config

    def __getattr__(self, name):
        opt = "--" + name.replace("_", "-")
        v = self._config.getoption(opt)
        if v is None and name == "mpi":
            return "OFF"
        if v is None and name != "work":
            pytest.fail("%s not given (tests/python/conftest.py)" % opt)
        return v


@pytest.fixture
def scratch():
    """A fresh folder for one test's files, removed after it."""
    d = tempfile.mkdtemp(prefix="tft-pytest.")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def count_checks(request):
    """For a suite's own counter: call it at teardown with the number of
    checks the test made; when the test passed, the count is printed at the
    end, and none fails the test."""
    def report(n):
        if not getattr(request.node, "tft_passed", False):
            return  # skipped or failed: nothing to count
        request.config.stash[_CHECKS].append((request.node.nodeid, n))
        if n == 0:
            pytest.fail("%s compared nothing" % request.node.name)
    return report


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Notes on the test whether its call passed (count_checks)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.tft_passed = rep.passed


def pytest_terminal_summary(terminalreporter, config):
    for nodeid, n in config.stash[_CHECKS]:
        terminalreporter.write_line("tftrace checks: %s %d" % (os.path.basename(nodeid), n))
