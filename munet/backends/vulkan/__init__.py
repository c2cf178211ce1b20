"""The Vulkan/WebGPU backend: wgpu-py device buffers, a caching allocator and WGSL kernels.

Nothing here imports ``wgpu`` at import time; the first use of a ``vulkan``/``webgpu`` device
does. See docs/vulkan.md.
"""
