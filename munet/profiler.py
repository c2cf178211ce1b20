"""``munet.profiler``: per-op CPU times measured in the dispatcher, with PyTorch's surface.

>>> with munet.profiler.profile(activities=[munet.profiler.ProfilerActivity.CPU]) as prof:
...     model(x)
>>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

Every ``apply`` in the profiling thread is timed (``time.perf_counter_ns``), nested ops included:
an op's self time excludes the ops it ran (a composite's decomposition, autograd's backward ops).
``record_function(name)`` adds a named range. Times are host (CPU) times: on ``vulkan``, kernels are
recorded into a command buffer and run later, so an op's time is its dispatch time, not the GPU's.
"""

from __future__ import annotations

import contextlib
import enum
import time
from dataclasses import dataclass, field

from munet._tensor import Tensor
from munet.ops._registry import OP_OBSERVER

__all__ = ["ProfilerActivity", "profile", "record_function"]


class ProfilerActivity(enum.Enum):
    """What a profile records; MuNet measures host (CPU) time only."""

    CPU = "cpu"


@dataclass
class FunctionEvent:
    """One timed range: an op or a ``record_function``; times in microseconds."""

    name: str
    input_shapes: list
    start_us: float = 0.0
    cpu_time_total: float = 0.0
    children_time: float = 0.0

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - self.children_time


class FunctionEventAvg:
    """The events of one name (and input shapes, when grouped by them), summed."""

    def __init__(self, key: str, input_shapes: list):
        self.key, self.input_shapes = key, input_shapes
        self.count, self.cpu_time_total, self.self_cpu_time_total = 0, 0.0, 0.0

    def add(self, event: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count


SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "count")


@dataclass
class EventList:
    """``key_averages()``: one row per name; ``table()`` prints PyTorch's columns."""

    averages: list = field(default_factory=list)
    group_by_input_shape: bool = False

    def __iter__(self):
        return iter(self.averages)

    def __len__(self) -> int:
        return len(self.averages)

    def table(self, sort_by: str | None = None, row_limit: int = 100) -> str:
        rows = list(self.averages)
        if sort_by is not None:
            if sort_by not in SORT_KEYS:
                raise ValueError(f"table: sort_by must be one of {', '.join(SORT_KEYS)}, got {sort_by!r}")
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        self_total = sum(r.self_cpu_time_total for r in self.averages) or 1.0
        header = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        if self.group_by_input_shape:
            header.append("Input Shapes")
        lines = []
        for r in rows:
            cells = [
                r.key,
                f"{100 * r.self_cpu_time_total / self_total:.2f}%",
                _format_us(r.self_cpu_time_total),
                f"{100 * r.cpu_time_total / self_total:.2f}%",
                _format_us(r.cpu_time_total),
                _format_us(r.cpu_time),
                str(r.count),
            ]
            if self.group_by_input_shape:
                cells.append(str(r.input_shapes))
            lines.append(cells)
        widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(header)]
        rule = "  ".join("-" * w for w in widths)

        def line(cells):
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        body = [rule, line(header), rule, *(line(c) for c in lines), rule]
        return "\n".join(body) + f"\nSelf CPU time total: {_format_us(sum(r.self_cpu_time_total for r in self))}\n"


def _format_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _shapes(args) -> list:
    return [list(a.shape) if isinstance(a, Tensor) else [] for a in args]


class profile:  # noqa: N801 - PyTorch's name
    """Records every op run in this thread inside the ``with`` block (see the module docstring)."""

    def __init__(self, activities=None, record_shapes: bool = False):
        activities = set(activities) if activities is not None else {ProfilerActivity.CPU}
        unknown = activities - {ProfilerActivity.CPU}
        if unknown:
            raise ValueError(f"profile: MuNet measures ProfilerActivity.CPU only, got {sorted(map(str, unknown))}")
        self.activities = activities
        self.record_shapes = bool(record_shapes)
        self._events: list[FunctionEvent] = []
        self._open: list[FunctionEvent] = []
        self._saved = None

    def __enter__(self) -> profile:
        self._saved = OP_OBSERVER.observe
        OP_OBSERVER.observe = self._observe
        return self

    def __exit__(self, *exc) -> None:
        OP_OBSERVER.observe = self._saved

    def _observe(self, op, args):
        return self.range(op.name, args)

    @contextlib.contextmanager
    def range(self, name: str, args=()):
        """Time the block as one event named ``name``, nested in the open one."""
        event = FunctionEvent(name, _shapes(args) if self.record_shapes else [])
        self._open.append(event)
        start = time.perf_counter_ns()
        try:
            yield event
        finally:
            elapsed = (time.perf_counter_ns() - start) / 1e3
            event.start_us, event.cpu_time_total = start / 1e3, elapsed
            self._open.pop()
            if self._open:
                self._open[-1].children_time += elapsed
            self._events.append(event)

    def events(self) -> list[FunctionEvent]:
        return sorted(self._events, key=lambda e: e.start_us)

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        groups: dict = {}
        for e in self.events():
            key = (e.name, str(e.input_shapes)) if group_by_input_shape else e.name
            groups.setdefault(key, FunctionEventAvg(e.name, e.input_shapes if group_by_input_shape else [])).add(e)
        return EventList(list(groups.values()), group_by_input_shape)


class record_function(contextlib.ContextDecorator):  # noqa: N801 - PyTorch's name
    """A named range in the active profile of this thread (nothing when none is active); a
    context manager or a decorator."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._range = None

    def __enter__(self) -> record_function:
        observe = OP_OBSERVER.observe
        owner = getattr(observe, "__self__", None)
        if isinstance(owner, profile):
            self._range = owner.range(self.name)
            self._range.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._range is not None:
            self._range.__exit__(*exc)
            self._range = None
