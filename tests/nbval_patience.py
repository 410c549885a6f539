"""A pytest plugin for the nbval run: wait up to three minutes, not 5 s, for the outputs of a cell that has finished,
and up to three minutes, not 60 s, for a new kernel's first reply.

nbval reads a cell's outputs from the kernel's iopub channel after the cell's reply, giving up after a fixed 5 s
between messages ("Timeout of 5 seconds exceeded waiting for output"). On a two-core CI machine busy with other test
workers, the kernel's iopub thread can be starved that long after a long training cell, and a correct notebook fails.
The cell's own time limit (--nbval-cell-timeout) is unchanged. Once in a full `make test`, a kernel started while both
cores were busy did not answer nbval's first request within its 60 s ("Kernel didn't respond in 60 seconds").

Both limits are generous, not scaled by the load: a kernel answers in about 3 s and a cell's last output follows its
reply within a second on a quiet two-core machine, so three minutes hold at three times its load and more. nbval's own
limit per cell (--nbval-cell-timeout, 2000 s) is longer than a whole notebook's run; what bounds a notebook is
tests/test_nbval.py's limit, which scales with the load.
"""

from __future__ import annotations  # noqa: I001 - utils is imported before nbval, on purpose

import utils  # noqa: F401 - first: then nbformat's jsonschema builds no IRI parser here (utils/__init__.py; 1 s)
from nbval import plugin

OUTPUT_TIMEOUT_S = 180
KERNEL_STARTUP_TIMEOUT_S = 180


def pytest_configure(config) -> None:
    given = float(config.option.nbval_kernel_startup_timeout)
    config.option.nbval_kernel_startup_timeout = max(given, KERNEL_STARTUP_TIMEOUT_S)


_init = plugin.IPyNbCell.__init__


def _patient_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_TIMEOUT_S


plugin.IPyNbCell.__init__ = _patient_init
