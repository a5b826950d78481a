"""serve.http.litserve_compat.inject_context: LitServe's hook-context injection, its signature look-up
cached."""

from __future__ import annotations

from litserve.loops import simple_loops

from serve.http.litserve_compat import inject_context


class Hooks:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def plain(self, x: int) -> int:
        self.calls.append(("plain", x))
        return x + 1

    def with_context(self, x: int, context: dict) -> int:
        context["seen"] = x
        self.calls.append(("with_context", x))
        return x * 2


def test_the_batched_loop_uses_it():
    assert simple_loops._inject_context is inject_context


def test_context_goes_only_to_hooks_that_take_it_on_every_call():
    hooks, other = Hooks(), Hooks()
    for _ in range(3):  # later calls read the cached answer, for any instance of the class
        context: dict = {}
        assert inject_context(context, hooks.plain, 1) == 2 and context == {}
        assert inject_context(context, hooks.with_context, 3) == 6 and context == {"seen": 3}
        assert inject_context({}, other.with_context, 4) == 8
    assert inject_context({}, lambda y: y - 1, 5) == 4
    assert hooks.calls == [("plain", 1), ("with_context", 3)] * 3 and len(other.calls) == 3
