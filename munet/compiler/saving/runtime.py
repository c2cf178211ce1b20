"""The loaded runtime: :class:`LoadedProgram` runs a loaded program, one step per call."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from munet._tensor import Tensor
from munet.compiler.ir import verify
from munet.compiler.saving.encoding import COMPARISON_NAMES
from munet.compiler.saving.program import Program, rebuild_result
from munet.ops._registry import Meta


def is_program(obj) -> bool:
    """Whether ``munet.save`` should write ``obj`` as a compiled program."""
    from munet.compiler.compiled import CompiledFunction

    return isinstance(obj, (CompiledFunction, LoadedProgram))


class LoadedProgram:
    """A compiled training step loaded from a file: call it with the tensor arguments it was saved with.

    It owns its state (parameters, buffers, optimizer state, gradients, random generators and
    hyperparameters) and updates it at every call; the state lives on the program's device
    (uploaded once when loaded, read back only by ``munet.save``), host values such as Adam's
    step counts on the cpu. ``state_dict()`` returns the tensors (live:
    they change with the next call), ``model_state_dict()`` only the module parameters and
    buffers, ``hyperparameters`` is a dict read at every call (set a new learning rate there).
    It cannot retrace: a call with another signature, or hyperparameters that change a branch
    the trace took, raises.
    """

    def __init__(self, program: Program):
        from munet.compiler.compiled import _ownership
        from munet.compiler.executable import Executable

        self._program = program
        self.graph = program.graph
        self.device = program.device
        self.hyperparameters = program.hyper  # the same dict: edits are read at the next call
        from munet.compiler.passes.decompose import decompose_composites

        # composites the saving device kept as one node (cpu's max-pool gradient kernel) may have no
        # kernel here: a program loaded on another device, or where no C compiler exists
        decompose_composites(program.graph, fusing=program.fuse)
        if program.fuse:
            from munet.compiler.passes.fuse import fuse_elementwise
            from munet.compiler.passes.remat import rematerialize_pointwise

            fuse_elementwise(program.graph)
            rematerialize_pointwise(program.graph)
        verify(program.graph)
        # a state update may be written over its input (the memory plan decides), as in the compiled step
        state_inputs = {key: v for v, (kind, key) in zip(self.graph.inputs, program.roles) if kind == "state"}
        donors = {self.graph.outputs[i]: state_inputs[n] for i, n in program.state_outputs if n in state_inputs}
        self.executable = ex = Executable(program.graph, program.device, donors=donors)
        self.backend = ex.backend
        # each state on the target of the device the graph reads (or writes) it on; uploaded once
        self._targets, self._shapes = {}, {}  # by state name
        inputs = [(key, v) for v, (kind, key) in zip(self.graph.inputs, program.roles) if kind == "state"]
        for name, v in inputs + [(name, self.graph.outputs[i]) for i, name in program.state_outputs]:
            self._targets.setdefault(name, ex.target_on(v.device))
            self._shapes.setdefault(name, v.shape)
        self._state = OrderedDict(
            (name, Tensor._from_numpy(a, self._targets[name].backend.device)._data) for name, a in program.state.items()
        )
        self._owned = _ownership(ex)  # outputs that are fresh results, handed over without a copy
        self._output_targets = [ex.target_on(v.device) for v in self.graph.outputs]
        args = sorted((key, i) for i, (kind, key) in enumerate(program.roles) if kind == "arg")
        self._arg_inputs = [i for _, i in args]
        self._calls = 0
        self._run_ms = 0.0
        self._lock = threading.Lock()  # one call at a time: the plan's arena and the state are shared

    @property
    def signature(self) -> list[str]:
        """The argument types a call takes, e.g. ``['f32[16, 12]', 'i64[16]']``."""
        return [self.graph.inputs[i].type_str() for i in self._arg_inputs]

    def __call__(self, *tensors):
        """Calls from several threads run one at a time."""
        with self._lock:
            return self._call(tensors)

    def _call(self, tensors):
        inputs = self._inputs(tensors)
        self._check_guards()
        start = time.perf_counter()
        prog = self._program
        leaves = []
        with self.executable.scope():  # vulkan: the call and its state write-back are one command buffer
            outs = self.executable.run(inputs)
            updates = []
            for index, name in prog.state_outputs:
                target = self._targets[name]
                updates.append((name, outs[index] if self._owned[index] else target.clone(outs[index]), target))
            for name, data, target in updates:
                current = self._state.get(name)
                if current is None:
                    self._state[name] = data
                elif not target.same_memory(data, current):
                    target.copy_into(current, data)
            for name in prog.cleared:
                self._state.pop(name, None)
            for item in prog.results:
                if isinstance(item, tuple):
                    leaves.append(item[1])
                    continue
                v, target = self.graph.outputs[item], self._output_targets[item]
                data = outs[item] if self._owned[item] else target.clone(outs[item])
                leaves.append(Tensor._from_kernel(target.backend, data, Meta(v.shape, v.dtype)))
        self._calls += 1
        self._run_ms += (time.perf_counter() - start) * 1e3
        return rebuild_result(prog.tree, leaves)

    def _inputs(self, tensors) -> list:
        prog = self._program
        if len(tensors) != len(self._arg_inputs):
            raise TypeError(
                f"loaded program: expected {len(self._arg_inputs)} tensor arguments {self.signature}, got "
                f"{len(tensors)}; pass the tensors of the saved call, in order (modules and optimizers are in the program)"
            )
        by_input = {}
        for k, (i, t) in enumerate(zip(self._arg_inputs, tensors)):
            v = self.graph.inputs[i]
            if not isinstance(t, Tensor):
                raise TypeError(f"loaded program: argument {k} must be a tensor {v.type_str()}, got {type(t).__name__}")
            if tuple(t.shape) != v.shape or t.dtype is not v.dtype or t.device != self.device:
                got = f"{t.dtype.name}{list(t.shape)} on {t.device}"
                raise ValueError(
                    f"loaded program: argument {k} expected {v.dtype.name}{list(v.shape)} on {self.device}, got {got}. "
                    "A loaded program cannot retrace (the Python code is not in the file); call it with the "
                    "shapes and dtypes it was saved with, or save a specialization for these inputs."
                )
            by_input[i] = self.executable.target_on(v.device).argument(t.contiguous())
        inputs = []
        for i, (kind, key) in enumerate(prog.roles):
            if kind == "arg":
                inputs.append(by_input[i])
            elif kind == "state":
                inputs.append(self._state[key])
            else:
                inputs.append(float(prog.hyper[key]))
        return inputs

    def _check_guards(self) -> None:
        for scalar, fn, other, outcome in self._program.guards:
            if fn(scalar(self.hyperparameters), other) != outcome:
                name = COMPARISON_NAMES[fn]
                raise RuntimeError(
                    f"loaded program: a hyperparameter changed so that a branch the trace took ({name} {other!r} was "
                    f"{outcome}) no longer holds; a loaded program cannot retrace. Hyperparameters: "
                    f"{dict(self.hyperparameters)}"
                )

    # state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """Every state tensor by name (parameters, buffers, ``optimizer.state.*``, ``*.grad``), sharing memory."""
        return OrderedDict((name, self._tensor(name, data)) for name, data in self._state.items())

    def model_state_dict(self) -> OrderedDict:
        """Only the module parameters and buffers, named as in the model's ``state_dict``."""
        kinds = self._program.state_kinds
        return OrderedDict(
            (name, t) for name, t in self.state_dict().items() if kinds.get(name) in ("parameter", "buffer")
        )

    def generators(self) -> OrderedDict:
        """The program's own random generators (restored from the file), by name."""
        return OrderedDict(self._program.generators)

    def _tensor(self, name: str, data) -> Tensor:
        dtype = self._program.state_dtypes[name]
        return Tensor._from_kernel(self._targets[name].backend, data, Meta(self._shapes[name], dtype))

    def _host_program(self) -> Program:
        """The program with its current state read back into host memory (what ``munet.save`` writes)."""
        prog = self._program
        prog.state = OrderedDict(
            (name, self._targets[name].download(d).reshape(self._shapes[name])) for name, d in self._state.items()
        )  # reshape: a 0-d array comes back 1-d
        return prog

    # reporting -----------------------------------------------------------------------------------------
    def describe(self) -> str:
        return self.executable.describe()

    def stats(self) -> dict:
        return {
            "backend": str(self.backend.device),
            "kernels": self.executable.kernels,
            "nodes": len(self.graph.nodes),
            "calls": self._calls,
            "run_ms": round(self._run_ms, 3),
            "traces": 0,
        }

    def __repr__(self) -> str:
        return f"<munet LoadedProgram on {self.device}: {len(self.graph.nodes)} nodes, arguments {self.signature}>"
