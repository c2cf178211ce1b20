"""munet/compiler/trace.py: in-place ops under munet.compile take eager's path, checks included."""

import pytest

import munet


def _leaf():
    return munet.tensor([1.0, 2.0, 3.0], requires_grad=True)


def test_inplace_on_a_view_of_a_leaf_raises_under_compile_as_in_eager():
    w = _leaf()
    x = munet.tensor([2.0, 2.0])

    def step(x):
        v = w[:2]
        v.mul_(x)
        return v.sum()

    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        step(x)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        munet.compile(step)(x)


def test_inplace_on_a_leaf_raises_under_compile_as_in_eager():
    w = _leaf()

    def step(x):
        w.add_(x)
        return w.sum()

    x = munet.tensor([1.0, 1.0, 1.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        step(x)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        munet.compile(step)(x)


def test_inplace_on_a_view_of_a_leaf_under_no_grad_compiles_and_matches_eager():
    def make_step(w):
        def step(x):
            with munet.no_grad():
                w[:2].mul_(x)
            return w * 1

        return step

    x = munet.tensor([2.0, 3.0])
    eager_w, compiled_w = _leaf(), _leaf()
    make_step(eager_w)(x)
    munet.compile(make_step(compiled_w))(x)
    assert compiled_w.tolist() == eager_w.tolist() == [2.0, 6.0, 3.0]


def _sgd_update(w, g):
    with munet.no_grad():
        w.sub_(0.1 * g)


@pytest.mark.parametrize("make", [lambda: munet.nn.Parameter(munet.ones(3)), lambda: munet.ones(3)])
def test_inplace_write_into_an_argument_is_written_back_as_in_eager(make):
    g = munet.tensor([1.0, 2.0, 3.0])
    eager_w, compiled_w = make(), make()
    step = munet.compile(_sgd_update)
    for _ in range(3):  # the first call traces, later ones replay the plan
        _sgd_update(eager_w, g)
        step(compiled_w, g)
        assert compiled_w.tolist() == eager_w.tolist()
    assert eager_w.tolist() != [1.0, 1.0, 1.0]


def test_inplace_write_into_a_strided_argument_and_through_a_view_of_one():
    def step(w, x):
        with munet.no_grad():
            w[1:].mul_(x)

    base_eager, base_compiled = munet.ones(3, 2), munet.ones(3, 2)
    x = munet.tensor([2.0, 3.0])
    compiled = munet.compile(step)
    for _ in range(2):
        step(base_eager[:, 1], x)
        compiled(base_compiled[:, 1], x)
    assert base_compiled.tolist() == base_eager.tolist() == [[1.0, 1.0], [1.0, 4.0], [1.0, 9.0]]


def test_inplace_write_into_an_argument_on_vulkan(vulkan):
    g = munet.tensor([1.0, 2.0, 3.0])
    w = munet.ones(3, device=vulkan)
    step = munet.compile(_sgd_update)
    step(w, g.to(vulkan))
    step(w, g.to(vulkan))
    assert w.cpu().tolist() == pytest.approx([0.8, 0.6, 0.4])


def test_saving_a_step_that_writes_into_an_argument_is_refused(tmp_path):
    step = munet.compile(_sgd_update)
    step(munet.ones(3), munet.ones(3))
    with pytest.raises(RuntimeError, match=r"writes in place into tensor argument\(s\) \[0\]"):
        munet.save(step, tmp_path / "step.munet")


def test_only_the_dispatcher_asks_for_the_tracer():
    """Tracing is a mode of apply (#11): library code outside munet/compiler never reads ``_Tracing``."""
    from pathlib import Path

    root = Path(munet.__file__).parent
    asking = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "compiler" not in path.relative_to(root).parts
        and path.name != "_registry.py"
        and "_Tracing" in path.read_text()
    ]
    assert not asking, f"modules that ask whether munet.compile is tracing: {asking}"
