"""serve.litserve_compat: the request queue's background put, on a real Manager queue."""

from __future__ import annotations

import multiprocessing as mp
import pickle

from serve.litserve_compat import BackgroundPutQueue


def test_puts_arrive_in_order_and_reads_go_to_the_manager_queue():
    with mp.Manager() as manager:
        raw = manager.Queue()
        queue = BackgroundPutQueue(raw)
        for i in range(50):
            queue.put((0, f"u{i}", 0.0, {"i": i}))
        assert [raw.get(timeout=10)[1] for _ in range(50)] == [f"u{i}" for i in range(50)]
        queue.put("last")
        assert queue.get(timeout=10) == "last" and queue.qsize() == 0


def test_a_pickled_copy_is_the_plain_manager_proxy():
    with mp.Manager() as manager:
        raw = manager.Queue()
        copy = pickle.loads(pickle.dumps(BackgroundPutQueue(raw)))
        assert not isinstance(copy, BackgroundPutQueue)
        copy.put("direct")
        assert raw.get(timeout=10) == "direct"
