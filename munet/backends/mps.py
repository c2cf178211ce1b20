"""``munet.backends.mps``: Apple's Metal Performance Shaders backend of PyTorch, which MuNet does
not have (on macOS, MuNet reaches Metal through the ``webgpu`` device)."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
