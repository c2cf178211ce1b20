"""``BinaryParameters``: the probs-or-logits parameterization of Bernoulli-like distributions."""

from numbers import Number

from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits


def check_exactly_one(probs, logits, name: str) -> None:
    """Raise ``ValueError`` unless exactly one of ``probs`` and ``logits`` is given (PyTorch's message)."""
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: either `probs` or `logits` must be specified, but not both.")


class BinaryParameters:
    """Mixin: one of ``probs`` and ``logits`` is stored, the other computed on first access."""

    def _set_probs_or_logits(self, probs, logits, name: str) -> tuple:
        """Store the given parameterization as a tensor; returns it and whether a number was given."""
        check_exactly_one(probs, logits, name)
        given = "probs" if probs is not None else "logits"
        value = probs if probs is not None else logits
        (tensor,) = broadcast_all(value)
        setattr(self, given, tensor)
        self._param = tensor
        return tensor, isinstance(value, Number)

    def _reset_param_after_expand(self) -> None:
        self._param = self.__dict__.get("probs", self.__dict__.get("logits"))

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)
