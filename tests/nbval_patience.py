"""A pytest plugin for the nbval run: wait up to three minutes, not 5 s, for the outputs of a cell that has finished.

nbval reads a cell's outputs from the kernel's iopub channel after the cell's reply, giving up after a fixed 5 s
between messages ("Timeout of 5 seconds exceeded waiting for output"). On a two-core CI machine busy with other test
workers, the kernel's iopub thread can be starved that long after a long training cell, and a correct notebook fails.
The cell's own time limit (--nbval-cell-timeout) is unchanged.
"""

from __future__ import annotations  # noqa: I001 - utils is imported before nbval, on purpose

import utils  # noqa: F401 - first: then nbformat's jsonschema builds no IRI parser here (utils/__init__.py; 1 s)
from nbval import plugin

OUTPUT_TIMEOUT_S = 180

_init = plugin.IPyNbCell.__init__


def _patient_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_TIMEOUT_S


plugin.IPyNbCell.__init__ = _patient_init
