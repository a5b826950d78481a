"""The pacer: after work costing ``c`` the pause keeps the work within its share; an idle poll stays
short. (The graph owner's use of it, on a fake clock: tests/unit/test_graph_owner.py.)"""

from __future__ import annotations

import pytest

from serve.ingest.pacing import Pacer


def test_the_pause_keeps_the_share_and_idle_polls_stay_short() -> None:
    pacer = Pacer(share=0.25, poll_s=0.05)
    assert pacer.pause(0.1, worked=True) == pytest.approx(0.3)  # 0.1 s of work in every 0.4 s
    assert pacer.pause(0.001, worked=False) == 0.05
    assert pacer.pause(0.1, worked=False) == pytest.approx(0.3)  # even looking cost that much
    assert pacer.pause(0.1, worked=True) == pytest.approx(0.3)
    assert pacer.pause(5.0, worked=True) == pytest.approx(0.3)  # one slow step: the median holds
    assert pacer.pause(0.3, worked=True) == pytest.approx(0.6)  # median of 0.1, 0.1, 5, 0.3: 0.2
    assert pacer.pause(0.3, worked=True) == pytest.approx(0.9)  # a lasting change is followed
    assert Pacer(share=1.0).pause(0.5, worked=True) == 0.0  # unpaced: step again at once
    with pytest.raises(ValueError, match="share"):
        Pacer(share=0.0)


def test_a_lag_target_pauses_as_long_as_it_allows_and_the_share_still_bounds_the_work() -> None:
    pacer = Pacer(share=0.3, poll_s=0.05, lag_target_s=0.8)
    # A batch arriving as a 0.1 s step starts waits for it, the pause and the next step: 0.8 s.
    assert pacer.pause(0.1, worked=True) == pytest.approx(0.6)
    assert pacer.pause(0.001, worked=False) == 0.05  # idle: a lone batch is not held back
    slow = Pacer(share=0.3, lag_target_s=0.8)
    assert slow.pause(0.3, worked=True) == pytest.approx(0.7)  # the share's 0.7 s beats the target's 0.2
    assert Pacer(share=0.3, lag_target_s=0.0).pause(0.1, worked=True) == pytest.approx(0.1 * 0.7 / 0.3)
    with pytest.raises(ValueError, match="lag target"):
        Pacer(share=0.3, lag_target_s=-1.0)
