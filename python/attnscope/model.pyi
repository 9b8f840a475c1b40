"""attnscope::model: llama2.c checkpoints and Hugging Face folders run by one Transformer (float32)."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from numpy.typing import NDArray
from .results import ForwardRowStatistics

from . import MapLike, Path

class Transformer:
    @property
    def config(self) -> Dict[str, Any]: ...
    def forward(self, tokens: Sequence[int], capture: Sequence[str] = ..., map: Optional[MapLike] = None,
                ablated_heads: Sequence[Tuple[int, int]] = ..., ablation_mode: str = "zero") -> Dict[str, NDArray[Any]]: ...
    def capture(self, tokens: Sequence[int], capture: Sequence[str] = ...,
                map: Optional[MapLike] = None) -> Dict[str, NDArray[Any]]: ...
    def forward_row_statistics(self, tokens: Sequence[int], sink_keys: Sequence[int] = ..., top_k: Sequence[int] = ...,
                               jacobian_norm: bool = True, max_weight_excludes_sinks: bool = False,
                               allow_beyond_trained_positions: bool = False,
                               ablated_heads: Sequence[Tuple[int, int]] = ...,
                               ablation_mode: str = "zero") -> ForwardRowStatistics: ...
    def generate_greedy(self, prefix: Sequence[int], steps: int, map: Optional[MapLike] = None,
                        ablated_heads: Sequence[Tuple[int, int]] = ..., ablation_mode: str = "zero") -> List[int]: ...
    def generate_sampled(self, prefix: Sequence[int], steps: int, temperature: float, seed: int,
                         map: Optional[MapLike] = None, ablated_heads: Sequence[Tuple[int, int]] = ...,
                         ablation_mode: str = "zero") -> List[int]: ...
    def generate(self, tokens: Sequence[int], steps: int, temperature: float = 0.0, seed: int = 0,
                 stop_tokens: Sequence[int] = ..., statistics: bool = True, sink_keys: Sequence[int] = ...,
                 top_k: Sequence[int] = ..., jacobian_norm: bool = True, max_weight_excludes_sinks: bool = False,
                 sink_rate_queries: int = 64) -> Dict[str, Any]: ...
    def mean_negative_log_likelihood(self, tokens: Sequence[int], map: Optional[MapLike] = None,
                                     ablated_heads: Sequence[Tuple[int, int]] = ...,
                                     ablation_mode: str = "zero") -> float: ...

def load_model(path: Path) -> Transformer: ...
def load_huggingface_model(folder: Path) -> Transformer: ...
