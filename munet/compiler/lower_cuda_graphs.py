"""A compiled plan on a cuda device replayed as one CUDA graph (``munet.compile``'s default there).

:class:`GraphReplay` is the plan's step runner (``Executable.run_steps``):

- The first ``WARMUP_CALLS`` calls run the steps one by one (kernels are loaded, cuBLAS sets up its
  workspace, the pool holds blocks of every size the plan asks for).
- The next call captures: the *host steps* (scalar arithmetic on hyperparameters, and the steps
  of a second device, e.g. Adam's step count on the cpu) run first, since no device step feeds
  them, and their values that go to the device (``to_device``) are uploaded into buffers the graph
  reads; the run-time scalars of all fused kernels go to their device block in one upload; the
  call's tensor
  arguments are copied into buffers the graph owns; then the device steps run on a side stream
  under ``cudaStreamBeginCapture`` with the graph's private pool routed
  (``munet.cuda.CUDAGraph``), so every kernel, cuBLAS call and copy is recorded and every result
  lands in memory the graph keeps. The graph is then launched for this call's results.
- Later calls run the host steps, upload the scalars, copy the arguments into the graph's
  buffers, and launch the graph on the current stream: one launch for the whole step.
- Random ops: their kernels' Philox ``(key, counter)`` would be frozen as launch arguments, so under
  the capture each random kernel reads them from a device slot instead
  (``kernels_draws.PhiloxSlots``, recorded with its generator and block count), and before every
  launch of the graph the slots are filled by the same ``philox_advance`` calls, in the same order,
  that the step run op by op makes (PyTorch's graph-safe Philox state, read by the kernels from
  device memory). ``munet.cuda.CUDAGraph`` does this for every capture, a user's too; the plan
  only captures into one and replays it. A replay therefore draws the uncaptured step's numbers and advances the
  generator as it does, and ``manual_seed``/``set_rng_state`` between calls take effect.

A plan the graph cannot express runs its steps one by one, and ``stats()["cuda_graph"]`` says why:
a copy of a device value to the host inside the plan, an unfused node reading a
run-time scalar (the graph would freeze its value), a random op drawing from a generator a host step
also draws from (the graph's draws would move after the host step's), a kernel that takes its Philox
counter by value (found during the capture), a host step fed by a device value, or a capture CUDA
refused (the error CuPy raised, e.g. a kernel that synchronises with the host). State inputs
(parameters, optimizer moments, buffers) are used where they live; when one moves (``p.data = ...``)
or an argument's shape changes (a plan serves one shape; size-generic plans are not captured) the
plan captures again, and after ``MAX_CAPTURES`` captures it stops capturing.
"""

from __future__ import annotations

from munet._device import as_device
from munet.compiler.ir import CONSTANT, ScalarOp, Value, iter_values
from munet.compiler.passes.fuse import FUSED

WARMUP_CALLS = 1
MAX_CAPTURES = 4
TRANSFER = "to_device"


class GraphReplay:
    """The CUDA graph replay of one plan (see the module docstring)."""

    def __init__(self, executable, target):
        self.executable = executable
        self.target = target
        self.device = target.backend.device
        nodes = executable.step_nodes
        self.host_steps = [k for k, node in enumerate(nodes) if self._on_host(node)]
        # host values copied to the device (Adam's step count): uploaded into a fixed buffer per call
        self.upload_steps = [k for k, node in enumerate(nodes) if self._is_upload(node)]
        outside = set(self.host_steps) | set(self.upload_steps)
        self.device_steps = [k for k in range(len(nodes)) if k not in outside]
        self.refused = self._why_not(nodes)
        inputs = [v for v in executable.graph.inputs if v.kind == "tensor" and as_device(v.device) == self.device]
        # inputs used where they live (state) and inputs copied into the graph's buffers (arguments)
        self.state_slots = [executable.slot[v] for v in inputs if _is_state(v)]
        self.copied_slots = [executable.slot[v] for v in inputs if not _is_state(v)]
        inplace = set(executable.inplace)
        self.static_values = set()
        if self.refused is None:  # every device result lives in the graph's memory: callers copy it
            self.static_values = {
                v for k in self.device_steps for v in nodes[k].outputs if v.kind == "tensor" and v not in inplace
            }
        self.calls = 0
        self.captures = 0
        self.replays = 0
        self.graph = None
        self.failure = None
        self._captured_env = None
        self._captured_state = None
        self._static_inputs = None

    def _on_host(self, node) -> bool:
        if isinstance(node.op, ScalarOp):
            return True
        return (
            bool(node.outputs) and node.outputs[0].kind == "tensor" and as_device(node.outputs[0].device) != self.device
        )

    def _is_upload(self, node) -> bool:
        """A ``to_device`` node from another device's value to this one."""
        return (
            node.name == TRANSFER
            and as_device(node.outputs[0].device) == self.device
            and as_device(node.args[0].device) != self.device
        )

    def _why_not(self, nodes) -> str | None:
        if not self.device_steps:
            return "the plan has no device work"
        if self.executable.dynamic:
            return "a size-generic plan (dynamic shapes) serves many shapes; a graph holds one"
        uploads = set(self.upload_steps)
        host_generators = {
            nodes[k].attrs["generator"]: nodes[k].name for k in self.host_steps if "generator" in nodes[k].attrs
        }
        for k, node in enumerate(nodes):
            if k in uploads:
                continue
            if node.name == TRANSFER:
                return f"the plan copies through host memory ('{node.name}' node {k}: {node.args[0].device} -> {self.device})"
            values = [v for v in iter_values([node.args, list(node.attrs.values())]) if isinstance(v, Value)]
            if k in self.host_steps:
                if any(v.kind == "tensor" and v.device is not None and as_device(v.device) == self.device
                       for v in values):  # fmt: skip
                    return f"the host step '{node.name}' reads a {self.device} value"
                continue
            if "generator" in node.attrs and node.attrs["generator"] in host_generators:
                host = host_generators[node.attrs["generator"]]
                return (
                    f"the '{node.name}' node and the host step '{host}' draw from one generator; the graph's "
                    "draws, made before each launch, would come after the host step's"
                )
            if node.op is FUSED and not isinstance(self.target.render_fused(node), str):
                continue  # its scalars come from the parameter block at each replay
            frozen = [v for v in values if v.kind == "scalar" and not _constant(v)]
            if frozen:
                return (
                    f"the unfused '{node.name}' node reads the run-time scalar {frozen[0].label or 'value'}, "
                    "which a graph would freeze"
                )
        return None

    # running ------------------------------------------------------------------------------------
    def run(self, env: list) -> None:
        from munet.cuda.graphs import is_current_stream_capturing

        if is_current_stream_capturing():
            raise RuntimeError(
                "munet.compile: a compiled cuda plan cannot run inside a CUDA graph capture (it uploads its "
                "hyperparameters before each launch and replays as a graph of its own); call it outside the capture"
            )
        self.calls += 1
        if self.refused is not None or self.failure is not None or self.calls <= WARMUP_CALLS:
            self.executable._run_steps(env)
            return
        if self.graph is not None and not self._fits(env):
            self.graph = None  # a state tensor moved (its old memory is not the one to update), or an argument's geometry changed
        if self.graph is None:
            if self.captures >= MAX_CAPTURES:
                self.failure = f"the inputs changed after {self.captures} captures; the plan stopped capturing"
                self.executable._run_steps(env)
                return
            if not self._capture(env):  # the host steps and uploads ran: only the device steps run again
                self.executable._run_steps(env, self.device_steps)
                return
        else:
            self._prepare(env)
        self._launch(env)

    def _prepare(self, env: list) -> None:
        """Host steps, the scalars' upload and the arguments' copies into the graph's buffers."""
        ex, target = self.executable, self.target
        ex._run_steps(env, self.host_steps)
        if self.graph is None:  # capturing: the uploads make the buffers the graph will read
            ex._run_steps(env, self.upload_steps)
        else:
            for k in self.upload_steps:
                node = ex.step_nodes[k]
                source = ex.target_on(node.args[0].device).download(env[ex.slot[node.args[0]]])
                out = ex.slot[node.outputs[0]]
                target.upload_into(self._captured_env[out], source)
                env[out] = self._captured_env[out]
        target.upload_params(env)
        for i in self.copied_slots:
            static = self._static_inputs[i]
            if not target.same_memory(env[i], static):
                target.copy_into(static, env[i])
            env[i] = static

    def _launch(self, env: list) -> None:
        self.graph.replay()  # its random kernels' (key, counter) first, drawn as the uncaptured step would
        self.replays += 1
        captured = self._captured_env
        for k in self.device_steps:
            for v in self.executable.step_nodes[k].outputs:
                i = self.executable.slot[v]
                env[i] = captured[i]

    def _capture(self, env: list) -> bool:
        from munet.backends.cuda.kernels_draws import FrozenDrawError
        from munet.backends.cuda.streams import capture_stream, current_stream
        from munet.backends.cuda.streams import stream as stream_context
        from munet.cuda.graphs import CUDAGraph

        ex, target = self.executable, self.target
        arguments = {i: env[i] for i in self.copied_slots}
        self._static_inputs = {i: target.clone(x) for i, x in arguments.items()}
        self._prepare(env)
        self.captures += 1
        graph = CUDAGraph()
        index = self.device.index
        side = capture_stream(index)
        side.wait_stream(current_stream(index))
        target.upload_params_per_kernel = False
        k = None
        try:
            with stream_context(side):
                graph.capture_begin(capture_error_mode="thread_local")
                try:
                    for k in self.device_steps:
                        ex._run_steps(env, [k])
                finally:
                    try:
                        graph.capture_end()
                    except Exception as error:
                        if graph._graph is None and self.failure is None:
                            self.failure = f"CUDA refused the capture: {error}"
        except FrozenDrawError as error:
            self.failure = f"the '{ex.step_nodes[k].name}' node's kernel takes its Philox counter by value ({error})"
        except Exception as error:  # a step CUDA refused inside a capture (a host synchronisation)
            self.failure = self.failure or f"CUDA refused the capture: {type(error).__name__}: {error}"
        finally:
            target.upload_params_per_kernel = True
        current_stream(index).wait_stream(side)
        if self.failure is not None:
            self._static_inputs = None
            for i, x in arguments.items():  # the call runs again, one step at a time, on its own inputs
                env[i] = x
            return False
        self.graph = graph
        self._captured_env = list(env)
        self._captured_state = {i: env[i] for i in self.state_slots}
        return True

    def _fits(self, env: list) -> bool:
        """Whether this call's inputs fit the captured graph: the same state memory, arguments of
        the captured shapes and dtypes."""
        same = self.target.same_memory
        if not all(same(env[i], captured) for i, captured in self._captured_state.items()):
            return False
        statics = self._static_inputs
        return all(env[i].shape == statics[i].shape and env[i].dtype == statics[i].dtype for i in self.copied_slots)

    def stats(self) -> dict:
        if self.refused is not None or self.failure is not None:
            return {"cuda_graphs": False, "cuda_graph": f"not captured: {self.refused or self.failure}"}
        if self.graph is None:
            return {"cuda_graphs": False, "cuda_graph": f"warming up ({self.calls} of {WARMUP_CALLS + 1} calls)"}
        draws = self.graph.random_draws()
        random = f"; {draws} random kernels read their Philox counters from device memory" if draws else ""
        return {
            "cuda_graphs": True,
            "cuda_graph": f"one CUDA graph replayed {self.replays} times ({self.captures} captures{random})",
        }


def _is_state(v) -> bool:
    from munet._tensor import Tensor

    return isinstance(v.source, Tensor)


def _constant(v) -> bool:
    return v.producer is not None and v.producer.op is CONSTANT
