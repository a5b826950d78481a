"""Bucket ladder and padding: smallest-fit choice, worst cases fit, Pad semantics hold."""

from __future__ import annotations

import itertools

import pytest
import torch

from models.graph.buckets import Bucket, BucketLadder, empty_inputs, pad_inputs, pad_rows
from models.graph.features import gather_inputs
from training.bench.random_batches import random_batch, random_tables, tree_ladder, tree_max_sizes

TABLES = random_tables(300, 80)
MAX_SIZES = tree_max_sizes((12, 8))


@pytest.fixture(scope="module")
def ladder() -> BucketLadder:
    return tree_ladder("customer", 32, factor=2.0)


def test_ladder_is_monotone_from_batch_one_to_the_max(ladder: BucketLadder) -> None:
    caps = [[b.seeds, *b.nodes.values(), *b.edges.values()] for b in ladder.buckets]
    assert len(caps) >= 3
    assert all(a <= b for lo, hi in itertools.pairwise(caps) for a, b in zip(lo, hi, strict=True))
    assert caps[0] != caps[-1]
    one_nodes, _ = MAX_SIZES("customer", 1)
    assert all(ladder.buckets[0].nodes[t] > n for t, n in one_nodes.items())
    assert ladder.buckets[-1].seeds == 32


@pytest.mark.parametrize("num_seeds", [1, 2, 5, 17, 32])
def test_worst_case_batches_fit(ladder: BucketLadder, num_seeds: int) -> None:
    inputs = gather_inputs(TABLES, random_batch(TABLES, "customer", num_seeds, fill=1.0))
    assert inputs.num_nodes() == MAX_SIZES("customer", num_seeds)[0]
    bucket = ladder.choose(inputs)
    assert all(bucket.nodes[t] > n for t, n in inputs.num_nodes().items())


def test_choice_is_the_smallest_bucket_that_holds(ladder: BucketLadder) -> None:
    gen = torch.Generator().manual_seed(3)
    for num_seeds, fill in itertools.product([1, 2, 3, 5, 8, 13, 21, 32], [0.1, 0.5, 0.9]):
        inputs = gather_inputs(TABLES, random_batch(TABLES, "customer", num_seeds, fill=fill, generator=gen))
        bucket = ladder.choose(inputs)
        index = ladder.buckets.index(bucket)
        args = (inputs.num_seeds, inputs.num_nodes(), inputs.num_edges())
        assert bucket.holds(*args)
        assert all(not smaller.holds(*args) for smaller in ladder.buckets[:index])


def test_too_large_or_wrong_seed_type_is_refused(ladder: BucketLadder) -> None:
    with pytest.raises(ValueError, match="exceeds the largest bucket"):
        ladder.choose(gather_inputs(TABLES, random_batch(TABLES, "customer", 33, fill=1.0)))
    with pytest.raises(ValueError, match="cannot hold"):
        ladder.choose(gather_inputs(TABLES, random_batch(TABLES, "article", 2)))


def test_padding_follows_pad_semantics(ladder: BucketLadder) -> None:
    inputs = gather_inputs(TABLES, random_batch(TABLES, "customer", 6, fill=0.6))
    bucket = ladder.choose(inputs)
    padded = pad_inputs(inputs, bucket)
    real = inputs.num_nodes()
    assert padded.num_nodes() == bucket.nodes and padded.num_edges() == bucket.edges
    assert padded.seed_rows == bucket.seeds and padded.num_seeds == 6
    for t, n in real.items():
        assert bucket.nodes[t] - n >= 1
        assert torch.equal(padded.cat[t][:n], inputs.cat[t])
        assert torch.equal(padded.num[t][:n], inputs.num[t])
        assert not padded.cat[t][n:].any() and not padded.num[t][n:].any()
        assert not padded.rel_time[t][n:].any()
    for (src, rel, dst), index in padded.edge_index.items():
        count = inputs.edge_index[(src, rel, dst)].shape[1]
        assert torch.equal(index[:, :count], inputs.edge_index[(src, rel, dst)])
        assert (index[0, count:] == real[src]).all() and (index[1, count:] == real[dst]).all()


def test_pad_rows_and_empty_inputs(ladder: BucketLadder) -> None:
    assert torch.equal(pad_rows(torch.tensor([1.0, 2.0]), 4), torch.tensor([1.0, 2.0, 0.0, 0.0]))
    bucket = ladder.buckets[1]
    empty = empty_inputs(bucket, "customer", {"customer": (4, 2), "article": (11, 0)})
    assert empty.num_nodes() == bucket.nodes and empty.num_edges() == bucket.edges
    assert empty.num["article"].shape == (bucket.nodes["article"], 0)


def test_ladder_json_round_trip(ladder: BucketLadder) -> None:
    assert BucketLadder.from_dict(ladder.to_dict()) == ladder
    assert Bucket.from_dict(ladder.buckets[0].to_dict()) == ladder.buckets[0]
