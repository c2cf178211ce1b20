"""The demo trains, checkpoints and reloads (a short run; `make demo` runs the full one)."""

from munet.demo import train


def test_short_demo_run(tmp_path, capsys):
    result = train(epochs=2, out_dir=str(tmp_path))
    assert result["test_acc"] > 0.8
    assert result["reloaded_acc"] == result["test_acc"]
    assert (tmp_path / "digits_cnn.safetensors").exists()
    out = capsys.readouterr().out
    assert "validation accuracy" in out and "reloaded model scores" in out
