"""The `munet` command."""

from munet.cli import main


def test_info_lists_backends_and_reasons(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "MuNet" in out and "cpu  NumPy" in out
    assert "vulkan" in out and "cuda: unavailable" in out
