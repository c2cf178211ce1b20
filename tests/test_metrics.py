"""munet/metrics.py: what is counted, the Prometheus export, span(), thread safety.

Metrics are process-wide, so every test compares a snapshot before with one after (other tests
in the process count too) and uses label values of its own where it can.
"""

import gc
import sys
import threading
import urllib.request

import pytest

import munet
import munet.nn as nn
from munet import metrics
from munet.compiler.codegen import build
from munet.utils.data import DataLoader, TensorDataset
from tests.compiler.models import train_step


def _value(name, labels=(), snap=None):
    snap = metrics.snapshot() if snap is None else snap
    return snap[name].get(labels, {"count": 0} if name.endswith("_seconds") else 0.0)


def _count(name, labels=()):
    return _value(name, labels)["count"]


def test_compiled_calls_and_traces_are_counted_with_their_reason():
    def scaled_exp(x):
        return (x * 3.0).exp()

    f = munet.compile(scaled_exp)
    calls = _value("munet_compiled_calls_total", ("scaled_exp",))
    first = _value("munet_compile_traces_total", ("scaled_exp", "first_call"))
    miss = _value("munet_compile_traces_total", ("scaled_exp", "cache_miss"))
    compiles = _count("munet_compile_seconds", ("scaled_exp",))
    f(munet.ones(3))
    f(munet.ones(3))  # replays
    f(munet.ones(4))  # a new shape: a retrace
    assert _value("munet_compiled_calls_total", ("scaled_exp",)) == calls + 3
    assert _value("munet_compile_traces_total", ("scaled_exp", "first_call")) == first + 1
    assert _value("munet_compile_traces_total", ("scaled_exp", "cache_miss")) == miss + 1
    assert _count("munet_compile_seconds", ("scaled_exp",)) == compiles + 2


def test_a_failed_guard_is_a_retrace_with_reason_guard_failed():
    munet.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = munet.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.05)
    x, y = munet.randn(8, 4), munet.randint(0, 3, (8,))
    step = munet.compile(train_step)
    failed = _value("munet_compile_traces_total", ("train_step", "guard_failed"))
    step(model, opt, x, y)
    step(model, opt, x, y)  # the optimizer state exists now: the steady specialization
    opt.param_groups[0]["weight_decay"] = 0.0  # the trace took `weight_decay != 0`
    step(model, opt, x, y)
    assert _value("munet_compile_traces_total", ("train_step", "guard_failed")) == failed + 1
    assert step.stats()["traces"] == 3


def test_kernel_compiles_and_cache_hits_are_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("MUNET_CACHE_DIR", str(tmp_path))
    if build.find_compiler() is None:
        pytest.skip("no C compiler: the cpu plan runs NumPy kernels, nothing is compiled")
    misses = _value("munet_kernel_cache_misses_total", ("cpu",))
    compiles = _count("munet_kernel_compile_seconds", ("cpu",))
    hits = _value("munet_kernel_cache_hits_total", ("cpu",))
    x = munet.ones(5)
    munet.compile(lambda x: (x * 0.25).exp() + 1.5)(x)  # a new cache directory: compiled
    assert _value("munet_kernel_cache_misses_total", ("cpu",)) > misses
    assert _count("munet_kernel_compile_seconds", ("cpu",)) > compiles
    assert _value("munet_kernel_cache_hits_total", ("cpu",)) == hits
    misses = _value("munet_kernel_cache_misses_total", ("cpu",))
    munet.compile(lambda x: (x * 0.25).exp() + 1.5)(x)  # the same kernel: found compiled
    assert _value("munet_kernel_cache_hits_total", ("cpu",)) > hits
    assert _value("munet_kernel_cache_misses_total", ("cpu",)) == misses


def test_cpu_arena_bytes_are_a_gauge_released_with_the_program():
    f = munet.compile(lambda x: (x.exp() * 2.0 + x).sum(0), fuse=False)
    gc.collect()  # programs of earlier tests are released now, not while this one counts
    gc.disable()
    try:
        before = _value("munet_allocated_bytes", ("cpu",))
        f(munet.ones(64, 32))
        arena = f.stats()["arena_bytes"]
        assert arena > 0
        assert _value("munet_allocated_bytes", ("cpu",)) == before + arena
    finally:
        gc.enable()
    del f
    gc.collect()
    assert _value("munet_allocated_bytes", ("cpu",)) == before


def test_vulkan_allocated_bytes_and_host_syncs(vulkan):
    label = str(vulkan)
    x = munet.ones(1 << 18, device=vulkan)  # 1 MiB
    held = _value("munet_allocated_bytes", (label,))
    assert held == munet.vulkan.memory_stats(vulkan)["allocated_bytes"] and held >= 1 << 20
    readbacks = _value("munet_host_syncs_total", (label, "readback"))
    syncs = _value("munet_host_syncs_total", (label, "synchronize"))
    assert x[-1].item() == 1.0
    munet.vulkan.synchronize(vulkan)
    assert _value("munet_host_syncs_total", (label, "readback")) == readbacks + 1
    assert _value("munet_host_syncs_total", (label, "synchronize")) == syncs + 1
    del x
    gc.collect()
    assert _value("munet_allocated_bytes", (label,)) <= held - (1 << 20)


def test_dataloader_wait_time_is_observed_per_batch():
    loader = DataLoader(TensorDataset(munet.arange(10.0)), batch_size=4)
    before = _value("munet_dataloader_wait_seconds")
    assert len(list(loader)) == 3
    after = _value("munet_dataloader_wait_seconds")
    assert after["count"] == before["count"] + 3  # the StopIteration at the end is not a batch
    assert after["sum"] > before["sum"]


def test_span_times_blocks_and_decorated_calls_including_failures():
    with metrics.span("test-span-block"):
        pass
    assert _count("munet_span_seconds", ("test-span-block",)) == 1

    @metrics.span("test-span-decorated")
    def work(fail):
        if fail:
            raise KeyError("x")
        return 7

    assert work(False) == 7 and work(False) == 7
    with pytest.raises(KeyError):
        work(True)
    h = _value("munet_span_seconds", ("test-span-decorated",))
    assert h["count"] == 3 and h["buckets"][float("inf")] == 3 and h["sum"] >= 0


def test_recording_is_thread_safe():
    threads, per_thread = 8, 2000
    timed = metrics.span("test-span-threads")(lambda: None)

    def record():
        for _ in range(per_thread):
            metrics.count_host_sync("test-threads", "readback")
            timed()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        workers = [threading.Thread(target=record) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert _value("munet_host_syncs_total", ("test-threads", "readback")) == threads * per_thread
    assert _count("munet_span_seconds", ("test-span-threads",)) == threads * per_thread


def test_labels_must_be_strings_in_order():
    with pytest.raises(ValueError, match=r"munet_host_syncs_total: expected string values for the labels"):
        metrics.count_host_sync(0, "readback")


def test_prometheus_text_parses_and_carries_every_metric():
    prometheus_parser = pytest.importorskip("prometheus_client.parser")
    with metrics.span("test-span-export"):
        pass
    metrics.count_compiled_call('quote"and\\slash')  # label values are escaped by prometheus_client
    text = metrics.generate_latest().decode()
    families = {f.name: f for f in prometheus_parser.text_string_to_metric_families(text)}
    for name, kind in [
        ("munet_compiled_calls", "counter"),
        ("munet_compile_traces", "counter"),
        ("munet_compile_seconds", "histogram"),
        ("munet_kernel_compile_seconds", "histogram"),
        ("munet_kernel_cache_hits", "counter"),
        ("munet_kernel_cache_misses", "counter"),
        ("munet_allocated_bytes", "gauge"),
        ("munet_host_syncs", "counter"),
        ("munet_dataloader_wait_seconds", "histogram"),
        ("munet_span_seconds", "histogram"),
    ]:
        assert families[name].type == kind, name
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in families["munet_span_seconds"].samples}
    assert samples[("munet_span_seconds_count", (("name", "test-span-export"),))] == 1
    assert samples[("munet_span_seconds_bucket", (("le", "+Inf"), ("name", "test-span-export")))] == 1
    calls = {s.labels["function"]: s.value for s in families["munet_compiled_calls"].samples}
    assert calls['quote"and\\slash'] == 1


def test_collector_registers_in_another_registry_and_the_http_server_serves_it():
    prometheus_client = pytest.importorskip("prometheus_client")

    other = prometheus_client.CollectorRegistry()
    other.register(metrics.COLLECTOR)
    assert b"munet_compiled_calls_total" in prometheus_client.generate_latest(other)
    server, thread = metrics.start_http_server(0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            body = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert "# TYPE munet_dataloader_wait_seconds histogram" in body


def test_without_prometheus_client_counting_works_and_export_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import prometheus_client raises ImportError
    before = _value("munet_host_syncs_total", ("test-no-client", "synchronize"))
    metrics.count_host_sync("test-no-client", "synchronize")
    assert _value("munet_host_syncs_total", ("test-no-client", "synchronize")) == before + 1
    for export in (metrics.generate_latest, lambda: metrics.start_http_server(0), metrics.registry):
        with pytest.raises(ImportError, match=r"pip install 'munet\[metrics\]'"):
            export()
