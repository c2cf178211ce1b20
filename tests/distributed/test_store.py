"""munet.distributed's stores against torch.distributed's: the same operations give the same results."""

import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

import munet.distributed as dist

torch_dist = pytest.importorskip("torch.distributed")

SHORT = timedelta(seconds=0.3)


def _sequence(store) -> list:
    """A run of every store operation; the results, with exceptions as their class names."""
    results = []

    def record(call):
        try:
            results.append(call())
        except Exception as error:  # the class name is compared, munet's and torch's share names
            results.append(type(error).__name__)

    record(lambda: store.set("a", "x"))
    record(lambda: store.get("a"))
    record(lambda: store.set("b", b"\x00\xff"))
    record(lambda: store.get("b"))
    record(lambda: store.add("c", 3))
    record(lambda: store.add("c", -5))
    record(lambda: store.get("c"))
    record(lambda: store.compare_set("n", "", "v"))
    record(lambda: store.compare_set("n2", "q", "v"))
    record(lambda: store.check(["n2"]))
    record(lambda: store.compare_set("n", "w", "z"))
    record(lambda: store.compare_set("n", "v", "z"))
    record(lambda: store.get("n"))
    record(lambda: store.check(["a", "zz"]))
    record(lambda: store.check(["a", "n"]))
    record(lambda: store.delete_key("a"))
    record(lambda: store.delete_key("a"))
    record(lambda: store.num_keys())
    record(lambda: store.append("ap", "1"))
    record(lambda: store.append("ap", b"2"))
    record(lambda: store.get("ap"))
    record(lambda: store.multi_set(["m1", "m2"], ["1", b"2"]))
    record(lambda: store.multi_get(["m2", "ap", "c"]))
    record(lambda: sorted(store.list_keys()))
    record(lambda: store.num_keys())
    record(lambda: store.get("missing"))
    record(lambda: store.wait(["c", "missing"], SHORT))
    record(lambda: store.wait(["c", "n"]))
    record(lambda: store.has_extended_api())
    record(lambda: store.barrier("bar", 1))
    record(lambda: store.queue_len("q"))
    record(lambda: store.queue_push("q", "a"))
    record(lambda: store.queue_push("q", b"b"))
    record(lambda: (store.queue_len("q"), store.check(["q"]), "q" in store.list_keys()))
    record(lambda: store.queue_pop("q"))
    record(lambda: store.queue_pop("q", False))
    record(lambda: (store.queue_len("q"), store.check(["q"])))
    record(lambda: store.queue_pop("q", block=False))
    record(lambda: store.queue_pop("q"))
    record(lambda: store.queue_push("q3", "z"))
    record(lambda: (store.delete_key("q3"), store.queue_len("q3")))
    return results


def _fresh(module, kind, tmp_path):
    if kind == "tcp":
        return module.TCPStore("127.0.0.1", 0, 1, True, timeout=SHORT)
    if kind == "hash":
        store = module.HashStore()
        store.set_timeout(SHORT)
        return store
    if kind == "file":
        store = module.FileStore(str(tmp_path / f"{module.__name__}.store"), 1)
        store.set_timeout(SHORT)
        return store
    return module.PrefixStore("pre", _fresh(module, "hash", tmp_path))


@pytest.mark.parametrize("kind", ["tcp", "hash", "file", "prefix"])
def test_store_operations_match_torch(kind, tmp_path):
    # PyTorch's FileStore departs from its Store contract (delete_key of a missing key is True, a
    # hidden reference-count key shows in list_keys, a timeout is a plain RuntimeError, no append),
    # so MuNet's FileStore is held to the contract, as PyTorch's HashStore keeps it.
    reference = _fresh(torch_dist, "hash" if kind == "file" else kind, tmp_path)
    ours, theirs = _sequence(_fresh(dist, kind, tmp_path)), _sequence(reference)
    assert ours == theirs


def test_error_classes_have_torch_names_and_hierarchy():
    for name in ("DistError", "DistBackendError", "DistNetworkError", "DistStoreError", "QueueEmptyError"):
        ours, theirs = getattr(dist, name), getattr(torch_dist, name)
        assert [c.__name__ for c in ours.__mro__] == [c.__name__ for c in theirs.__mro__]


def test_prefix_store_writes_prefixed_keys_into_the_underlying_store():
    base = dist.HashStore()
    store = dist.PrefixStore("job", base)
    store.set("k", "v")
    assert base.get("job/k") == b"v" and store.underlying_store is base
    assert store.list_keys() == ["k"] and store.num_keys() == base.num_keys() == 1


def test_tcp_store_is_shared_between_processes_and_get_waits():
    master = dist.TCPStore("127.0.0.1", 0, 2, True, timeout=timedelta(seconds=60), wait_for_workers=False)
    client = (
        "import munet.distributed as d, datetime;"
        f"s = d.TCPStore('127.0.0.1', {master.port}, 2, False, timeout=datetime.timedelta(seconds=60));"
        "s.set('from_client', s.get('from_master') + b'!'); s.add('count', 2)"
    )
    worker = subprocess.Popen([sys.executable, "-c", client])
    time.sleep(0.2)
    master.set("from_master", b"hi")
    assert master.get("from_client") == b"hi!"
    assert worker.wait(60) == 0
    assert master.add("count", 1) == 3


def test_tcp_store_get_from_another_thread_waits_for_set():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=timedelta(seconds=30))
    other = store.clone()
    got = []
    reader = threading.Thread(target=lambda: got.append(other.get("later")))
    reader.start()
    time.sleep(0.1)
    store.set("later", "now")
    reader.join(30)
    assert got == [b"now"]


def test_tcp_store_master_waits_for_workers_then_times_out_clearly():
    with pytest.raises(dist.DistStoreError, match="1/2 clients joined"):
        dist.TCPStore("127.0.0.1", 0, 2, True, timeout=SHORT)


def test_tcp_store_client_without_server_raises_network_error():
    with pytest.raises(dist.DistNetworkError, match=r"timed out after 300ms while trying to connect to \(127.0.0.1"):
        dist.TCPStore("127.0.0.1", 1, 2, False, timeout=SHORT)


def test_store_argument_errors_are_clear():
    store = dist.HashStore()
    with pytest.raises(TypeError, match="key must be a str"):
        store.set(1, "v")
    with pytest.raises(TypeError, match="value must be str or bytes"):
        store.set("k", 1.5)
    store.set("word", "abc")
    with pytest.raises(dist.DistStoreError, match="not an integer"):
        store.add("word", 1)
    with pytest.raises(TypeError, match="timedelta"):
        store.set_timeout(5)
