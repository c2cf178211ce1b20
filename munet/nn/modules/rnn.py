"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

Parameter names, shapes, registration order and initialization are PyTorch's
(``weight_ih_l{k}{_reverse}``, ``weight_hh_l...``, ``bias_ih_l...``, ``bias_hh_l...``,
``weight_hr_l...`` for a projected LSTM; every parameter uniform in
``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``), so PyTorch state dicts load unchanged.

The sequence layers run a Python loop over time steps; each step is batched matrix work
(the input projection of a whole layer is one matmul done before the loop). Gate order is
PyTorch's: LSTM ``(i, f, g, o)``, GRU ``(r, z, n)``. A ``PackedSequence`` input runs over its
padded, length-sorted steps, where only the first ``batch_sizes[t]`` sequences take step ``t``
(``RNNBase.forward`` unpacks and repacks; each layer's ``_forward_steps`` is the recurrence).
"""

from __future__ import annotations

import math
import numbers
import warnings

import munet
import munet.nn.functional as F
from munet._tensor import Tensor
from munet.nn import init
from munet.nn.module import Module
from munet.nn.parameter import Parameter
from munet.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# one time step of each cell; ``gi`` is the input projection x @ W_ih^T + b_ih, already computed --------
def _rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh, relu: bool) -> Tensor:
    pre = gi + F.linear(h, w_hh, b_hh)
    return F.relu(pre) if relu else F.tanh(pre)


def _lstm_step(gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh, w_hr=None) -> tuple[Tensor, Tensor]:
    gates = gi + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, dim=-1)
    c_next = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h_next = F.sigmoid(o) * F.tanh(c_next)
    if w_hr is not None:
        h_next = F.linear(h_next, w_hr)
    return h_next, c_next


def _gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh) -> Tensor:
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r = F.sigmoid(i_r + h_r)
    z = F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def _step(mode: str, gi: Tensor, state: tuple, w_hh: Tensor, b_hh, w_hr) -> tuple:
    if mode == "LSTM":
        return _lstm_step(gi, state[0], state[1], w_hh, b_hh, w_hr)
    if mode == "GRU":
        return (_gru_step(gi, state[0], w_hh, b_hh),)
    return (_rnn_step(gi, state[0], w_hh, b_hh, relu=mode == "RNN_RELU"),)


def cell_step(mode: str, input: Tensor, state: tuple, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> tuple:
    """One step of a ``mode`` cell from ``input`` and the state tuple (``(h,)`` or ``(h, c)``); the new state tuple."""
    return _step(mode, F.linear(input, w_ih, b_ih), state, w_hh, b_hh, None)


def _run_direction(mode: str, input: Tensor, state: tuple, weights: list, has_biases: bool, has_proj: bool,
                   reverse: bool, batch_sizes=None):  # fmt: skip
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    w_hr = weights[-1] if has_proj else None
    projected = F.linear(input, w_ih, b_ih)  # (T, B, gates): one matmul for the whole sequence
    steps = range(input.size(0) - 1, -1, -1) if reverse else range(input.size(0))
    outputs = [None] * input.size(0)
    for t in steps:
        running = input.size(1) if batch_sizes is None else batch_sizes[t]
        if running == input.size(1):
            state = _step(mode, projected[t], state, w_hh, b_hh, w_hr)
        else:  # a sequence that ended (or, reversed, has not started) keeps its state
            stepped = _step(mode, projected[t][:running], tuple(s[:running] for s in state), w_hh, b_hh, w_hr)
            state = tuple(munet.cat([new, old[running:]]) for new, old in zip(stepped, state))
        outputs[t] = state[0]
    return munet.stack(outputs, dim=0), state


def run_layers(
    mode: str,
    input: Tensor,
    states: list[tuple[Tensor, ...]],
    weights: list[list[Tensor]],
    *,
    num_layers: int,
    bidirectional: bool,
    has_biases: bool,
    has_proj: bool,
    dropout: float,
    training: bool,
    batch_sizes: list[int] | None = None,
) -> tuple[Tensor, list[tuple[Tensor, ...]]]:
    """Run ``num_layers`` recurrent layers of ``mode`` (``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"``,
    ``"GRU"``) over ``input`` (T, B, F). For layer ``k`` and direction ``d`` (D directions),
    ``weights[k * D + d]`` is ``[w_ih, w_hh, (b_ih, b_hh), (w_hr)]`` and ``states[k * D + d]`` the initial
    state tuple. Dropout with probability ``dropout`` follows every layer but the last when
    ``training``. With ``batch_sizes`` (a packed batch, sorted by decreasing length) only the first
    ``batch_sizes[t]`` sequences take step ``t``; the others keep their state."""
    num_directions = 2 if bidirectional else 1
    finals = []
    layer_input = input
    for layer in range(num_layers):
        outputs = []
        for direction in range(num_directions):
            idx = layer * num_directions + direction
            out, final = _run_direction(
                mode, layer_input, states[idx], weights[idx], has_biases, has_proj, direction == 1, batch_sizes
            )
            outputs.append(out)
            finals.append(final)
        layer_input = outputs[0] if num_directions == 1 else munet.cat(outputs, dim=-1)
        if dropout > 0 and training and layer < num_layers - 1:
            layer_input = F.dropout(layer_input, dropout, training=True)
    return layer_input, finals


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU: parameters, checks, the layer/direction loop."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                stacklevel=3,
            )
        _check_sizes(input_size, hidden_size, num_layers, bias, batch_first, proj_size)
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        factory = {"device": device, "dtype": dtype}
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
            for direction in range(num_directions):
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input_size)), ("weight_hh", (gate_size, real_hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                names = []
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(munet.empty(shape, **factory)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op kept for PyTorch compatibility (there are no cuDNN flat buffers)."""

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # input checks ----------------------------------------------------------------------------------
    def _name(self) -> str:
        return type(self).__name__

    def check_input(self, input: Tensor) -> None:
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            raise ValueError(
                f"{self._name()}: input dtype ({input.dtype.name}) does not match weight dtype "
                f"({weight.dtype.name}). Convert input: input.to({weight.dtype.name}), or convert model: "
                f"model.to({input.dtype.name})"
            )
        if input.dim() != 3:
            raise RuntimeError(f"{self._name()}: input must have 3 dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"{self._name()}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {input.size(-1)}"
            )

    def _hidden_shape(self, batch: int, size: int) -> tuple[int, int, int]:
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def _check_hidden(self, hx: Tensor, expected: tuple, what: str = "hidden") -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"{self._name()}: Expected {what} size {expected}, got {list(hx.shape)}")

    def _batch_input(self, input: Tensor) -> tuple[Tensor, bool]:
        """``input`` as (T, B, F) plus whether it was batched."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._name()}: expected input to be a Tensor, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{self._name()}: Expected input to be 2D or 3D, got {input.dim()}D tensor instead")
        is_batched = input.dim() == 3
        if not is_batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        return input, is_batched

    def _check_hx_rank(self, hx: Tensor, is_batched: bool, what: str = "hx") -> Tensor:
        if is_batched and hx.dim() != 3:
            raise RuntimeError(f"For batched 3-D input, {what} should also be 3-D but got {hx.dim()}-D tensor")
        if not is_batched:
            if hx.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, {what} should also be 2-D but got {hx.dim()}-D tensor")
            hx = hx.unsqueeze(1)
        return hx

    def _restore_output(self, output: Tensor, is_batched: bool) -> Tensor:
        if not is_batched:
            return output.squeeze(1)
        return output.transpose(0, 1) if self.batch_first else output

    # the recurrence ----------------------------------------------------------------------------------
    def _run(
        self, input: Tensor, states: list[tuple[Tensor, ...]], batch_sizes: list[int] | None = None
    ) -> tuple[Tensor, list[tuple[Tensor, ...]]]:
        return run_layers(
            self.mode,
            input,
            states,
            self.all_weights,
            num_layers=self.num_layers,
            bidirectional=self.bidirectional,
            has_biases=self.bias,
            has_proj=self.proj_size > 0,
            dropout=self.dropout,
            training=self.training,
            batch_sizes=batch_sizes,
        )

    def forward(self, input, hx=None):
        """``(output, hidden)``: the output of the last layer at every step, and the final state
        (``h_n``, or ``(h_n, c_n)`` for LSTM). A :class:`PackedSequence` input gives a packed output;
        ``hx`` and ``hidden`` are then in the original batch order, as in PyTorch."""
        if isinstance(input, PackedSequence):
            steps, batch_sizes, hx = self._unpack(input, hx)
            output, hidden = self._forward_steps(steps, hx, True, batch_sizes)
            return self._repack(output, input, hidden)
        steps, is_batched = self._batch_input(input)
        output, hidden = self._forward_steps(steps, hx, is_batched)
        return self._restore_output(output, is_batched), hidden

    def _unpack(self, input, hx):
        """A packed ``input`` as padded (T, B, F) steps in sorted order, its batch sizes, and ``hx``
        (a tensor or a tuple of them) permuted into that order."""
        steps, _ = pad_packed_sequence(PackedSequence(input.data, input.batch_sizes))
        if hx is not None and input.sorted_indices is not None:
            hx = _permute_hidden(hx, input.sorted_indices)
        return steps, input.batch_sizes.tolist(), hx

    def _repack(self, output: Tensor, input: PackedSequence, hidden):
        """The padded sorted ``output`` packed like ``input``, and ``hidden`` in the original order."""
        batch_sizes = input.batch_sizes.tolist()
        lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch_sizes[0])]
        data = pack_padded_sequence(output, lengths).data
        if input.unsorted_indices is not None:
            hidden = _permute_hidden(hidden, input.unsorted_indices)
        return PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices), hidden


def _permute_hidden(hx, permutation: Tensor):
    """``hx`` (or each of ``(h, c)``) reordered along the batch dimension."""
    if isinstance(hx, (tuple, list)):
        return type(hx)(h.index_select(1, permutation) for h in hx)
    return hx.index_select(1, permutation)


def _check_sizes(input_size, hidden_size, num_layers, bias, batch_first, proj_size) -> None:
    if not isinstance(bias, bool):
        raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
    if not isinstance(batch_first, bool):
        raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
    if not isinstance(input_size, int):
        raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
    if input_size <= 0:
        raise ValueError("input_size must be greater than zero")
    if not isinstance(hidden_size, int):
        raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one hidden state ``h`` of shape (num_layers * num_directions, B, hidden_size)."""

    def _forward_steps(self, input: Tensor, hx, is_batched: bool, batch_sizes=None):
        self.check_input(input)
        expected = self._hidden_shape(input.size(1), self.hidden_size)
        if hx is None:
            hx = munet.zeros(expected, dtype=input.dtype, device=input.device)
        else:
            hx = self._check_hx_rank(hx, is_batched)
            self._check_hidden(hx, expected)
        output, finals = self._run(input, [(h,) for h in hx.unbind(0)], batch_sizes)
        h_n = munet.stack([f[0] for f in finals], dim=0)
        return output, (h_n if is_batched else h_n.squeeze(1))


class RNN(_SingleStateRNN):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``; ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class GRU(_SingleStateRNN):
    """Gated recurrent unit (PyTorch's formulation, gates ``r, z, n``).

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False)``; ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory (gates ``i, f, g, o``), with an optional output projection ``proj_size``.

    ``forward(input, hx=None) -> (output, (h_n, c_n))``; ``hx`` is ``(h_0, c_0)``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _forward_steps(self, input: Tensor, hx, is_batched: bool, batch_sizes=None):
        self.check_input(input)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h_shape = self._hidden_shape(input.size(1), real_hidden)
        c_shape = self._hidden_shape(input.size(1), self.hidden_size)
        if hx is None:
            h0 = munet.zeros(h_shape, dtype=input.dtype, device=input.device)
            c0 = munet.zeros(c_shape, dtype=input.dtype, device=input.device)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: expected hx to be a tuple (h_0, c_0)")
            if is_batched and (hx[0].dim() != 3 or hx[1].dim() != 3):
                raise RuntimeError(
                    "For batched 3-D input, hx and cx should also be 3-D but got "
                    f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors"
                )
            if not is_batched and (hx[0].dim() != 2 or hx[1].dim() != 2):
                raise RuntimeError(
                    "For unbatched 2-D input, hx and cx should also be 2-D but got "
                    f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors"
                )
            h0, c0 = (hx[0], hx[1]) if is_batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
            self._check_hidden(h0, h_shape, "hidden[0]")
            self._check_hidden(c0, c_shape, "hidden[1]")
        states = list(zip(h0.unbind(0), c0.unbind(0)))
        output, finals = self._run(input, states, batch_sizes)
        h_n = munet.stack([f[0] for f in finals], dim=0)
        c_n = munet.stack([f[1] for f in finals], dim=0)
        if not is_batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


# cells -----------------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Parameters ``weight_ih`` (chunks * hidden, input), ``weight_hh`` (chunks * hidden, hidden), biases."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        factory = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(munet.empty((num_chunks * hidden_size, input_size), **factory))
        self.weight_hh = Parameter(munet.empty((num_chunks * hidden_size, hidden_size), **factory))
        if bias:
            self.bias_ih = Parameter(munet.empty(num_chunks * hidden_size, **factory))
            self.bias_hh = Parameter(munet.empty(num_chunks * hidden_size, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input: Tensor, hx, name: str):
        """Check ranks; return ``(input, hx, is_batched)`` with a batch dim added when unbatched."""
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(
                f"{name}: input has inconsistent input_size: got {input.size(-1)} expected {self.input_size}"
            )
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            return input, None, is_batched
        hs = hx if isinstance(hx, (tuple, list)) else (hx,)
        out = []
        for idx, h in enumerate(hs):
            what = f"hx[{idx}]" if isinstance(hx, (tuple, list)) else "hidden"
            if h.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.dim()}D instead")
            h = h if is_batched else h.unsqueeze(0)
            if tuple(h.shape) != (input.size(0), self.hidden_size):
                raise RuntimeError(
                    f"{name}: Expected {what} of shape {(input.size(0), self.hidden_size)}, got {list(h.shape)}"
                )
            out.append(h)
        return input, (tuple(out) if isinstance(hx, (tuple, list)) else out[0]), is_batched

    def _zeros(self, input: Tensor) -> Tensor:
        return munet.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None, dtype=None
    ):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, hx, is_batched = self._prepare(input, hx, "RNNCell")
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"RNNCell: Unknown nonlinearity: {self.nonlinearity}")
        hx = self._zeros(input) if hx is None else hx
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        out = _rnn_step(gi, hx, self.weight_hh, self.bias_hh, relu=self.nonlinearity == "relu")
        return out if is_batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c)) -> (h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTMCell: expected hx to be a tuple (h, c)")
        input, hx, is_batched = self._prepare(input, hx, "LSTMCell")
        if hx is None:
            zeros = self._zeros(input)
            hx = (zeros, zeros)
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        h, c = _lstm_step(gi, hx[0], hx[1], self.weight_hh, self.bias_hh)
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``forward(input, h) -> h'``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, hx, is_batched = self._prepare(input, hx, "GRUCell")
        hx = self._zeros(input) if hx is None else hx
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        out = _gru_step(gi, hx, self.weight_hh, self.bias_hh)
        return out if is_batched else out.squeeze(0)
