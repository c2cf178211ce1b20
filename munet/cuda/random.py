"""Seeding of the cuda default generator (``munet.cuda.manual_seed``); works without a GPU.

MuNet has one default generator per device type (``munet.ops.random.default_generator_for``),
so the per-device and all-device functions of PyTorch act on the same one; ``munet.manual_seed``
seeds it too.
"""

from __future__ import annotations

from collections.abc import Sequence

from munet.ops.random import default_generator_for


def _generator():
    return default_generator_for("cuda")


def manual_seed(seed) -> None:
    _generator().manual_seed(seed)


def manual_seed_all(seed) -> None:
    _generator().manual_seed(seed)


def seed() -> None:
    """Seed the cuda generator from the operating system's entropy."""
    _generator().seed()


def seed_all() -> None:
    _generator().seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device="cuda"):
    """The cuda generator's state as a uint8 cpu tensor (``set_rng_state`` takes it back)."""
    return _generator().get_state()


def set_rng_state(new_state, device="cuda") -> None:
    _generator().set_state(new_state)


def get_rng_state_all() -> list:
    from munet.cuda.devices import device_count

    return [get_rng_state() for _ in range(max(device_count(), 1))]


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


class _DefaultGenerators(Sequence):
    """``munet.cuda.default_generators``: one entry per visible device, each the one cuda generator
    (MuNet has one default generator per device type); empty without CUDA."""

    def _items(self) -> tuple:
        from munet.cuda.devices import device_count

        return (_generator(),) * device_count()

    def __len__(self) -> int:
        return len(self._items())

    def __getitem__(self, index):
        return self._items()[index]

    def __repr__(self) -> str:
        return repr(self._items())


default_generators = _DefaultGenerators()
