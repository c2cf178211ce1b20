"""This thread's grad mode and inference mode: the state ``munet.autograd.grad_mode`` switches,
kept apart so that ``Tensor`` (which marks tensors made in inference mode) can read it without
importing autograd."""

from __future__ import annotations

import threading


class GradModeState(threading.local):
    """This thread's grad mode. The class attributes are the defaults every thread starts
    with; assigning one gives the current thread its own value (cheap to read in ``apply``)."""

    enabled = True
    inference = False


STATE = GradModeState()
