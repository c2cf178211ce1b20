"""``munet.backends.mps``: Apple's Metal Performance Shaders backend of PyTorch, which MuNet does
not have (on macOS, MuNet reaches Metal through the ``webgpu`` device)."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    """Whether this is macOS ``major.minor`` or newer (False off macOS)."""
    import platform

    release = platform.mac_ver()[0]
    if not release:
        return False
    parts = [int(p) for p in release.split(".")[:2]] + [0]
    return (parts[0], parts[1]) >= (major, minor)


def is_macos13_or_newer(minor: int = 0) -> bool:
    return is_macos_or_newer(13, minor)
