"""``munet.sparse``: sparse COO tensors (layout ``munet.sparse_coo``), the gradients of
``nn.Embedding(sparse=True)``, with the operations ``docs/sparse.md`` lists."""

from munet.sparse.coo import SparseCOOTensor, sparse_coo_tensor
from munet.sparse.reduce import mm, sum  # noqa: A004 - PyTorch's name

__all__ = ["SparseCOOTensor", "mm", "sparse_coo_tensor", "sum"]
