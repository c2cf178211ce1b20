"""Generated kernels: the kernel IR (``kernel.py``), renderers (``c.py``), and the cpu build and disk cache."""
