"""serve.http.litserve_compat: the request queue's background put, on a real Manager queue; the ZeroMQ
answer transport that ``fast_queue=True`` names, wired to a real broker."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import pickle
from queue import Empty

import litserve as ls
import pytest
import zmq

from serve.http.litserve_compat import BackgroundPutQueue, LitServer, ZMQTransport, request_queue


def test_puts_arrive_in_order_and_reads_go_to_the_manager_queue():
    with mp.Manager() as manager:
        raw = manager.Queue()
        queue = BackgroundPutQueue(raw)
        for i in range(50):
            queue.put((0, f"u{i}", 0.0, {"i": i}))
        assert [raw.get(timeout=10)[1] for _ in range(50)] == [f"u{i}" for i in range(50)]
        queue.put("last")
        assert queue.get(timeout=10) == "last" and queue.qsize() == 0


def test_a_request_queue_moves_many_items_per_round_trip():
    with mp.Manager() as manager:
        raw = manager.RequestQueue()
        raw.put_many([f"a{i}" for i in range(5)])
        assert raw.get_batch(10, 3) == ["a0", "a1", "a2"]
        assert raw.get_batch(10, 10) == ["a3", "a4"]
        assert raw.get_batch(0.05, 3) == []  # nothing came within the timeout
        queue = BackgroundPutQueue(raw)  # its sender thread puts what gathered in one put_many
        for i in range(200):
            queue.put(f"b{i}")
        got: list[str] = []
        while len(got) < 200:
            got += raw.get_batch(10, 64)
        assert got == [f"b{i}" for i in range(200)] and raw.qsize() == 0


def test_a_pickled_copy_is_the_plain_manager_proxy():
    with mp.Manager() as manager:
        raw = manager.Queue()
        copy = pickle.loads(pickle.dumps(BackgroundPutQueue(raw)))
        assert not isinstance(copy, BackgroundPutQueue)
        copy.put("direct")
        assert raw.get(timeout=10) == "direct"


class _NoModel(ls.LitAPI):
    def setup(self, device: str) -> None:
        pass

    def predict(self, x: object) -> object:
        return x


@pytest.mark.parametrize("fast_queue", [True, False])
def test_fast_queue_selects_the_transport_it_names(fast_queue: bool) -> None:
    """LitServe 0.2.19 drops ``fast_queue`` (a misnamed TransportConfig field); the compat server keeps it."""
    server = LitServer([_NoModel()], fast_queue=fast_queue)
    assert server.transport_config.transport_type == ("zmq" if fast_queue else "mp")


def test_the_server_s_request_queues_take_batches() -> None:
    server = LitServer([_NoModel()])
    manager = server._init_manager(1)
    try:
        queue = request_queue(server, _NoModel().api_path)
        queue.put("x")
        assert pickle.loads(pickle.dumps(queue)).get_batch(10, 4) == ["x"]  # what a worker holds
    finally:
        manager.shutdown()


def test_zmq_transport_delivers_an_answer_from_a_worker_to_an_api_server() -> None:
    """With the broker's addresses wired by name, what a worker sends reaches the API server that
    subscribed (LitServe's factory swaps them, and nothing would arrive)."""
    server = LitServer([_NoModel()], fast_queue=True)
    manager = server._init_manager(1)
    try:
        transport = server._transport
        assert isinstance(transport, ZMQTransport)
        assert transport.backend_address == server.transport_config.backend_address
        # each process gets a pickled copy of the transport, as LitServe's spawned processes do
        worker, api_server = (pickle.loads(pickle.dumps(transport)) for _ in range(2))

        async def receive() -> object:
            api_server.setup(zmq.SUB, consumer_id=0)
            # A subscription reaches the broker some time after it is made, and what is published
            # before is dropped (ZeroMQ's slow joiner): send again until an answer arrives.
            deadline = asyncio.get_running_loop().time() + 60  # only turns a hang into a failure
            while True:
                worker.send(("uid-1", ({"ok": 1}, "OK")), consumer_id=0)
                try:
                    return await api_server.areceive(consumer_id=0, timeout=0.1)
                except Empty:
                    assert asyncio.get_running_loop().time() < deadline, "no answer reached the API server"

        assert asyncio.run(receive()) == ("uid-1", ({"ok": 1}, "OK"))
        answers = [(f"uid-{n}", ({"ok": n}, "OK")) for n in (2, 3, 4)]
        worker.send_many(answers, consumer_id=0)  # one message, handed out one answer at a time

        async def receive_all() -> list:
            return [await api_server.areceive(consumer_id=0, timeout=60) for _ in answers]

        assert asyncio.run(receive_all()) == answers
        worker.close()
        api_server.close()
        transport.close(send_sentinel=True)  # the main process opened no socket: LitServe's would raise
    finally:
        manager.shutdown()
