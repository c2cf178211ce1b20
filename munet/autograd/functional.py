"""``munet.autograd.functional``: jacobian, hessian, vjp, jvp, hvp and vhp of a function.

Everything is computed with reverse-mode autograd (``autograd.grad``), as PyTorch's versions
are: ``jvp`` and ``hvp`` use the double-backward trick. Inputs are a tensor or a tuple of
tensors; results are tensors or tuples exactly where PyTorch returns them (a tuple per tuple
argument, a tensor per tensor argument).

``vectorize=True`` is accepted and gives the same result, computed one backward pass per output
element (MuNet has no ``vmap``); ``strategy="forward-mode"`` likewise computes the same
Jacobian in reverse mode.
"""

from __future__ import annotations

from munet._tensor import Tensor
from munet.autograd.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(inp, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(inp, tuple)
    items = inp if is_tuple else (inp,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            kind = "Tensor or a tuple of Tensors" if is_tuple else "Tensor"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a {kind} but the value at index {i} has type {type(el)}."
            )
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """Fresh inputs to differentiate against; under ``create_graph`` keep their history."""
    return tuple(
        inp.view_as(inp) if create_graph and inp.requires_grad else inp.detach().requires_grad_(need_graph)
        for inp in inputs
    )


def _grad_postprocess(inputs, create_graph: bool):
    if isinstance(inputs, Tensor):
        return inputs if create_graph else inputs.detach()
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.shape} but got {el_v.shape}.")


_STRICT_INDEPENDENT = {
    "hessian": (
        "The hessian of the user-provided function with respect to input {i} is independent of the input. This is "
        "not allowed in strict mode. You should ensure that your function is thrice differentiable and that the "
        "hessian depends on the inputs."
    ),
    "jacobian": (
        "While computing the hessian, found that the jacobian of the user-provided function with respect to input "
        "{i} is independent of the input. This is not allowed in strict mode. You should ensure that your function "
        "is twice differentiable and that the jacobian depends on the inputs (this would be violated by a linear "
        "function for example)."
    ),
    "grad_inputs": (
        "The gradient with respect to input {i} is independent of the inputs of the user-provided function. This is "
        "not allowed in strict mode."
    ),
    "outputs": (
        "Output {i} of the user-provided function does not require gradients. The outputs must be computed in a "
        "differentiable manner from the input when running in strict mode."
    ),
}


def _check_requires_grad(inputs: tuple, input_type: str, strict: bool) -> None:
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of input {i}. This is not allowed in "
                "strict mode."
            )
        if not inp.requires_grad:
            raise RuntimeError(_STRICT_INDEPENDENT[input_type].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None) -> tuple:
    """``autograd.grad`` over the outputs that require grad; ``None`` for unreached inputs."""
    from munet.autograd import grad

    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad(
        [o for o, _ in pairs],
        list(inputs),
        [g for _, g in pairs],
        allow_unused=True,
        create_graph=create_graph,
        retain_graph=retain_graph,
    )


_STRICT_ZERO = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "back_trick": (
        "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using the "
        "double backward trick to compute forward mode gradients. This is not allowed in strict mode."
    ),
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in strict mode.",
    "double_back_trick": (
        "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. This is not "
        "allowed in strict mode as it prevents from using the double backward trick to replace forward mode AD."
    ),
}


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, stage: str) -> tuple:
    from munet.ops.creation import zeros_like

    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_STRICT_ZERO[stage].format(i=i))
            g = zeros_like(ref)
        out.append(g)
    return tuple(out)


def _v_or_single_element(v, against: tuple, is_tuple: bool, create_graph: bool, fn_name: str, what: str):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, against, is_tuple)
        return v
    if len(against) != 1 or against[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if {what} is a single Tensor with a single element.")
    return None


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

    >>> out, g = vjp(lambda x: (x**2).sum(), munet.ones(3))   # g == 2 * x
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        v = _v_or_single_element(
            v, outputs, is_outputs_tuple, create_graph, "vjp", "the user-provided function returns"
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), J v)``: the Jacobian-vector product, by the double-backward trick."""
    from munet.ops.creation import zeros_like

    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _v_or_single_element(
            v, inputs, is_inputs_tuple, create_graph, "jvp", "the input to the user-provided function"
        )
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
        with set_grad_enabled(create_graph):
            grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grad_res, outputs, strict, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _jacobian_rows(out: Tensor, i: int, inputs: tuple, create_graph: bool, strict: bool) -> tuple:
    """d out / d inputs[j] for each j, shaped ``out.shape + inputs[j].shape``."""
    from munet.ops.creation import zeros, zeros_like
    from munet.ops.movement import stack

    rows = tuple([] for _ in inputs)
    flat = out.reshape(-1)
    for k in range(out.numel()):
        vj = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
        for j, (g, inp) in enumerate(zip(vj, inputs)):
            if g is None:
                if strict:
                    raise RuntimeError(
                        f"Output {i} of the user-provided function is independent of input {j}. This is not "
                        "allowed in strict mode."
                    )
                g = zeros_like(inp)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(
                    f"The jacobian of the user-provided function is independent of input {i}. This is not "
                    "allowed in strict mode when create_graph=True."
                )
            rows[j].append(g)
    return tuple(
        stack(r, dim=0).view(*out.shape, *inp.shape)
        if r
        else zeros(*out.shape, *inp.shape, dtype=inp.dtype, device=inp.device)
        for r, inp in zip(rows, inputs)
    )


def jacobian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
):
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` has shape ``out_i.shape + in_j.shape``.

    A tensor output and tensor input give a tensor; a tuple on either side gives a tuple over
    it (a tuple of tuples, outputs outer, for both). ``vectorize=True`` and
    ``strategy="forward-mode"`` give the same values, computed by one reverse pass per output
    element: MuNet has neither ``vmap`` nor forward-mode AD.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function has more '
            'outputs than inputs, "forward-mode" tends to be more performant. Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                'torch.autograd.functional.jacobian: `create_graph=True` and `strategy="forward-mode"` are not '
                'supported together (yet). Please either set `create_graph=False` or `strategy="reverse-mode"`.'
            )
        if not vectorize:
            raise NotImplementedError(
                'torch.autograd.functional.jacobian: `strategy="forward-mode"` requires `vectorize=True`.'
            )
    if vectorize and strict:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported together. "
            "Please either set `strict=False` or `vectorize=False`."
        )
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        jac = tuple(_jacobian_rows(out, i, inputs, create_graph, strict) for i, out in enumerate(outputs))
    jac = _grad_postprocess(jac, create_graph)
    return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(
    func,
    inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
):
    """The Hessian of scalar ``func`` at ``inputs`` (a tuple of tuples for tuple inputs).

    ``vectorize`` and ``outer_jacobian_strategy`` are accepted as in :func:`jacobian`; the values
    are the same, computed in reverse mode.
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_function_jacobian(func, inputs, v, create_graph, strict, fn_name):
    """Shared start of vhp/hvp: preprocessed inputs, v, outputs and the first-order gradient."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _v_or_single_element(
        v, inputs, is_inputs_tuple, create_graph, fn_name, "the input to the user-provided function"
    )
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, outputs, jac


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), v^T H)`` for a scalar ``func``."""
    with enable_grad():
        is_inputs_tuple, inputs, v, outputs, jac = _scalar_function_jacobian(
            func, inputs, v, create_graph, strict, "vhp"
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, False), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), H v)`` for a scalar ``func``, by the double-backward trick."""
    from munet.ops.creation import zeros_like

    with enable_grad():
        is_inputs_tuple, inputs, v, outputs, jac = _scalar_function_jacobian(
            func, inputs, v, create_graph, strict, "hvp"
        )
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, False), _tuple_postprocess(result, is_inputs_tuple)
