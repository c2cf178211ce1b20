"""Guards on the Python values a trace read: found in the bytecode, snapshotted, checked per call.

A trace bakes every Python value it reads into the graph: ``x * scale[0]`` becomes a multiply by
the constant 2.0, ``self.eps`` a constant of the layer norm. :func:`find_guards` lists the values
the traced code can read, without running it, by walking the code objects involved:

- the function's globals (builtins excepted) and closure cells, in its nested functions too;
- attribute chains off those and off ``self`` in methods (``cfg.lr``, ``self.block.scale``),
  followed through stored attributes (``__dict__``, a module's parameters, buffers and
  submodules, a Python module's namespace, plain class attributes), never through properties
  or other descriptors;
- the methods that code calls (``self.helper(x)``, ``utils.norm(x)``): user functions are walked
  the same way, munet's own functions are not (their globals are the library);
- ``forward`` (every definition in the class's MRO, for ``super().forward``) of each module
  involved: the compiled module and its submodules, the modules the function reaches.

Each read becomes a :class:`Guard` holding a snapshot taken before the trace: plain data (None,
bool, int, float, complex, str, bytes, NumPy scalars, and tuples, lists, dicts and sets of them,
up to ``MAX_ELEMENTS`` elements) by value, deep, so a list changed in place is seen; anything
else (tensors, modules, optimizers, user functions) by identity. Python modules, classes, builtins
and munet's own functions (``F.relu``, ``np.float32``) are taken as fixed and not guarded.
Real tensors whose value the trace read on the host (``.item()``) get a :class:`VersionGuard`:
an in-place change (which bumps the storage version) retraces.

Not seen (documented in docs/compiler.md): attributes read with a computed name
(``getattr(obj, name)``), attributes of objects reached only through arguments or locals,
builtins shadowed after the trace, changes inside a container larger than ``MAX_ELEMENTS`` (it
is compared by identity), and writes to a tensor's memory that bypass munet (``t.numpy()[0] = 1``).
"""

from __future__ import annotations

import builtins
import dis
import operator
import types
import weakref
from collections import OrderedDict

import numpy as np

from munet.compiler.trace import in_munet

MAX_ELEMENTS = 1000  # elements of one guarded container compared by value; larger ones by identity
_MAX_DEPTH = 16
_MISSING = object()
_ATTRIBUTE_LOADS = {"LOAD_ATTR", "LOAD_METHOD"}
_SELF_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF"}
_PLAIN = {type(None), bool, int, float, complex, str, bytes}
_CONTAINERS = {tuple, list, dict, OrderedDict, set, frozenset}


class Guard:
    """One Python value the trace read: ``holds()`` re-reads it and compares it with the snapshot.

    ``store``/``key``: the dict the value is read from in one lookup (a module's ``__dict__``, its
    parameters, the globals), which lets :class:`GuardSet` check it without a call.
    """

    __slots__ = ("what", "_read", "_expected", "_by_value", "immutable", "_shallow", "_shown", "store", "key")

    def __init__(self, what: str, read, value, store=None, key=None):
        self.what = what
        self._read = read
        self._by_value, self._expected = _snapshot(value)
        # an immutable value (a tuple of numbers) is still equal while it is the same object
        self.immutable = value if self._by_value and _is_immutable(self._expected) else _MISSING
        self._shallow = _shallow(value, self._expected) if self._by_value else None
        self._shown = _short_repr(value) if self._by_value else f"the same {type(value).__name__} object"
        self.store, self.key = store, key

    def holds(self) -> bool:
        value = self._read()
        if value is self.immutable:
            return True
        if self._shallow is not None and _shallow_equal(value, self._shallow):  # no deep copy needed
            return True
        if self._by_value:
            return _snapshot(value) == (True, self._expected)
        return value is self._expected

    def describe(self) -> str:
        return f"{self.what} {'==' if self._by_value else 'is'} {self._shown}"


class VersionGuard:
    """A real tensor whose value the trace read on the host: valid while its memory is unchanged."""

    __slots__ = ("what", "_storage", "_version")

    def __init__(self, what: str, storage, version: int):
        self.what = what
        self._storage, self._version = storage, version

    def holds(self) -> bool:
        return self._storage.version == self._version

    def describe(self) -> str:
        return f"{self.what} is unchanged (storage version {self._version})"


class GuardSet:
    """The guards of one specialization, checked in that order at every call. Identity guards and
    guards on a scalar, read from a dict in one lookup (most of them), are checked in flat loops."""

    def __init__(self, guards: list):
        self.guards = guards
        self._same, self._scalars, self._immutables, self._others = [], [], [], []
        for g in guards:
            if not isinstance(g, Guard) or g.store is None:
                self._others.append(g)
            elif g.immutable is not _MISSING and g._expected[0] not in _PLAIN:
                self._immutables.append((g.store, g.key, g.immutable, g))
            elif not g._by_value:
                self._same.append((g.store, g.key, g._expected, g))
            elif g._expected[0] in _PLAIN and g._expected[1] == g._expected[1]:  # not NaN
                self._scalars.append((g.store, g.key, *g._expected, g))
            else:
                self._others.append(g)

    def __len__(self) -> int:
        return len(self.guards)

    def failed(self):
        """The first guard that no longer holds, or None."""
        for store, key, expected, guard in self._same:
            if store.get(key, _MISSING) is not expected:
                return guard
        for store, key, kind, expected, guard in self._scalars:
            value = store.get(key, _MISSING)
            if type(value) is not kind or value != expected:
                return guard
        for store, key, same, guard in self._immutables:  # still the same object, else compared by value
            if store.get(key, _MISSING) is not same and not guard.holds():
                return guard
        for guard in self._others:
            if not guard.holds():
                return guard
        return None


def find_guards(fn, modules, keyed_training: set) -> list[Guard]:
    """Guards on what tracing ``fn`` can read, and ``forward`` of each of ``modules`` (see the docstring).

    ``keyed_training`` holds the ids of modules whose ``training`` is already part of the cache key.
    """
    walker = _Walker(keyed_training)
    walker.callable(fn, type(fn).__name__ if isinstance(fn, _module_class()) else "")
    for m in modules:
        walker.module(m)
    return list(walker.guards.values())


class _Walker:
    def __init__(self, keyed_training: set):
        self.keyed_training = keyed_training
        self.guards: dict = {}  # (id of the base object, attribute path) -> Guard
        self._walked: set = set()  # (id(code), id(bound self))
        self._keep: list = []  # what the ids above refer to, alive while walking
        self._names: dict = {}  # id(module) -> its name in messages ("GPT.blocks.0.attn", "model.fc1")

    def callable(self, fn, name: str) -> None:
        if isinstance(fn, _module_class()):
            self._name_tree(fn, name)
            self.module(fn)
        elif isinstance(fn, types.MethodType):
            method = _user_method(fn.__self__, fn.__name__)
            if method is fn.__func__:
                self.function(method, fn.__self__, name.rpartition(".")[0] or type(fn.__self__).__name__)
        elif isinstance(fn, types.FunctionType):
            self.function(fn, None, None)
        elif _user_method(fn, "__call__") is not None:  # a callable object
            self.function(_user_method(fn, "__call__"), fn, name or type(fn).__name__)

    def module(self, m) -> None:
        """Walk every ``forward`` in ``m``'s class hierarchy (``super().forward(x)`` included)."""
        module_class = _module_class()
        name = self._names.get(id(m), type(m).__name__)
        for cls in type(m).__mro__:
            if cls is module_class or not issubclass(cls, module_class):
                break
            forward = cls.__dict__.get("forward")
            if isinstance(forward, types.FunctionType):
                self.function(forward, m, name)

    def _name_tree(self, m, name: str) -> None:
        for sub_name, sub in m.named_modules():
            self._names.setdefault(id(sub), f"{name}.{sub_name}" if sub_name else name)

    def function(self, fn, owner, owner_name) -> None:
        """Walk ``fn``'s code; ``owner`` is the object bound to its first argument (a method's self)."""
        code = fn.__code__
        if (id(code), id(owner)) in self._walked:
            return
        self._walked.add((id(code), id(owner)))
        self._keep.append((code, owner))
        library = _in_munet(code)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        self_name = code.co_varnames[0] if owner is not None and code.co_argcount else None
        for kind, name, path in _loads(code, self_name):
            if kind == "self":
                self.read(owner, "attribute", owner_name, path, _attribute)
            elif library:
                continue  # munet's own globals and closures are the library, not user state
            elif kind == "cell" and name in cells:
                self.read(cells[name], "closure variable", None, path, _cell_contents)
            elif kind == "global" and (name in fn.__globals__ or not hasattr(builtins, name)):
                self.read(fn.__globals__, "global", None, path, _dict_item)

    def read(self, base, kind: str, base_name, path: tuple, first) -> None:
        """Follow ``path`` from ``base`` through stored attributes; guard the value where it stops.

        ``first`` reads ``path[0]`` from ``base`` (a dict item, a cell's contents, an attribute).
        """
        if first is _attribute and _data_store(base, path[0]) is None:  # self.method(...) or a property
            self._walk_method(base, path[0], base_name)
            return
        readers = [first]
        value = first(base, path[0])
        taken = 1
        for name in path[1:]:
            if value is _MISSING or _data_store(value, name) is None:
                break
            readers.append(_attribute)
            value = _attribute(value, name)
            taken += 1
        followed = path[:taken]
        dotted = ".".join(([base_name] if base_name else []) + list(followed))
        if taken < len(path):  # value.method(...): walk the method with value as its self
            self._walk_method(value, path[taken], dotted)
        if followed == ("training",) and id(base) in self.keyed_training:
            return
        key = (id(base), followed)
        if _stable(value) or key in self.guards:
            return
        self._keep.append(base)
        store = None  # the dict a one-step read looks in
        if taken == 1 and first is _dict_item:
            store = base
        elif taken == 1 and first is _attribute:
            store = _store_of(base, followed[0])
        reader = _reader(base, followed, readers)
        self.guards[key] = Guard(f"{kind} '{dotted}'", reader, value, store, followed[-1])
        self.discover(value, dotted)

    def _walk_method(self, obj, name: str, obj_name: str) -> None:
        method = _user_method(obj, name)
        if method is not None:
            self.function(method, obj, obj_name)

    def discover(self, value, name: str, depth: int = 0) -> None:
        """Walk the modules and user functions a guarded value holds (``blocks = [Block(), ...]``)."""
        if isinstance(value, _module_class()):
            self._name_tree(value, name)
            self.module(value)
        elif isinstance(value, (types.FunctionType, types.MethodType)) and not _in_munet(_code_of(value)):
            self.callable(value, name)
        elif type(value) in _CONTAINERS and depth < 2 and len(value) <= MAX_ELEMENTS:
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                self.discover(v, f"{name}[{k!r}]", depth + 1)


def _loads(code, self_name) -> list[tuple]:
    """``(kind, name, attribute path)`` of each global, closure cell and ``self`` attribute ``code`` loads."""
    per_self = _LOADS.get(code)
    if per_self is None:
        per_self = _LOADS[code] = {}
    found = per_self.get(self_name)
    if found is None:
        found = per_self[self_name] = _scan(code, self_name, set(code.co_freevars))
    return found


_LOADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> {self name: loads}


def _scan(code, self_name, free: set) -> list[tuple]:
    found = []
    instructions = list(dis.get_instructions(code))
    for i, ins in enumerate(instructions):
        if ins.opname == "LOAD_GLOBAL":
            kind, name = "global", ins.argval
        elif ins.opname in _SELF_LOADS and self_name is not None and ins.argval == self_name:
            kind, name = "self", ins.argval
        elif ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in free:
            kind, name = "cell", ins.argval
        else:
            continue
        path = [name] if kind != "self" else []
        for nxt in instructions[i + 1 :]:
            if nxt.opname not in _ATTRIBUTE_LOADS:
                break
            path.append(nxt.argval)
        if path:
            found.append((kind, name, tuple(path)))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions and lambdas see the same globals and cells
            found.extend(_scan(const, self_name, free))
    return found


# reading values back --------------------------------------------------------------------------------


def _dict_item(d: dict, name: str):
    return d.get(name, _MISSING)


def _cell_contents(cell, name: str):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _store_of(obj, name: str):
    """The dict holding attribute ``name`` of ``obj`` as data, or None (a property, a method, a slot)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    if not isinstance(d, dict):
        return None
    if name in d:
        return d
    for store in ("_parameters", "_buffers", "_modules"):  # a Module's registered attributes
        values = d.get(store)
        if isinstance(values, dict) and name in values:
            return values
    return None


def _data_store(obj, name: str):
    """Where ``obj.name`` is stored as data: the instance's dict (:func:`_store_of`), else the dict of
    the class defining it when it is a plain class attribute (``eps = 1e-5`` in the class body, or
    ``Config.scale`` of a class used as a namespace), not a function, property or other descriptor."""
    store = _store_of(obj, name)
    if store is not None or isinstance(obj, types.ModuleType):
        return store
    for cls in obj.__mro__ if isinstance(obj, type) else type(obj).__mro__:  # a class used as a namespace too
        if name in cls.__dict__:
            return cls.__dict__ if not hasattr(type(cls.__dict__[name]), "__get__") else None
    return None


def _attribute(obj, name: str):
    store = _data_store(obj, name)
    return _MISSING if store is None else store[name]


def _reader(base, path: tuple, readers: list):
    """A function returning the current value at ``path`` from ``base`` (``_MISSING`` if gone)."""
    if len(path) == 1:
        first, name = readers[0], path[0]
        return lambda: first(base, name)

    def read():
        value = base
        for reader, name in zip(readers, path):
            value = reader(value, name)
            if value is _MISSING:
                break
        return value

    return read


def _user_method(obj, name: str):
    """The function behind ``obj.name(...)`` when it is worth walking: a user method, or a method of a
    munet module subclass (``self._check_input_dim``); not ``Module``'s own or other munet objects'."""
    if obj is _MISSING or isinstance(obj, (type, types.ModuleType)):
        return None
    for cls in type(obj).__mro__:
        fn = cls.__dict__.get(name)
        if fn is None:
            continue
        if not isinstance(fn, types.FunctionType) or cls is _module_class():
            return None
        if _in_munet(fn.__code__) and not isinstance(obj, _module_class()):
            return None
        return fn
    return None


def _stable(value) -> bool:
    """Values taken as fixed, never guarded: Python modules, classes, builtins, munet's functions."""
    if isinstance(value, (types.ModuleType, type, types.BuiltinFunctionType)):
        return True
    return isinstance(value, types.FunctionType) and _in_munet(value.__code__)


def _in_munet(code) -> bool:
    return code is not None and in_munet(code)


def _code_of(fn):
    return getattr(getattr(fn, "__func__", fn), "__code__", None)


def _module_class():
    from munet.nn.module import Module

    return Module


# snapshots ----------------------------------------------------------------------------------------------


class _TooLargeError(Exception):
    pass


def _snapshot(value) -> tuple:
    """``(True, a hashable copy of value)`` for plain data, ``(False, value)`` for anything else."""
    try:
        copy = _copy(value, [MAX_ELEMENTS], 0)
    except _TooLargeError:
        return False, value
    return (False, value) if copy[0] is _Same else (True, copy)


def _copy(value, budget: list, depth: int):
    kind = type(value)
    if kind in _PLAIN:
        if kind is float and value != value:
            return (float, "nan")  # NaN == NaN is False
        return (kind, value)
    if kind in _CONTAINERS:
        budget[0] -= len(value)
        if budget[0] < 0 or depth >= _MAX_DEPTH:
            raise _TooLargeError
        if kind in (dict, OrderedDict):
            return (dict, tuple((_copy(k, budget, depth + 1), _copy(v, budget, depth + 1)) for k, v in value.items()))
        items = tuple(_copy(x, budget, depth + 1) for x in value)
        return (kind, frozenset(items) if kind in (set, frozenset) else items)
    if isinstance(value, np.generic):
        return (kind, value.item())
    if kind is np.ndarray:  # an array the trace turned into a constant: compared by content while small
        budget[0] -= value.size
        if budget[0] < 0:
            raise _TooLargeError
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    return (_Same, _Same(value))


def _shallow(value, copy):
    """A flat form of a list, tuple or dict whose items are all plain scalars or all compared by
    identity (``scale = [2.0]``, ``_modules``, a list of tensors): ``(type, keys or None, items,
    item types or None for identity)``, checked by :func:`_shallow_equal` without a deep copy."""
    kind = type(value)
    if kind not in (list, tuple, dict, OrderedDict) or not value:
        return None
    if kind in (dict, OrderedDict):
        if not all(k[0] in _PLAIN for k, _ in copy[1]):
            return None
        keys, items, copies = tuple(value), tuple(value.values()), [v for _, v in copy[1]]
    else:
        keys, items, copies = None, tuple(value), copy[1]
    if all(c[0] is _Same for c in copies):
        return (kind, keys, items, None)
    if all(c[0] in _PLAIN for c in copies):
        return (kind, keys, items, tuple(c[0] for c in copies))
    return None


def _shallow_equal(value, flat) -> bool:
    """Whether ``value`` still equals the container :func:`_shallow` flattened (False: look closer)."""
    kind, keys, items, types_ = flat
    if type(value) is not kind or len(value) != len(items):
        return False
    if keys is not None:
        if tuple(value) != keys:
            return False
        value = value.values()
    if types_ is None:
        return all(map(operator.is_, value, items))
    return tuple(map(type, value)) == types_ and tuple(value) == items


def _is_immutable(copy) -> bool:
    kind = copy[0]
    if kind in _PLAIN or kind is _Same:
        return True
    return kind in (tuple, frozenset) and all(_is_immutable(x) for x in copy[1])


class _Same:
    """An object compared by identity inside a snapshot (a tensor's ``==`` is elementwise)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _short_repr(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
