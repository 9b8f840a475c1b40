"""Type stubs of attnscope (the C++ namespace attnscope: normalization maps, Jacobians, exact norms)."""
import os
from typing import Any, Callable, ClassVar, Dict, Optional, Union, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import analysis as analysis
from . import capacity as capacity
from . import composition as composition
from . import io as io
from . import logits as logits
from . import model as model
from . import stream as stream
from . import text as text
from . import results as results
from .results import JacobianNormBounds

__version__: str
openmp: int
"""The OpenMP version (_OPENMP, e.g. 201511) the module was built with; 0: built without OpenMP."""

Causal = bool
"""False: every key; True: row i sees keys 0..i (last two axes); causal_offset=k: keys 0..i+k."""
Path = Union[str, bytes, os.PathLike]
"""A file or folder: str, bytes or os.PathLike (pathlib.Path)."""
Mask = Union[ArrayLike, None]
"""Boolean, True = visible; shape (rows, cols) shared by every matrix, or the logits' shape."""

class Enumeration:
    """What every pybind11 enumeration has (a base class of the stubs only): int(member) is its value."""
    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class SelfAdjustVariant(Enumeration):
    basic: ClassVar["SelfAdjustVariant"]
    normalized: ClassVar["SelfAdjustVariant"]
    __members__: ClassVar[Dict[str, "SelfAdjustVariant"]]

class SoftmaxMap:
    temperature: float
    def __init__(self, temperature: float = 1.0) -> None: ...

class SparsemaxMap:
    def __init__(self) -> None: ...

class Entmax15Map:
    def __init__(self) -> None: ...

class EntmaxBisectMap:
    alpha: float
    def __init__(self, alpha: float = 1.5) -> None: ...

class ScalableSoftmaxMap:
    s: float
    def __init__(self, s: float = 1.0) -> None: ...

class SelfAdjustSoftmaxMap:
    variant: SelfAdjustVariant
    def __init__(self, variant: SelfAdjustVariant = SelfAdjustVariant.basic) -> None: ...

class SinkSoftmaxMap:
    sink_logit: float
    def __init__(self, sink_logit: float = 0.0) -> None: ...

NormalizationMap = Union[SoftmaxMap, SparsemaxMap, Entmax15Map, EntmaxBisectMap, ScalableSoftmaxMap,
                         SelfAdjustSoftmaxMap, SinkSoftmaxMap]
MapLike = Union[NormalizationMap, str]
"""A map object or its text: 'softmax', 'temperature:T', 'ssmax:S', 'sparsemax', 'entmax15', 'entmax:ALPHA', ..."""

def _input_address(array: ArrayLike) -> int: ...
def parse_normalization_map(text: str) -> NormalizationMap: ...
def to_string(map: MapLike) -> str: ...

# Maps: logits (..., rows, cols) or (cols,), float32/float64 -> same shape and dtype.
def softmax(logits: ArrayLike, temperature: float = 1.0, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def sparsemax(logits: ArrayLike, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def entmax15(logits: ArrayLike, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def entmax_bisect(logits: ArrayLike, alpha: float, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def ssmax(logits: ArrayLike, s: float, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def sa_softmax(logits: ArrayLike, variant: SelfAdjustVariant = SelfAdjustVariant.basic, causal: Causal = False,
               mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def softmax_with_sink(logits: ArrayLike, sink_logit: float = 0.0, causal: Causal = False,
                      mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def normalize(logits: ArrayLike, function: Callable[[float], float], derivative: Callable[[float], float],
              causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def apply_map(map: MapLike, logits: ArrayLike, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...

# Jacobians
def jacobian_vector_product(logits: ArrayLike, map: MapLike, tangent: ArrayLike, causal: Causal = False,
                            mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def vector_jacobian_product(logits: ArrayLike, map: MapLike, cotangent: ArrayLike, causal: Causal = False,
                            mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
@overload
def jacobian(logits_row: ArrayLike, map: MapLike) -> NDArray[Any]:
    """Dense (n, n) Jacobian of one row of n logits."""
@overload
def jacobian(logits: ArrayLike, row: int, map: MapLike, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]:
    """Dense (cols, cols) Jacobian of row `row` of a 2-D logits matrix."""
def jacobian_spectral_norm(logits: ArrayLike, map: MapLike = "softmax", causal: Causal = False,
                           mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]:
    """Exact ||J_i||_2 per row: shape logits.shape[:-1], the logits' dtype."""

# Norms from probabilities (per row: shape p.shape[:-1])
def softmax_jacobian_spectral_norm(probabilities: ArrayLike, scale: float = 1.0, causal: Causal = False,
                                   mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def sink_softmax_jacobian_spectral_norm(probabilities: ArrayLike, causal: Causal = False,
                                        mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def entmax_jacobian_spectral_norm(probabilities: ArrayLike, alpha: float, causal: Causal = False,
                                  mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def sparsemax_jacobian_spectral_norm(probabilities: ArrayLike, causal: Causal = False,
                                     mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
def softmax_jacobian_norm_bounds(probabilities: ArrayLike, scale: float = 1.0, causal: Causal = False,
                                 mask: Mask = None, causal_offset: Optional[int] = None) -> JacobianNormBounds:
    """.lower, .upper per row."""
def corollary3_bound(temperature: float) -> float: ...
def softmax_jacobian_norm_supremum(temperature: float) -> float: ...
def row_entropy(attention: ArrayLike, causal: Causal = False, mask: Mask = None, causal_offset: Optional[int] = None) -> NDArray[Any]: ...
