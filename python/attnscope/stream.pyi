"""attnscope::stream: exact per-row softmax statistics from Q and K without the L x L matrix."""
from typing import List, Optional, Sequence

from numpy.typing import ArrayLike
from .results import PositionCurve, RowStatistics, Summary

class RowStatisticsOptions:
    causal: bool
    window: Optional[int]
    scale: Optional[float]
    sink_keys: List[int]
    max_weight_excludes_sinks: bool
    top_k: List[int]
    jacobian_norm: bool
    block_rows: int
    threads: int
    def __init__(self, causal: bool = True, window: Optional[int] = None, scale: Optional[float] = None,
                 sink_keys: Sequence[int] = ..., max_weight_excludes_sinks: bool = False, top_k: Sequence[int] = ...,
                 jacobian_norm: bool = True, key_mask: Optional[ArrayLike] = None, block_rows: int = 64,
                 threads: int = 0) -> None: ...

def row_statistics(queries: ArrayLike, keys: ArrayLike, options: RowStatisticsOptions = ...) -> RowStatistics: ...
def summarize(values: Sequence[float], levels: Sequence[float] = ...) -> Summary: ...
def position_curve(values: Sequence[float], bins: int, spacing: str = "logarithmic") -> PositionCurve: ...
