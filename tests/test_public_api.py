"""No public MuNet function swallows an argument it does not understand.

A ``**kwargs`` catch-all that is neither forwarded nor checked turns a typo or an unsupported
PyTorch option into silently wrong results (``zeros(size=(2, 1))`` once returned a 0-dim tensor).
The walk below reads the source of every public callable of MuNet's namespaces, Tensor and Module
methods included, and fails on a ``**`` parameter the body never hands on or checks.
"""

import ast
import inspect
import textwrap
import types

import pytest
import torch

import munet
import munet.amp
import munet.autograd
import munet.nn
import munet.nn.functional
import munet.nn.init
import munet.nn.utils
import munet.optim
import munet.optim.lr_scheduler
import munet.optim.swa_utils
import munet.utils.checkpoint
import munet.utils.data

NAMESPACES = [
    munet,
    munet.nn,
    munet.nn.functional,
    munet.nn.init,
    munet.nn.utils,
    munet.optim,
    munet.optim.lr_scheduler,
    munet.optim.swa_utils,
    munet.utils.checkpoint,
    munet.utils.data,
    munet.autograd,
    munet.amp,
]

# Catch-alls that are right as they are, each for the reason given.
ALLOWED = {
    # the default forward of a Module subclass that does not define one: it raises
    # NotImplementedError whatever it is given, as PyTorch's does
    "munet.nn.module.Module.forward",
    # containers have no forward; calling one raises NotImplementedError for any arguments
    "munet.nn.containers.ModuleList.forward",
    "munet.nn.containers.ModuleDict.forward",
    "munet.nn.containers.ParameterList.forward",
    "munet.nn.containers.ParameterDict.forward",
    # the abstract forward of autograd.Function: subclasses define their own signature
    "munet.autograd.function.Function.forward",
    # nn.Identity is "argument-insensitive" in PyTorch: Identity(54, unused="x") is valid
    "munet.nn.modules.linear.Identity.__init__",
    # the deprecated nn.Container registers every keyword argument as a child module (it uses them all)
    "munet.nn.containers.Container.__init__",
    # torch.autograd.variable raises RuntimeError whatever it is given, as PyTorch's does
    "munet.autograd.variable.variable",
}


def public_callables():
    """(qualified name, function) for every public function and method reachable from the namespaces."""
    classes = [munet.Tensor, munet.nn.Module]
    for ns in NAMESPACES:
        for name in dir(ns):
            if name.startswith("_"):
                continue
            obj = getattr(ns, name)
            if isinstance(obj, type) and obj.__module__.startswith("munet"):
                classes.append(obj)
            else:
                yield obj
    for cls in classes:
        for klass in inspect.getmro(cls):
            if not klass.__module__.startswith("munet"):
                continue
            for name, member in vars(klass).items():
                if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                    continue
                yield member


def plain_function(obj):
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.FunctionType) and obj.__module__.startswith("munet"):
        return obj
    return None


def swallows_keywords(fn) -> bool:
    """Whether ``fn``'s ``**`` parameter is never forwarded (``f(**kw)``, ``g(kw)``) or checked
    (``if kw:``, ``sorted(kw)``): only read with ``.pop``/``.get`` or not at all."""
    var_kw = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.VAR_KEYWORD]
    if not var_kw:
        return False
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, ast.Name) and child.id == var_kw[0] and not isinstance(parent, ast.Attribute):
                return False  # handed on or tested as a whole
    return True


def test_no_public_function_swallows_unknown_keywords():
    checked, offenders = set(), set()
    for obj in public_callables():
        fn = plain_function(obj)
        if fn is None or fn in checked:
            continue
        checked.add(fn)
        name = f"{fn.__module__}.{fn.__qualname__}"
        if swallows_keywords(fn) and name not in ALLOWED:
            offenders.add(name)
    assert len(checked) > 1000, f"the walk reached only {len(checked)} functions"
    assert not offenders, f"these swallow keyword arguments they do not understand: {sorted(offenders)}"


def test_allow_list_is_current():
    """Every allowed catch-all still exists and still swallows (else it leaves the list)."""
    found = {}
    for obj in public_callables():
        fn = plain_function(obj)
        if fn is not None:
            found[f"{fn.__module__}.{fn.__qualname__}"] = fn
    for name in ALLOWED:
        assert name in found and swallows_keywords(found[name]), name


def test_the_walk_finds_a_swallowing_function():
    def quiet(x, **_ignored):
        return x

    def checked(x, **kwargs):
        if kwargs:
            raise TypeError(f"unexpected {sorted(kwargs)}")
        return x

    def pops(x, **kwargs):
        return kwargs.pop("y", x)

    quiet.__module__ = checked.__module__ = pops.__module__ = "munet.fake"
    assert swallows_keywords(quiet) and swallows_keywords(pops) and not swallows_keywords(checked)


CALLS = [
    lambda lib: lib.zeros(2, bogus=1),
    lambda lib: lib.ones(size=(2,), bogus=1),
    lambda lib: lib.tensor([1.0], bogus=1),
    lambda lib: lib.arange(3, bogus=1),
    lambda lib: lib.Tensor(2, bogus=1),
    lambda lib: lib.ones(2).sum(bogus=1),
    lambda lib: lib.ones(2).to(bogus=1),
    lambda lib: lib.ones(2).uniform_(bogus=1),
    lambda lib: lib.ones(2).random_(3, bogus=1),
    lambda lib: lib.nn.functional.relu(lib.ones(2), bogus=1),
    lambda lib: lib.nn.Linear(2, 3, bogus=1),
    lambda lib: lib.nn.Linear(2, 3).to(bogus=1),
    lambda lib: lib.nn.LSTM(2, 3, bogus=1),
    lambda lib: lib.nn.GRU(2, 3, bogus=1),
    lambda lib: lib.nn.Module(bogus=1),
    lambda lib: lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.1, bogus=1),
    lambda lib: lib.utils.data.DataLoader([1, 2], bogus=1),
    lambda lib: lib.autocast("cpu", bogus=1),
    lambda lib: lib.no_grad(bogus=1),
]


@pytest.mark.parametrize("case", range(len(CALLS)))
def test_unknown_keywords_raise_type_error_as_in_torch(case):
    with pytest.raises(TypeError):
        CALLS[case](torch)
    with pytest.raises(TypeError):
        CALLS[case](munet)


def test_identity_ignores_its_arguments_as_in_torch():
    for lib in (torch, munet):
        assert lib.nn.Identity(54, unused="argument")(lib.ones(2)).tolist() == [1.0, 1.0]
