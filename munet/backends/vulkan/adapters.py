"""Adapter discovery: which ``vulkan:N`` and ``webgpu:N`` devices exist, and why none do.

``vulkan:N`` is the N-th Vulkan adapter; ``webgpu:N`` the N-th adapter of any native WebGPU
backend (Vulkan, Metal, DX12). wgpu's OpenGL backend is left out: it cannot run every kernel.
The list is computed once per process (enumerating adapters takes about a second).
"""

from __future__ import annotations

INSTALL_WGPU = "install it with: pip install 'munet[vulkan]' (or pip install wgpu)"
INSTALL_DRIVER = (
    "install a Vulkan driver for your GPU, or Mesa's CPU driver lavapipe for testing "
    "(apt-get install mesa-vulkan-drivers libvulkan1)"
)

_state: dict = {}


def _enumerate() -> tuple[list, str | None]:
    """(adapters, error): every non-OpenGL adapter, or why there are none."""
    if "adapters" in _state:
        return _state["adapters"], _state["error"]
    adapters, error = [], None
    try:
        import wgpu
    except ImportError as exc:
        error = f"the wgpu package is not available ({exc}); {INSTALL_WGPU}"
    else:
        try:
            from wgpu.backends.wgpu_native import extras

            extras.set_instance_extras(backends=["Vulkan", "Metal", "DX12"])
        except Exception:  # the instance exists already (the user called wgpu first): keep it
            pass
        try:
            found = wgpu.gpu.enumerate_adapters_sync()
        except Exception as exc:
            found, error = [], f"wgpu could not enumerate adapters ({exc}); {INSTALL_DRIVER}"
        adapters = [a for a in found if a.info.get("backend_type") != "OpenGL"]
    _state["adapters"], _state["error"] = adapters, error
    return adapters, error


def adapters_for(device_type: str) -> list:
    adapters, _ = _enumerate()
    if device_type == "vulkan":
        return [a for a in adapters if a.info.get("backend_type") == "Vulkan"]
    return adapters


def _kind(adapter) -> str:
    kind = adapter.info.get("adapter_type", "")
    return {"DiscreteGPU": "GPU", "IntegratedGPU": "integrated GPU", "VirtualGPU": "virtual GPU"}.get(kind, kind)


def list_devices(device_type: str) -> list[tuple[int, str, str]]:
    out = []
    for i, adapter in enumerate(adapters_for(device_type)):
        name = adapter.info.get("device") or adapter.info.get("description") or "unknown adapter"
        out.append((i, name, _kind(adapter)))
    return out


def explain_unavailable(device_type: str, index: int) -> str:
    """Why ``device_type:index`` does not exist and what to install."""
    _, error = _enumerate()
    if error is not None:
        return error
    found = adapters_for(device_type)
    what = "Vulkan adapter" if device_type == "vulkan" else "WebGPU adapter (Vulkan, Metal or DX12)"
    if not found:
        return f"wgpu found no {what}; {INSTALL_DRIVER}"
    return f"this machine has {len(found)} {what}{'s' if len(found) != 1 else ''} ({device_type}:0..{len(found) - 1})"


def reset() -> None:
    """Forget the cached adapter list (tests simulate a machine without wgpu)."""
    _state.clear()


def _factory(device_type: str):
    def build(index: int):
        from munet.backends.vulkan.backend import VulkanBackend

        return VulkanBackend(device_type, index)

    return build


def register() -> None:
    """Register ``vulkan`` and ``webgpu`` with the device registry (imports neither wgpu nor kernels)."""
    from munet._device import register_backend

    for device_type in ("vulkan", "webgpu"):
        register_backend(
            device_type,
            lambda t=device_type: list_devices(t),
            _factory(device_type),
            explain_unavailable=lambda index, t=device_type: explain_unavailable(t, index),
            package="vulkan",
            compile_target="munet.compiler.lower_vulkan:VulkanTarget",
        )
