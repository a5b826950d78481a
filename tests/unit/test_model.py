"""Model: padding and trimming are exact for every head, the forward has no graph break,
heads and losses behave, features are the snapshot's rows."""

from __future__ import annotations

import pytest
import torch

from models.graph.buckets import pad_inputs, pad_rows
from models.graph.features import gather_inputs, table_specs
from models.nn.config import ModelConfig
from models.nn.heads import PurchaseHead
from models.nn.model import TaskModel
from training.bench.random_batches import (
    RandomTables,
    random_batch,
    random_purchase_extras,
    random_tables,
    tree_ladder,
)

TABLES = random_tables(300, 80)
SPECS = table_specs(TABLES)
CASES = [("churn", "customer"), ("sales", "article"), ("purchase", "customer"), ("purchase", "article")]


def _model(task: str, **config: object) -> TaskModel:
    torch.manual_seed(0)
    return TaskModel(task, SPECS, ModelConfig(hidden=32, head_hidden=16, embedding_dim=8, **config)).eval()


@pytest.mark.parametrize(("task", "seed_type"), CASES)
def test_padded_forward_matches_unpadded(task: str, seed_type: str) -> None:
    model = _model(task)
    ladder = tree_ladder(seed_type, 16)
    gen = torch.Generator().manual_seed(1)
    for num_seeds, fill in [(1, 0.3), (5, 0.9), (16, 0.5), (3, 0.0)]:
        inputs = gather_inputs(TABLES, random_batch(TABLES, seed_type, num_seeds, fill=fill, generator=gen))
        padded = pad_inputs(inputs, ladder.choose(inputs))
        with torch.no_grad():
            expected, got = model(inputs), model(padded)
        assert got.shape[0] == padded.seed_rows
        torch.testing.assert_close(got[:num_seeds], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("task", "seed_type"), CASES)
def test_trimming_is_exact(task: str, seed_type: str) -> None:
    trimmed, full = _model(task, trim=True), _model(task, trim=False)
    full.load_state_dict(trimmed.state_dict())
    inputs = gather_inputs(TABLES, random_batch(TABLES, seed_type, 7, fill=0.7))
    with torch.no_grad():
        torch.testing.assert_close(trimmed(inputs), full(inputs), rtol=1e-5, atol=1e-5)


def test_neighbours_matter() -> None:
    model = _model("churn")
    inputs = gather_inputs(TABLES, random_batch(TABLES, "customer", 4, fill=0.9))
    alone = gather_inputs(TABLES, random_batch(TABLES, "customer", 4, fill=0.0))
    alone.cat["customer"], alone.num["customer"] = inputs.cat["customer"][:4], inputs.num["customer"][:4]
    with torch.no_grad():
        assert not torch.allclose(model(inputs), model(alone))


@pytest.mark.parametrize(("task", "seed_type"), [("churn", "customer"), ("purchase", "article")])
def test_forward_has_no_graph_breaks(task: str, seed_type: str) -> None:
    inputs = gather_inputs(TABLES, random_batch(TABLES, seed_type, 3))
    explanation = torch._dynamo.explain(_model(task))(inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_tables_without_edges_get_no_temporal_aggregates() -> None:
    assert not TABLES.temporal
    assert all(SPECS[t].num_numeric == TABLES.numeric[t].shape[1] for t in TABLES.numeric)


def test_gather_reads_the_snapshot_rows() -> None:
    batch = random_batch(TABLES, "customer", 3)
    inputs = gather_inputs(TABLES, batch)
    for t, ids in batch.node_ids.items():
        assert torch.equal(inputs.cat[t], TABLES.categorical[t][ids])
        assert torch.equal(inputs.num[t], TABLES.numeric[t][ids])
        assert (inputs.rel_time[t] > 0).sum() == ids.numel() - (3 if t == "customer" else 0)
    assert inputs.seed_rows == inputs.num_seeds == 3
    as_numpy = RandomTables({t: v.numpy() for t, v in TABLES.categorical.items()},
                            {t: v.numpy() for t, v in TABLES.numeric.items()}, TABLES.cardinalities)
    from_numpy = gather_inputs(as_numpy, batch)
    assert all(torch.equal(from_numpy.cat[t], inputs.cat[t]) for t in inputs.cat)


def test_losses_ignore_padded_rows() -> None:
    out, target = torch.randn(5), torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])
    for task in ("churn", "sales"):
        head = _model(task).head
        value = out.abs() if task == "sales" else out
        full = head.loss(value, target, torch.ones(5))
        padded = head.loss(pad_rows(value, 8), pad_rows(target, 8), pad_rows(torch.ones(5), 8))
        torch.testing.assert_close(padded, full)
    head = _model("purchase").head
    query, keys, log_q = torch.randn(4, 9), torch.randn(4, 9), torch.rand(4)
    full = head.loss(query, keys, torch.ones(4))
    padded = head.loss(pad_rows(query, 6), pad_rows(keys, 7), pad_rows(torch.ones(4), 6))
    torch.testing.assert_close(padded, full)
    extras = random_purchase_extras(TABLES, 4)
    full = head.loss(query, keys, torch.ones(4), log_q, extras)
    padded = head.loss(pad_rows(query, 6), pad_rows(keys, 7), pad_rows(torch.ones(4), 6), pad_rows(log_q, 7),
                       extras.padded(6, 7))
    torch.testing.assert_close(padded, full)


@pytest.mark.parametrize("negatives", [0, 3])
def test_purchase_loss_with_history_is_the_softmax_over_both_candidate_sets(negatives: int) -> None:
    """Each positive (the drawn in-batch key, or every bought history slot) against the row's
    negatives: the other in-batch keys, the catalogue negatives (never the row's own positive
    article) and the unbought history slots."""
    head = _model("purchase").head
    keys_total = 5 + negatives
    query, keys, log_q = torch.randn(5, 9), torch.randn(keys_total, 9), torch.rand(keys_total)
    extras = random_purchase_extras(TABLES, 5, seed=3)
    if negatives:  # the last catalogue negative is row 0's own positive: no negative of row 0
        drawn = torch.cat([torch.randint(10, (negatives - 1,)), extras.article[:1]])
        popularity = torch.cat([extras.popularity, torch.rand(negatives, extras.popularity.shape[1])])
        extras = extras._replace(article=torch.cat([extras.article, drawn]), popularity=popularity,
                                 negative=torch.arange(keys_total) >= 5)
    history = extras.history
    keys_with_prior = head.with_prior(keys, extras.popularity)
    repeat = head.repeat_score(query, history)
    expected = []
    for i in range(5):  # plain loops: keys not in row i's history, then its history slots
        own = history.article[i][history.mask[i]].tolist()
        logits, positives = [], []
        for j in range(keys_total):
            article = extras.article[j].item()
            if article in own or (j >= 5 and article == extras.article[i].item()):
                continue
            if j == i:
                positives.append(len(logits))
            logits.append(query[i] @ keys_with_prior[j] - log_q[j])
        for slot in range(len(own)):
            if extras.bought[i, slot]:
                positives.append(len(logits))
            logits.append(repeat[i, slot])
        negatives_i = [v for n, v in enumerate(logits) if n not in positives]
        expected.append(torch.stack([torch.logsumexp(torch.stack([logits[p], *negatives_i]), 0) - logits[p]
                                     for p in positives]).mean())
    got = head.loss(query, keys, torch.ones(5), log_q, extras)
    torch.testing.assert_close(got, torch.stack(expected).mean())
    padded = head.loss(pad_rows(query, 6), pad_rows(keys, keys_total + 2), pad_rows(torch.ones(5), 6),
                       pad_rows(log_q, keys_total + 2), extras.padded(6, keys_total + 2))
    torch.testing.assert_close(padded, got)


def test_purchase_rank_scores_history_articles_by_the_repeat_score() -> None:
    head = _model("purchase").head
    query, keys = head(torch.randn(3, 32), "customer"), head(torch.randn(80, 32), "article")
    history = random_purchase_extras(TABLES, 3, seed=5).history
    scores = head.scores(query, keys, history)
    expected = (query @ keys.T).clone()
    repeat = head.repeat_score(query, history)
    for i in range(3):
        for slot in range(history.mask.shape[1]):
            if history.mask[i, slot]:
                expected[i, history.article[i, slot]] = repeat[i, slot]
    torch.testing.assert_close(scores, expected)
    top_scores, top = head.rank(query, keys, 12, history)
    assert torch.equal(top_scores, scores.sort(dim=1, descending=True).values[:, :12])
    assert torch.equal(scores.gather(1, top), top_scores)


def test_purchase_scores_and_topk() -> None:
    head = _model("purchase").head
    emb = torch.randn(3, 32)
    query, keys = head(emb, "customer"), head(torch.randn(10, 32), "article")
    assert query.shape == (3, 9) and torch.equal(query[:, -1], torch.ones(3))
    scores = PurchaseHead.score(query, keys)
    torch.testing.assert_close(scores, head.customer(emb) @ keys[:, :-1].T + keys[:, -1])
    top_scores, top = PurchaseHead.topk(query, keys, 4)
    assert top.shape == (3, 4) and torch.equal(top_scores, scores.gather(1, top))
    assert torch.equal(top_scores, scores.sort(dim=1, descending=True).values[:, :4])


def test_heads_outputs_are_in_range() -> None:
    inputs = gather_inputs(TABLES, random_batch(TABLES, "article", 6))
    model = _model("sales")
    with torch.no_grad():
        assert (model.predict(model(inputs) - 1.0) >= 0).all()
    inputs = gather_inputs(TABLES, random_batch(TABLES, "customer", 6))
    model = _model("churn")
    with torch.no_grad():
        probs = model.predict(model(inputs))
    assert ((probs > 0) & (probs < 1)).all()


@pytest.mark.parametrize("config", [{"log_target": False}, {"aggregation": "sum+mean+max+std"}])
def test_variants_pad_and_trim_exactly(config: dict) -> None:
    model, full = _model("sales", **config), _model("sales", trim=False, **config)
    full.load_state_dict(model.state_dict())
    ladder = tree_ladder("article", 16)
    gen = torch.Generator().manual_seed(2)
    for num_seeds, fill in [(1, 0.3), (5, 0.9), (3, 0.0)]:
        inputs = gather_inputs(TABLES, random_batch(TABLES, "article", num_seeds, fill=fill, generator=gen))
        padded = pad_inputs(inputs, ladder.choose(inputs))
        with torch.no_grad():
            expected = model(inputs)
            torch.testing.assert_close(model(padded)[:num_seeds], expected, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(full(inputs), expected, rtol=1e-5, atol=1e-5)


def test_log_target_sales_head_learns_log1p_and_serves_sales() -> None:
    head = _model("sales", log_target=True).head
    head.scale.fill_(2.0)
    target = torch.tensor([0.0, 1.0, 30.0])
    output = torch.log1p(target / 2.0)
    assert float(head.loss(output, target, torch.ones(3))) < 1e-6
    torch.testing.assert_close(head.predict(output), target)
    assert (head.predict(torch.tensor([-3.0, -0.1])) == 0).all()


def test_config_round_trip_and_validation() -> None:
    config = ModelConfig(hidden=64, dropout=0.1)
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown ModelConfig keys"):
        ModelConfig.from_dict({"hiden": 3})
    with pytest.raises(ValueError, match="aggregation"):
        ModelConfig(aggregation="median")
    with pytest.raises(ValueError, match="aggregation"):
        ModelConfig(aggregation="sum+sum")
    assert ModelConfig.from_dict({"hidden": 8}).log_target is False  # bundles written before log_target
    with pytest.raises(ValueError, match="unknown task"):
        TaskModel("returns", SPECS)
