"""The README's first example runs and does what it says."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_and_fits(capsys):
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    w = namespace["w"].detach().view(-1).tolist()
    assert abs(w[0] - 2.0) < 0.1 and abs(w[1] + 1.0) < 0.1 and abs(w[2] - 0.5) < 0.1
    assert namespace["loss"].item() < 0.05
