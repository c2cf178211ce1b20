"""The chi-squared distribution ``Chi2(df)``: ``Gamma(df / 2, 1 / 2)``."""

from . import constraints
from .gamma import Gamma


class Chi2(Gamma):
    """Chi-squared distribution with ``df`` degrees of freedom."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
