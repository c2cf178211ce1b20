"""munet.set_num_threads changes NumPy's BLAS thread count at run time."""

import pytest

import munet


def test_set_and_get_num_threads():
    before = munet.get_num_threads()
    try:
        munet.set_num_threads(1)
        assert munet.get_num_threads() == 1
        munet.set_num_threads(2)
        assert munet.get_num_threads() == 2
    finally:
        munet.set_num_threads(before)
    with pytest.raises(ValueError, match="positive integer"):
        munet.set_num_threads(0)
