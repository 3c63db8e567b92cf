"""Observers and calibrators: pick quantization parameters from a stream of batches.

torch.ao's observers, bit for bit: :class:`MinMaxObserver`,
:class:`MovingAverageMinMaxObserver`, :class:`PerChannelMinMaxObserver`,
:class:`HistogramObserver`; and the histogram calibrators of inference engines
(NVIDIA pytorch-quantization): :class:`PercentileCalibrator`,
:class:`EntropyCalibrator`, :class:`MSECalibrator`. Each has ``update(x)`` (or
call it), ``calculate_qparams()``, ``reset()``, ``state_dict()`` /
``load_state_dict()`` and ``merge(other)``, and keeps bounded memory.

Example:
    >>> import numpy as np, bitnet_go
    >>> from bitnet_go.quantization import MinMaxObserver
    >>> obs = MinMaxObserver("int8", "symmetric")
    >>> for batch in np.split(np.linspace(-2, 2, 8, dtype=np.float32), 2):
    ...     obs.update(batch)
    >>> bitnet_go.quantize(np.float32([-2, 0, 2]), "int8", observer=obs).int_repr()
    array([-127,    0,  127], dtype=int8)
"""

from ._api import Mapping, QDtype, Scheme
from ._calibrators import EntropyCalibrator, MSECalibrator, PercentileCalibrator
from ._observers import HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver

__all__ = [
    "EntropyCalibrator",
    "HistogramObserver",
    "MSECalibrator",
    "Mapping",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "PercentileCalibrator",
    "QDtype",
    "Scheme",
]
