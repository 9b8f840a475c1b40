"""attnscope: exact, fast analysis of attention in transformers, on numpy arrays.

The functions of the C++ namespace ``attnscope`` (normalization maps, Jacobians, exact spectral norms, row entropy)
are at the top level; ``attnscope.composition``, ``attnscope.capacity``, ``attnscope.logits``, ``attnscope.io``,
``attnscope.model``, ``attnscope.stream``, ``attnscope.text`` and ``attnscope.analysis`` mirror the C++ namespaces;
``attnscope.results`` holds the typed result classes. See docs/api/python.md.
"""
import sys as _sys

from . import _attnscope
from . import results  # noqa: F401  (the typed result classes the extension returns)
from ._attnscope import *  # noqa: F401,F403
from ._attnscope import _input_address, __version__, analysis, capacity, composition, io, logits, model, stream, text  # noqa: F401

# `import attnscope.capacity` and `from attnscope.io import read_npy` work like for any package.
for _name in ("analysis", "capacity", "composition", "io", "logits", "model", "stream", "text"):
    _sys.modules[__name__ + "." + _name] = getattr(_attnscope, _name)
del _name, _sys
