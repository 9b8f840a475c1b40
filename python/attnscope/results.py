"""Typed results of attnscope's functions: one dataclass per C++ result struct, with the struct's fields as
attributes (the C++ member names), a readable ``repr``, ``to_dict()`` and ``to_pandas()`` (pandas is imported only
when ``to_pandas`` is called). The per-head tables (``analysis.head_report``, ``analysis.compare``) are
:class:`HeadReport` and :class:`ModelComparison`: mappings of column name to numpy array, one entry per head, shown
as an HTML table in Jupyter.
"""
import collections.abc
import dataclasses
import html
import typing
from typing import Any, Dict, List, Union

import numpy as np

Array = Any  # numpy.ndarray; kept loose so that the dataclasses stay importable without numpy.typing

__all__ = [
    "Result", "HeadTable", "HeadReport", "ModelComparison",
    "Separability", "Lemma1Constants", "WeightBounds", "WeightSummary", "Theorem2Bounds", "SeparabilityRow",
    "Lemma2JacobianBound", "GradientSensitivity", "ExactJacobianNorm", "KsTest", "CriticalTopN", "WilcoxonTest",
    "PowerLawFit", "SinkSplit", "EntropySplit", "AitchisonSplit", "JsSplit", "CosineConventions", "ChannelSummary",
    "HeadScores", "PairMetricMatrices", "FlipRate", "FitResult", "LogitGapRows", "RoundingError", "LogitExtremes",
    "ForwardRowStatistics", "JacobianNormBounds", "RowStatistics", "Summary", "PositionCurve",
]


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("to_pandas() needs pandas (pip install pandas, or Debian's python3-pandas)") from error
    return pandas


def _short(value: Any) -> str:
    """A field's value in a repr: arrays by dtype and shape (with the values when there are at most 6)."""
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return np.array2string(value, separator=", ", precision=6)
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, Result):
        return f"{type(value).__name__}(...)"
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


class Result:
    """Base of the typed results: fields as attributes, repr, to_dict() and to_pandas()."""

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a dict name -> value (nested results as dicts too; arrays are not copied)."""
        return {field.name: (value.to_dict() if isinstance(value, Result) else value)
                for field in dataclasses.fields(self) for value in (getattr(self, field.name),)}

    def to_pandas(self) -> Any:
        """The fields as a pandas DataFrame: one row per entry of the fields' common leading axis (per head or per
        row), scalar fields repeated on every row; a result of scalars only is one row. Needs pandas."""
        pandas = _pandas()
        values = self.to_dict()
        lengths = {np.shape(v)[0] for v in values.values()
                   if isinstance(v, (np.ndarray, list)) and np.ndim(v) >= 1 and not isinstance(v, str)}
        if len(lengths) > 1 or not lengths:
            return pandas.DataFrame({k: [v] for k, v in values.items() if not isinstance(v, dict)})
        (length,) = lengths
        columns: Dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, dict):
                continue
            if isinstance(value, (np.ndarray, list)) and np.ndim(value) >= 1:
                array = np.asarray(value)
                columns[name] = list(array) if array.ndim > 1 else array
            else:
                columns[name] = [value] * length
        return pandas.DataFrame(columns)

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}={_short(getattr(self, f.name))}" for f in dataclasses.fields(self))
        return f"{type(self).__name__}({fields})"


class HeadTable(collections.abc.Mapping):
    """One entry per head: a mapping column name -> numpy array ('layer', 'head', then the table's columns), with
    the columns also as attributes, to_dict(), to_pandas() (one row per (layer, head)) and an HTML table in
    Jupyter (_repr_html_)."""

    def __init__(self, columns: Dict[str, Array]) -> None:
        self._columns = dict(columns)

    def __getitem__(self, name: str) -> Array:
        return self._columns[name]

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __getattr__(self, name: str) -> Array:
        columns = self.__dict__.get("_columns", {})
        if name in columns:
            return columns[name]
        raise AttributeError(f"{type(self).__name__} has no column {name!r}; columns: {', '.join(columns)}")

    @property
    def heads(self) -> int:
        """The number of heads (rows of the table)."""
        return len(self._columns["layer"]) if "layer" in self._columns else 0

    def to_dict(self) -> Dict[str, Array]:
        """The columns as a plain dict name -> numpy array (the same arrays, not copies)."""
        return dict(self._columns)

    def to_pandas(self) -> Any:
        """A pandas DataFrame with one row per (layer, head) and one column per entry. Needs pandas."""
        return _pandas().DataFrame(self._columns)

    def __repr__(self) -> str:
        names = [n for n in self._columns if n not in ("layer", "head")]
        return f"{type(self).__name__}({self.heads} heads; columns: {', '.join(names)})"

    def _repr_html_(self) -> str:
        names = list(self._columns)
        head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        rows = []
        for i in range(self.heads):
            cells = []
            for n in names:
                value = self._columns[n][i]
                text = f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)
                cells.append(f"<td>{html.escape(text)}</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return (f"<table class=\"attnscope-{type(self).__name__.lower()}\"><thead><tr>{head}</tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")


class HeadReport(HeadTable):
    """The per-head report of `attnscope report` (analysis.head_report, analysis.write_html): 'layer', 'head',
    'bad_rows' (int64), then one float64 array per column (NaN = not available for that head)."""


class ModelComparison(HeadTable):
    """Two models compared head by head (analysis.compare), most changed first; the columns of `compare --csv`."""


# ---- capacity -------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(repr=False, eq=False)
class Separability(Result):
    """How many of the selected value vectors stay distinguishable at a radius (capacity.separability)."""
    distinguishable: int
    selected: int
    fraction: float
    radius: float


@dataclasses.dataclass(repr=False, eq=False)
class Lemma1Constants(Result):
    """Lemma 1's constants: lower and upper."""
    lower: float
    upper: float


@dataclasses.dataclass(repr=False, eq=False)
class WeightBounds(Result):
    """Bounds of a softmax weight: lower and upper."""
    lower: float
    upper: float


@dataclasses.dataclass(repr=False, eq=False)
class WeightSummary(Result):
    """Largest weight, mean row maximum, mean weight and mean row maximum times the row length."""
    max_weight: float
    mean_row_max: float
    mean_weight: float
    mean_row_max_times_length: float


@dataclasses.dataclass(repr=False, eq=False)
class Theorem2Bounds(Result):
    """Theorem 2's per-row spread and the lower and upper bounds."""
    spread: Array
    lower: float
    upper: float


@dataclasses.dataclass(repr=False, eq=False)
class SeparabilityRow(Result):
    """Separability of the rows at one count: per-row fraction, bounds, their means and the separation."""
    rows: int
    fraction: Array
    lower: Array
    upper: Array
    mean_fraction: float
    mean_lower: float
    mean_upper: float
    separation: float


@dataclasses.dataclass(repr=False, eq=False)
class Lemma2JacobianBound(Result):
    """Lemma 2's Jacobian bound, tight and loose."""
    tight: float
    loose: float


@dataclasses.dataclass(repr=False, eq=False)
class GradientSensitivity(Result):
    """Finite-difference gradient sensitivity: the largest value, its head, and the value per head."""
    value: float
    head: int
    per_head: Array


@dataclasses.dataclass(repr=False, eq=False)
class ExactJacobianNorm(Result):
    """Exact Jacobian norms: the largest head mean, the largest row, and the mean per head."""
    max_of_head_means: float
    max_over_rows: float
    per_head_mean: Array


@dataclasses.dataclass(repr=False, eq=False)
class KsTest(Result):
    """Two-sample Kolmogorov-Smirnov test: statistic, p-value, whether the p-value is exact."""
    statistic: float
    p_value: float
    exact: bool


@dataclasses.dataclass(repr=False, eq=False)
class CriticalTopN(Result):
    """The first n of the grid whose p-value exceeds the level (-1 when none does), the statistics and p-values."""
    critical_n: int
    statistics: List[float]
    p_values: List[float]


@dataclasses.dataclass(repr=False, eq=False)
class WilcoxonTest(Result):
    """Wilcoxon signed-rank test: statistic, positive rank sum, nonzero differences, p-value, exactness."""
    statistic: float
    positive_rank_sum: float
    nonzero: int
    p_value: float
    exact: bool


@dataclasses.dataclass(repr=False, eq=False)
class PowerLawFit(Result):
    """y = prefactor * x ** exponent fitted in log-log space, with its r squared."""
    exponent: float
    prefactor: float
    r_squared: float


# ---- composition ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass(repr=False, eq=False)
class SinkSplit(Result):
    """Each row a = (s, (1 - s) c): the sink mass s and the content composition c."""
    sink_mass: Array
    content: Array


@dataclasses.dataclass(repr=False, eq=False)
class EntropySplit(Result):
    """H(a) = H_b(s) + s H(a_S / s) + (1 - s) H(c), per row."""
    entropy: Array
    sink_mass: Array
    binary: Array
    within_sink: Array
    content_entropy: Array
    content_term: Array
    sink_term: Array


@dataclasses.dataclass(repr=False, eq=False)
class AitchisonSplit(Result):
    """d_A(a, b)^2 split into the sink, within-sink and content terms, per row."""
    distance_squared: Array
    sink_term: Array
    within_sink_term: Array
    content_term: Array


@dataclasses.dataclass(repr=False, eq=False)
class JsSplit(Result):
    """Jensen-Shannon divergence split into the sink, within-sink and content terms, per row."""
    divergence: Array
    sink_term: Array
    within_sink_term: Array
    content_term: Array
    content_divergence: Array


@dataclasses.dataclass(repr=False, eq=False)
class CosineConventions(Result):
    """Cosine similarity of the rows with the sink kept and dropped."""
    keep: Array
    drop: Array


@dataclasses.dataclass(repr=False, eq=False)
class ChannelSummary(Result):
    """Means over the rows of one head: sink mass, entropy, content entropy and the sink's share of the entropy."""
    mean_sink_mass: float
    mean_entropy: float
    mean_content_entropy: float
    sink_share_of_entropy: float


@dataclasses.dataclass(repr=False, eq=False)
class HeadScores(Result):
    """Per head: sink mass, content entropy, raw entropy and content redundancy."""
    sink_mass: Array
    content_entropy: Array
    raw_entropy: Array
    content_redundancy: Array


@dataclasses.dataclass(repr=False, eq=False)
class PairMetricMatrices(Result):
    """Head-by-head metric matrices with the sink kept and dropped."""
    keep: Array
    drop: Array


@dataclasses.dataclass(repr=False, eq=False)
class FlipRate(Result):
    """How often the two conventions order the units differently: units, ties, flips and the rate."""
    units: int
    ties: int
    flips: int
    rate: float


# ---- logits ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(repr=False, eq=False)
class FitResult(Result):
    """A fitted query-key model: factors, inputs, logits and attention, the optimizer's log and parameters."""
    queries: Array
    keys: Array
    query_weights: Array
    key_weights: Array
    inputs: Array
    logits: Array
    attention: Array
    model_attention: Array
    log: Dict[str, Any]
    parameters: Dict[str, Any]
    reached_target: bool
    diverged: bool


@dataclasses.dataclass(repr=False, eq=False)
class LogitGapRows(Result):
    """Per row: the logit gap, the mass outside the band and the lower bound."""
    row: Array
    gap: Array
    out_of_band_mass: Array
    lower_bound: Array


@dataclasses.dataclass(repr=False, eq=False)
class RoundingError(Result):
    """Largest absolute and relative rounding errors, and the number of overflows."""
    max_absolute: float
    max_relative: float
    overflow_count: int


@dataclasses.dataclass(repr=False, eq=False)
class LogitExtremes(Result):
    """The largest visible logit and the largest visible |logit|."""
    max_logit: float
    max_abs_logit: float


# ---- normalize ------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(repr=False, eq=False)
class JacobianNormBounds(Result):
    """Per-row lower and upper bounds of the Jacobian's spectral norm."""
    lower: Array
    upper: Array


# ---- stream and model -----------------------------------------------------------------------------------------------
@dataclasses.dataclass(repr=False, eq=False)
class RowStatistics(Result):
    """Per-row statistics of attention computed without the L x L matrix (arrays of one head, or [layers, heads, L])."""
    max_scaled_logit: Array
    log_partition: Array
    entropy: Array
    sink_mass: Array
    max_weight: Array
    jacobian_norm: Array
    top_k_mass: Array
    top_k: List[int]
    visible_keys: Array


@dataclasses.dataclass(repr=False, eq=False)
class ForwardRowStatistics(Result):
    """A forward pass with row statistics: the logits, the statistics of every head and the positions run."""
    logits: Array
    row_statistics: RowStatistics
    trained_positions: int
    beyond_trained_positions: int


@dataclasses.dataclass(repr=False, eq=False)
class Summary(Result):
    """Count, mean, min, max and quantiles (at the given probabilities) of a statistic."""
    count: int
    mean: float
    min: float
    max: float
    probabilities: List[float]
    quantiles: List[float]


@dataclasses.dataclass(repr=False, eq=False)
class PositionCurve(Result):
    """Mean of a per-row statistic over bins of positions."""
    first_row: List[int]
    end_row: List[int]
    position: Array
    mean: Array


AnyResult = Union[Result, HeadTable]
