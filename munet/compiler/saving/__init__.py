"""Saving and loading compiled programs: ``munet.save(compiled, path)`` / ``munet.load(path)``.

A program file is the safetensors container of :mod:`munet.serialization` (atomic write,
SHA-256 per tensor and a header digest, so any changed byte is refused; no pickle). Its
manifest (format ``munet-program``) holds the optimized SSA graph as JSON: values with their
types; nodes with registry op names, arguments and attributes (tuples, floats, dtypes, devices
and generators tagged explicitly); which graph inputs are call arguments, state or
hyperparameters; which outputs are results and which update state; and the hyperparameter
guards. The tensors are the current state:

- ``state.<name>``: parameters and buffers (named as in the model's ``state_dict``),
  optimizer state (``optimizer.state.<param>.<key>``) and gradients (``<param>.grad``);
- ``hyper.<name>``: hyperparameter inputs as float64 scalars (``optimizer.param_groups.0.lr``);
- ``rng.<i>``: the state of each random generator the graph draws from;
- ``constant.<id>``: folded constants.

The file does not depend on the device that wrote it: values marked ``host`` live on the cpu
whatever the device (Adam's step count), the others on the device the program is loaded onto,
and ``load`` inserts the ``to_device`` copies that device needs (none on the cpu). On vulkan
the state is read back to save, and uploaded once to load; it then stays on the device.

``munet.load(path, device=...)`` rebuilds the program without the Python code that traced it,
after validating everything: op names against ``munet.ops.OPS``, attribute encodings, each
node's output types against its op's shape rule, the graph verifier, and every tensor's shape
and dtype against the graph. The result, a :class:`LoadedProgram`, is called with the tensor
arguments of the original call (in order) and runs one step, updating its own state::

    munet.save(step, "run.munet")            # step = munet.compile(train_step), called >= 2 times
    program = munet.load("run.munet")
    loss = program(x, y)                     # the tensors of step(model, opt, x, y)
    program.model_state_dict()["0.weight"]   # the trained parameters
"""

from munet.compiler.saving.manifest import save_program
from munet.compiler.saving.runtime import LoadedProgram, is_program
from munet.compiler.saving.validation import load_program

__all__ = ["LoadedProgram", "is_program", "load_program", "save_program"]
