"""linalg.LinAlgError: raised (as a RuntimeError subclass) where PyTorch raises it, eagerly and compiled."""

import pytest
import torch

import munet


@pytest.mark.parametrize(
    "name,make",
    [
        ("inv", lambda lib: (lib.zeros(2, 2),)),
        ("solve", lambda lib: (lib.zeros(2, 2), lib.ones(2))),
        ("cholesky", lambda lib: (-lib.eye(3),)),
    ],
)
def test_linalg_error_matches_torch(name, make):
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        getattr(torch.linalg, name)(*make(torch))
    with pytest.raises(munet.linalg.LinAlgError) as mine:
        getattr(munet.linalg, name)(*make(munet))
    assert str(theirs.value).removeprefix("torch.") == str(mine.value)
    assert isinstance(mine.value, RuntimeError)


def test_linalg_error_in_compiled_code():
    compiled = munet.compile(lambda a: munet.linalg.inv(a))
    with pytest.raises(munet.linalg.LinAlgError, match="singular"):
        compiled(munet.zeros(2, 2))


def test_lu_factor_raises_a_plain_runtime_error_as_torch():
    with pytest.raises(RuntimeError) as theirs:
        torch.linalg.lu_factor(torch.zeros(2, 2))
    with pytest.raises(RuntimeError) as mine:
        munet.linalg.lu_factor(munet.zeros(2, 2))
    assert not isinstance(theirs.value, torch.linalg.LinAlgError)
    assert not isinstance(mine.value, munet.linalg.LinAlgError)
