"""``munet.func``: function transforms in ``torch.func``'s names (grad, vjp, jvp, jacrev, vmap, functional_call)."""

from munet.func.eager_transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from munet.func.functional_call import functional_call
from munet.func.vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp", "vmap"]
