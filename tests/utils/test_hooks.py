"""munet/utils/hooks.py: the one RemovableHandle behind tensor, node, module and optimizer hooks."""

import munet
from munet import nn
from munet.utils.hooks import RemovableHandle


def test_add_prepend_and_remove_twice():
    hooks = {}
    a = RemovableHandle.add(hooks, "a")
    b = RemovableHandle.add(hooks, "b", prepend=True)
    assert list(hooks.values()) == ["b", "a"]
    a.remove()
    a.remove()
    assert list(hooks.values()) == ["b"]
    with b:
        pass
    assert hooks == {}


def test_tensor_node_and_module_hooks_share_the_handle_type():
    x = munet.ones(3, requires_grad=True)
    y = x * 2
    seen = []
    handles = [
        x.register_hook(lambda g: seen.append("leaf")),
        y.register_hook(lambda g: seen.append("tensor")),
        y.grad_fn.register_hook(lambda gi, go: seen.append("node")),
        x.register_post_accumulate_grad_hook(lambda t: seen.append("post")),
    ]
    assert all(isinstance(h, RemovableHandle) for h in handles)
    y.sum().backward()
    assert seen == ["tensor", "node", "leaf", "post"]
    seen.clear()
    for h in handles:
        h.remove()
    (x * 2).sum().backward()
    assert seen == []
    assert isinstance(nn.Linear(2, 2).register_forward_hook(lambda *a: None), RemovableHandle)
