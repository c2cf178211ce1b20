"""``SummaryWriter``: scalars, histograms and text as TensorBoard event files, through the
``tensorboard`` package's event-file writer and protocol buffers (imported when a writer is made).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np


def _tensorboard():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        raise ImportError(
            "munet.utils.tensorboard.SummaryWriter needs the tensorboard package: pip install munet[tensorboard]"
        ) from e
    return EventFileWriter, event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2


def _tensorflow_bins() -> np.ndarray:
    """PyTorch's default histogram edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    positive = 1e-12 * 1.1 ** np.arange(int(np.ceil(np.log(1e32) / np.log(1.1))))
    positive = positive[positive < 1e20]
    return np.concatenate([-positive[::-1], [0.0], positive])


def _as_numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


class SummaryWriter:
    """Writes event files under ``log_dir`` (default ``runs/<date>_<host><comment>``), read by
    TensorBoard. Events are queued and written every ``flush_secs``, on ``flush()`` and ``close()``."""

    def __init__(
        self, log_dir=None, comment: str = "", max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = ""
    ):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self._options = dict(max_queue_size=max_queue, flush_secs=flush_secs, filename_suffix=filename_suffix)
        self._pb = _tensorboard()
        self._writer = self._pb[0](self.log_dir, **self._options)
        self._children: dict[str, object] = {}

    def get_logdir(self) -> str:
        return self.log_dir

    def _write(self, value, global_step, walltime, writer=None) -> None:
        event_pb2, summary_pb2 = self._pb[1], self._pb[2]
        event = event_pb2.Event(summary=summary_pb2.Summary(value=[value]))
        event.wall_time = time.time() if walltime is None else walltime
        if global_step is not None:
            event.step = int(global_step)
        (writer or self._writer).add_event(event)

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None) -> None:
        """One point of the curve ``tag`` (a number or a one-element tensor)."""
        value = float(scalar_value.item() if hasattr(scalar_value, "item") else scalar_value)
        self._write(self._pb[2].Summary.Value(tag=tag, simple_value=value), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None) -> None:
        """Several curves on one chart: each ``tag`` goes to the run ``<log_dir>/<main_tag>_<tag>``."""
        for tag, scalar in tag_scalar_dict.items():
            run = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            if run not in self._children:
                self._children[run] = self._pb[0](run, **self._options)
            value = float(scalar.item() if hasattr(scalar, "item") else scalar)
            summary = self._pb[2].Summary.Value(tag=main_tag, simple_value=value)
            self._write(summary, global_step, walltime, self._children[run])

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow", walltime=None) -> None:
        """The distribution of ``values`` (a tensor or array): ``bins`` is PyTorch's default
        'tensorflow' (exponential edges), a count, or any of NumPy's bin rules ('auto', 'fd', ...)."""
        v = _as_numpy(values)
        if v.size == 0:
            raise ValueError(f"add_histogram: the input has no element, got shape {list(np.shape(values))}")
        counts, edges = np.histogram(v, bins=_tensorflow_bins() if bins == "tensorflow" else bins)
        used = np.flatnonzero(counts)
        first, last = used[0], used[-1] + 1  # drop the empty buckets at both ends, as PyTorch does
        histogram = self._pb[2].HistogramProto(
            min=float(v.min()),
            max=float(v.max()),
            num=int(v.size),
            sum=float(v.sum()),
            sum_squares=float(np.dot(v, v)),
            bucket_limit=edges[first + 1 : last + 1].tolist(),
            bucket=counts[first:last].astype(np.float64).tolist(),
        )
        self._write(self._pb[2].Summary.Value(tag=tag, histo=histogram), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        """Markdown text shown in TensorBoard's Text tab."""
        _, _, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2 = self._pb
        metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            string_val=[text_string.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]),
        )
        value = summary_pb2.Summary.Value(tag=f"{tag}/text_summary", metadata=metadata, tensor=tensor)
        self._write(value, global_step, walltime)

    def flush(self) -> None:
        for writer in (self._writer, *self._children.values()):
            writer.flush()

    def close(self) -> None:
        for writer in (self._writer, *self._children.values()):
            writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
