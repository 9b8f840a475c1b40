"""Type stubs of attnscope.analysis: the per-head report, its HTML page, and two models compared head by head."""
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .model import Transformer
from .results import HeadReport, ModelComparison

Source = Union[str, os.PathLike, Mapping[str, ArrayLike], Sequence[ArrayLike], ArrayLike]
"""A capture/attention file path, a dict like Transformer.forward's, Hugging Face's output.attentions (a tuple of
(batch, heads, q, k) tensors, one per layer), or an attention array or tensor."""

def head_report(
    source: Source,
    *,
    scores: Optional[ArrayLike] = None,
    values: Optional[ArrayLike] = None,
    columns: Union[str, Sequence[str], None] = None,
    basic: bool = False,
    sink_keys: Sequence[int] = (0,),
    lenient: bool = False,
    map: Any = None,
    layout: Optional[str] = None,
    batch_index: Optional[int] = None,
    layers: Optional[Sequence[int]] = None,
    heads: Optional[Sequence[int]] = None,
) -> HeadReport: ...
def write_html(
    source: Source,
    path: Union[str, bytes, os.PathLike],
    *,
    scores: Optional[ArrayLike] = None,
    values: Optional[ArrayLike] = None,
    tokens: Optional[Sequence[str]] = None,
    title: str = "attnscope report",
    columns: Union[str, Sequence[str], None] = None,
    basic: bool = False,
    sink_keys: Sequence[int] = (0,),
    lenient: bool = False,
    map: Any = None,
    layout: Optional[str] = None,
    batch_index: Optional[int] = None,
    layers: Optional[Sequence[int]] = None,
    heads: Optional[Sequence[int]] = None,
) -> HeadReport: ...
def columns(*, basic: bool = False, all: bool = False, sink_keys: Sequence[int] = (0,)) -> List[Dict[str, Any]]: ...
def compare(
    model_a: Transformer,
    model_b: Transformer,
    tokens: Sequence[int],
    *,
    sink_keys: Sequence[int] = (0,),
    top_k: int = 5,
    query_block: int = 64,
    beyond_trained_length: bool = False,
    threads: int = 1,
) -> ModelComparison: ...
