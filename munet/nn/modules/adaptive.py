"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al., 2016): a softmax over many classes split into a
frequent-class head and lower-dimensional tail clusters, with PyTorch's parameters and outputs."""

from __future__ import annotations

from collections import namedtuple

import munet
from munet.nn import functional as F
from munet.nn.containers import ModuleList, Sequential
from munet.nn.module import Module
from munet.nn.modules.linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """``forward(input, target) -> (output, loss)``: the target log-probabilities and their negated mean.

    The head scores the ``cutoffs[0]`` most frequent classes plus one logit per cluster; cluster
    ``i`` projects to ``in_features // div_value ** (i + 1)`` features before its own softmax.
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where "
                "each value is between 1 and n_classes-1"
            )
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // div_value ** (i + 1))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))  # fmt: skip

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_) -> _ASMoutput:
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(
                    f"1D target tensor expects 2D input tensors, but found inputs with size {input_.size()}"
                )
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(
                    f"0D target tensor expects 1D input tensors, but found inputs with size {input_.size()}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        is_batched = target_.dim() > 0
        input = input_ if is_batched else input_.unsqueeze(0)
        target = target_ if is_batched else target_.unsqueeze(0)
        batch_size = target.size(0)
        output = input.new_zeros(batch_size)
        gather_inds = target.new_zeros(batch_size)
        used_rows = 0
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            mask = (target >= bounds[i]) & (target < bounds[i + 1])
            rows = mask.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds = gather_inds.index_copy(0, rows, target[mask])
            else:
                cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
                local = cluster_logprob.gather(1, (target[mask] - bounds[i]).unsqueeze(1)).squeeze(1)
                gather_inds = gather_inds.index_fill(0, rows, self.shortlist_size + i - 1)
                output = output.index_copy(0, rows, local)
            used_rows += rows.numel()
        if used_rows != batch_size:
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{target.min().item()}, {target.max().item()}] were found. "
            )
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if is_batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return munet.cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of every class: ``(N, n_classes)``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row (the head decides where it can, as PyTorch)."""
        head_output = self.head(input)
        output = munet.argmax(head_output, dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return munet.argmax(self._get_full_log_prob(input, head_output), dim=1)
        log_prob = self._get_full_log_prob(input[not_in_shortlist], head_output[not_in_shortlist])
        output[not_in_shortlist] = munet.argmax(log_prob, dim=1)
        return output
