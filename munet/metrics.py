"""``munet.metrics``: counters, gauges and histograms of what an operator watches, and ``span()``.

MuNet records into a small in-process store that needs nothing installed; ``snapshot()`` reads
it. With the ``metrics`` extra (``pip install 'munet[metrics]'``, which installs
``prometheus_client``) the same store is exported in Prometheus text format by prometheus_client
itself: ``generate_latest()`` returns the exposition, ``start_http_server(port)`` serves it, and
``COLLECTOR`` can be registered in an application's own registry
(``prometheus_client.REGISTRY.register(munet.metrics.COLLECTOR)``). docs/observability.md lists
every metric with its type and labels.

Recording is cheap (a dictionary lookup, a lock, an addition) and thread-safe; nothing is
recorded per eager op. The ``count_*``/``observe_*``/``track_*``/``watch_*`` functions are the
hooks MuNet's own modules call; user code times its own blocks with :func:`span`.

Metrics are per process: a DataLoader worker process or another rank has its own store.
"""

from __future__ import annotations

import bisect
import functools
import threading
import time
import weakref

__all__ = ["COLLECTOR", "generate_latest", "registry", "snapshot", "span", "start_http_server"]

# Seconds: from a batch already prefetched to a slow C compile or a long trace.
_SECONDS_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _Child:
    """The value of one metric for one combination of label values."""

    __slots__ = ("_lock", "_value")

    def __init__(self):
        self._lock = threading.Lock()
        self._value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self._value += amount

    def get(self) -> float:
        return self._value


class _GaugeChild(_Child):
    __slots__ = ("_read",)

    def __init__(self):
        super().__init__()
        self._read = None

    def set_function(self, read) -> None:
        """Report ``read()`` instead of the stored value (read at each snapshot or scrape)."""
        self._read = read

    def get(self) -> float:
        read = self._read
        return float(read()) if read is not None else self._value


class _HistogramChild:
    __slots__ = ("_lock", "_bounds", "_counts", "_sum")

    def __init__(self, bounds: tuple):
        self._lock = threading.Lock()
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self._sum = 0.0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self._bounds, value)  # bucket bounds are inclusive ("le")
        with self._lock:
            self._counts[i] += 1
            self._sum += value

    def get(self) -> dict:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = {}, 0
        for bound, n in zip((*self._bounds, float("inf")), counts):
            running += n
            cumulative[bound] = running
        return {"count": running, "sum": total, "buckets": cumulative}


class _Metric:
    """One metric family: a name, its help text, label names and a child per label values."""

    kind = ""

    def __init__(self, name: str, documentation: str, labelnames: tuple = ()):
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._children: dict = {}
        self._lock = threading.Lock()
        _METRICS.append(self)

    def labels(self, *values: str):
        """The child for these label values (strings, in ``labelnames`` order), created on first use."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames) or not all(type(v) is str for v in values):
                raise ValueError(f"{self.name}: expected string values for the labels {self.labelnames}, got {values}")
            with self._lock:
                child = self._children.setdefault(values, self._new_child())
        return child

    def _new_child(self):
        return _Child()

    def samples(self) -> dict:
        """``{label values: value}``, one entry per child."""
        with self._lock:
            children = dict(self._children)
        return {k: c.get() for k, c in children.items()}


class _Counter(_Metric):
    kind = "counter"


class _Gauge(_Metric):
    kind = "gauge"

    def _new_child(self):
        return _GaugeChild()


class _Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: tuple = (), buckets: tuple = _SECONDS_BUCKETS):
        self.buckets = tuple(sorted(buckets))
        super().__init__(name, documentation, labelnames)

    def _new_child(self):
        return _HistogramChild(self.buckets)


_METRICS: list[_Metric] = []

COMPILED_CALLS = _Counter("munet_compiled_calls_total", "Calls of munet.compile'd functions.", ("function",))
COMPILE_TRACES = _Counter(
    "munet_compile_traces_total",
    "Traces of munet.compile'd functions; reason first_call is the first, any other reason is a retrace.",
    ("function", "reason"),
)
COMPILE_SECONDS = _Histogram(
    "munet_compile_seconds",
    "Time to trace, optimize and lower one specialization of a munet.compile'd function (kernel compiles included).",
    ("function",),
)
KERNEL_COMPILE_SECONDS = _Histogram(
    "munet_kernel_compile_seconds", "Time to compile one generated kernel (C or WGSL).", ("backend",)
)
KERNEL_CACHE_HITS = _Counter(
    "munet_kernel_cache_hits_total", "Generated kernels found compiled (in memory or on disk).", ("backend",)
)
KERNEL_CACHE_MISSES = _Counter(
    "munet_kernel_cache_misses_total", "Generated kernels that had to be compiled.", ("backend",)
)
ALLOCATED_BYTES = _Gauge(
    "munet_allocated_bytes",
    "Bytes held by tensors in a device allocator (vulkan) or by compiled programs' arenas (cpu).",
    ("device",),
)
HOST_SYNCS = _Counter(
    "munet_host_syncs_total",
    "Times the host waited for a device: readback (a device-to-host copy) or synchronize.",
    ("device", "kind"),
)
DATALOADER_WAIT_SECONDS = _Histogram(
    "munet_dataloader_wait_seconds", "Time a DataLoader iterator's __next__ took to return a batch."
)
SPAN_SECONDS = _Histogram("munet_span_seconds", "Duration of blocks timed with munet.metrics.span(name).", ("name",))


# hooks (called by MuNet's own modules) --------------------------------------------------------------


def count_compiled_call(function: str) -> None:
    COMPILED_CALLS.labels(function).inc()


def count_trace(function: str, reason: str) -> None:
    """A trace of compiled ``function`` begins: ``reason`` is ``first_call``, ``cache_miss`` or ``guard_failed``."""
    COMPILE_TRACES.labels(function, reason).inc()


def observe_compile(function: str, seconds: float) -> None:
    COMPILE_SECONDS.labels(function).observe(seconds)


def observe_kernel_compile(backend: str, seconds: float) -> None:
    """A kernel was compiled (a cache miss) in ``seconds``."""
    KERNEL_CACHE_MISSES.labels(backend).inc()
    KERNEL_COMPILE_SECONDS.labels(backend).observe(seconds)


def count_kernel_cache_hit(backend: str) -> None:
    KERNEL_CACHE_HITS.labels(backend).inc()


def count_host_sync(device: str, kind: str) -> None:
    HOST_SYNCS.labels(device, kind).inc()


def track_allocated_bytes(device: str, owner, nbytes: int) -> None:
    """``owner`` holds ``nbytes`` on ``device`` until it is garbage collected."""
    child = ALLOCATED_BYTES.labels(device)
    child.inc(nbytes)
    weakref.finalize(owner, child.inc, -nbytes).atexit = False


def watch_allocated_bytes(device: str, allocator) -> None:
    """Report ``allocator.allocated_bytes`` for ``device``, read at each snapshot or scrape
    (``allocator`` is held weakly; a later call for the same device replaces it)."""
    ref = weakref.ref(allocator)
    ALLOCATED_BYTES.labels(device).set_function(lambda: getattr(ref(), "allocated_bytes", 0))


def time_dataloader_wait(next_fn):
    """Decorate a DataLoader iterator's ``__next__``: the time until it returns a batch is observed
    (the end of an epoch, ``StopIteration``, is not a wait for a batch)."""

    child = DATALOADER_WAIT_SECONDS.labels()

    @functools.wraps(next_fn)
    def timed_next(self):
        start = time.perf_counter()
        batch = next_fn(self)
        child.observe(time.perf_counter() - start)
        return batch

    return timed_next


# user-facing -----------------------------------------------------------------------------------------


class span:  # noqa: N801 - used like a function: ``with span("step"):``, ``@span("load")``
    """Record how long a block takes into ``munet_span_seconds{name=...}``.

    As a context manager (``with munet.metrics.span("forward"): ...``) it times the block, and as a
    decorator (``@munet.metrics.span("load_batch")``) every call of the function; a block that
    raises is recorded too. One ``span`` object times one block at a time; a decorated function
    may run in many threads at once.
    """

    __slots__ = ("name", "_child", "_start")

    def __init__(self, name: str):
        self.name = name
        self._child = SPAN_SECONDS.labels(name)
        self._start = None

    def __enter__(self) -> span:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self._child.observe(time.perf_counter() - self._start)

    def __call__(self, fn):
        child = self._child

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                child.observe(time.perf_counter() - start)

        return timed


def snapshot() -> dict:
    """Every metric's current values: ``{name: {label values: value}}``.

    Label values are a tuple in the order docs/observability.md lists them (``()`` for a metric
    without labels). A counter's or gauge's value is a float; a histogram's is
    ``{"count": n, "sum": seconds, "buckets": {upper bound: cumulative count}}``. Example::

        munet.metrics.snapshot()["munet_compile_traces_total"][("step", "first_call")]  # 1.0
    """
    return {m.name: m.samples() for m in _METRICS}


class _Collector:
    """A prometheus_client collector that reports MuNet's store (register it in any registry)."""

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        for metric in _METRICS:
            labels = list(metric.labelnames)
            if metric.kind == "histogram":
                family = HistogramMetricFamily(metric.name, metric.documentation, labels=labels)
                for values, h in metric.samples().items():
                    buckets = [(floatToGoString(b), n) for b, n in h["buckets"].items()]
                    family.add_metric(list(values), buckets, h["sum"])
            else:
                kind = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
                family = kind(metric.name, metric.documentation, labels=labels)
                for values, value in metric.samples().items():
                    family.add_metric(list(values), value)
            yield family

    def describe(self):
        return self.collect()


COLLECTOR = _Collector()
_registry = None
_registry_lock = threading.Lock()


def _prometheus_client():
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImportError(
            "munet.metrics: exporting in Prometheus format needs prometheus_client; "
            "install it with pip install 'munet[metrics]'"
        ) from exc
    return prometheus_client


def registry():
    """MuNet's own ``prometheus_client.CollectorRegistry``, holding :data:`COLLECTOR`."""
    global _registry
    client = _prometheus_client()
    with _registry_lock:
        if _registry is None:
            _registry = client.CollectorRegistry()
            _registry.register(COLLECTOR)
        return _registry


def generate_latest() -> bytes:
    """MuNet's metrics in Prometheus text format (prometheus_client's ``generate_latest``)."""
    return _prometheus_client().generate_latest(registry())


def start_http_server(port: int, addr: str = "0.0.0.0"):
    """Serve MuNet's metrics at ``http://addr:port/metrics`` from a daemon thread with prometheus_client's
    ``start_http_server``, and return what it returns (``(server, thread)`` in current versions)."""
    return _prometheus_client().start_http_server(port, addr, registry=registry())
