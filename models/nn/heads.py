"""Task heads on seed embeddings: churn (binary), sales (regression, served >= 0), purchase (two-tower).

Every head maps ``(S, hidden)`` seed embeddings to its output and owns its training loss, which
takes a ``(S,)`` float weight so padded seed rows (weight 0) never count.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.feature_definitions import (
    NUM_PAIR,
    NUM_PAIR_VALUE,
    NUM_POPULARITY,
    NUM_TEMPORAL,
    WINDOWS_DAYS,
    window_spend,
)
from models.nn.config import ModelConfig
from models.nn.inputs import PurchaseExtras, PurchaseHistory, TableSpec
from models.nn.ranking import RankParts
from models.schema import ARTICLE, CUSTOMER


def _weighted_mean(values: Tensor, weight: Tensor) -> Tensor:
    return (values * weight).sum() / weight.sum().clamp(min=1.0)


def _mlp(hidden: int, head_hidden: int, out: int) -> nn.Module:
    if head_hidden == 0:
        return nn.Linear(hidden, out)
    return nn.Sequential(nn.Linear(hidden, head_hidden), nn.ReLU(), nn.Linear(head_hidden, out))


class ChurnHead(nn.Module):
    """Logit that a customer buys nothing in the next 7 days.

    The served probability is ``sigmoid(calibration_scale * logit + calibration_bias)``: Platt
    scaling (temperature plus a shift), fitted on the validation week after training
    (:mod:`training.fit.probability`) and saved with the weights, so the server answers the
    calibrated probability. Training's loss reads the raw logit. Bundles written before the two
    buffers existed load with the identity (1, 0) and serve as they always did.

    Args:
        hidden: embedding width.
        head_hidden: MLP width (``0``: linear).
    """

    seed_types = (CUSTOMER,)

    def __init__(self, hidden: int, head_hidden: int) -> None:
        super().__init__()
        self.mlp = _mlp(hidden, head_hidden, 1)
        self.register_buffer("calibration_scale", torch.ones(()))
        self.register_buffer("calibration_bias", torch.zeros(()))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        state_dict.setdefault(prefix + "calibration_scale", torch.ones(()))
        state_dict.setdefault(prefix + "calibration_bias", torch.zeros(()))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S,)`` logits."""
        return self.mlp(emb).squeeze(-1)

    def predict(self, logits: Tensor) -> Tensor:
        """``(S,)`` calibrated churn probabilities."""
        return torch.sigmoid(logits * self.calibration_scale + self.calibration_bias)

    @staticmethod
    def loss(logits: Tensor, target: Tensor, weight: Tensor) -> Tensor:
        """Weighted binary cross-entropy; ``target`` ``(S,)`` in {0, 1}."""
        return _weighted_mean(F.binary_cross_entropy_with_logits(logits, target, reduction="none"), weight)


class SalesHead(nn.Module):
    """7-day sales of an article: a linear output in units of ``scale``, served clamped at zero.

    Trained with L1 (the MAE) against ``target / scale``. The output is deliberately not squashed
    by a softplus: most articles sell nothing in a given week, L1 drives their outputs to zero, and
    a softplus driven there stops passing gradient, so the head collapses to predicting zero for
    every article. A linear output keeps L1's constant-size gradient on both sides of zero.

    Next week's sales are to a first approximation a weighted sum of the article's recent weekly
    sales (the last-week baseline is one such sum). The temporal features hold those only
    ``log1p``-squashed, and an MLP over squashed inputs reproduces the large weeks of the best
    sellers, which dominate the MAE, only roughly. So the seed's weekly sales over each window
    also reach the output through one linear layer (zero at initialisation), scaled per article
    by a gate in ``(0, 2)`` from its embedding: how much of its recent sales carries over is not
    one ratio for every article (a new line ramps up, a seasonal one falls away).

    With ``log_target`` the head learns ``log1p(target / scale)`` instead, still with L1, and
    serves ``expm1`` of its output: the L1 minimiser is the conditional median, and a median
    commutes with a monotone map, so the head aims at the same quantity while its function
    class becomes multiplicative. The recent weekly sales then enter as ``log1p`` too, so an
    article with a spiky history (weeks of 0.5 and weeks of 160 times the typical sale) is not
    extrapolated linearly from its largest weeks, and every article's L1 gradient on the
    carry-over weights is bounded instead of growing with its sales (docs/decisions.md, "Sales in
    log space").

    Args:
        hidden: embedding width.
        head_hidden: MLP width (``0``: linear).
        log_target: learn and serve in ``log1p`` space (see above).
    """

    seed_types = (ARTICLE,)
    reads_seed_features = True  # forward also takes the seeds' numeric features (see TaskModel)

    def __init__(self, hidden: int, head_hidden: int, log_target: bool = ModelConfig.log_target) -> None:
        super().__init__()
        self.log_target = log_target
        self.mlp = _mlp(hidden, head_hidden, 1)
        self.recent = nn.Linear(len(WINDOWS_DAYS), 1, bias=False)
        nn.init.zeros_(self.recent.weight)
        self.carry_over = nn.Linear(hidden, 1)
        # Typical weekly sales of a selling article; set from the training targets, saved with the weights.
        self.register_buffer("scale", torch.ones(()))
        # The snapshot's mean price in units of ``scale`` (the spend features' unit); set with it.
        self.register_buffer("spend_unit", torch.zeros(()))
        self.register_buffer("per_week", torch.tensor([7.0 / w for w in WINDOWS_DAYS]))

    @classmethod
    def from_config(cls, config: ModelConfig, specs: dict[str, TableSpec]) -> SalesHead:
        """The head of a model of shape ``config`` (see :class:`models.nn.model.TaskModel`)."""
        return cls(config.hidden, config.head_hidden, config.log_target)

    def forward(self, emb: Tensor, seed_type: str, features: Tensor | None = None) -> Tensor:
        """``(S, hidden)`` embeddings and the seeds' ``(S, F)`` numeric features (the temporal
        ones last; ``None``: the MLP alone) -> ``(S,)`` sales in units of ``scale`` (unclamped)."""
        out = self.mlp(emb).squeeze(-1)
        if features is not None and features.shape[1] >= NUM_TEMPORAL:
            weekly = window_spend(features[:, features.shape[1] - NUM_TEMPORAL:]) * self.per_week
            gate = 2.0 * torch.sigmoid(self.carry_over(emb)).squeeze(-1)
            rate = weekly * self.spend_unit
            if self.log_target:
                rate = torch.log1p(rate.clamp(min=0.0))
            out = out + gate * self.recent(rate).squeeze(-1)
        return out

    def predict(self, output: Tensor) -> Tensor:
        """``(S,)`` predicted sales, ``>= 0``."""
        value = output.clamp(min=0.0)
        return (torch.expm1(value) if self.log_target else value) * self.scale

    def loss(self, output: Tensor, target: Tensor, weight: Tensor) -> Tensor:
        """Weighted L1 to the ``(S,)`` target, in units of ``scale`` (``log1p`` of it with ``log_target``)."""
        target = target / self.scale
        if self.log_target:
            target = torch.log1p(target)
        return _weighted_mean((output - target).abs(), weight)


class PurchaseHead(nn.Module):
    """Two towers plus an ID-aware repeat score for the articles in the customer's own history.

    Customer queries are ``[q, 1]`` and article keys ``[k, b]``, so ``query @ key.T = q.k + b``: one
    matrix product scores every article. The bias is computed from the article's GNN embedding and
    its recent sales (:meth:`prior` of :func:`models.graph.history.article_popularity`), not a per-id
    table, so keys for a new snapshot need no retraining. A dot product cannot say "this customer
    buys this very article again", so the articles of the customer's own history
    (:class:`models.nn.inputs.PurchaseHistory`) are scored instead by :meth:`repeat_score`, an MLP on
    the pair's features and the customer's query plus the query's match with the article's
    attributes; :meth:`rank` writes those scores over the
    dot-product scores at their columns before one ``topk``. Both are trained against in-batch
    negatives only, so at ranking time over the whole catalogue the two scales need not agree:
    ``repeat_shift`` (a buffer, chosen on validation after training, see
    :mod:`training.fit.calibrate`) is added to every repeat score when ranking.

    Args:
        hidden: embedding width.
        embedding_dim: width ``D`` of the dot-product space.
        article_cardinalities: the article table's categorical columns (a
            :class:`models.nn.inputs.TableSpec`'s ``cardinalities``).
        pair_value: the repeat MLP also reads what the pair's lines were worth
            (:attr:`models.nn.inputs.PurchaseHistory.value`); ``False`` for bundles written before.
    """

    seed_types = (CUSTOMER, ARTICLE)

    def __init__(self, hidden: int, embedding_dim: int, article_cardinalities: tuple[int, ...] = (),
                 pair_value: bool = True) -> None:
        super().__init__()
        self.pair_value = pair_value
        self.customer = nn.Linear(hidden, embedding_dim)
        self.article = nn.Linear(hidden, embedding_dim + 1)
        # History articles' attributes (codes) matched against the query: the repeat score's taste part.
        sizes = [card + 1 for card in article_cardinalities]
        offsets = torch.tensor([0, *sizes[:-1]], dtype=torch.long).cumsum(0)[:len(sizes)]
        self.register_buffer("code_offsets", offsets, persistent=False)
        self.attributes = nn.Embedding(max(sum(sizes), 1), embedding_dim)
        nn.init.normal_(self.attributes.weight, std=1.0 / math.sqrt(max(len(sizes), 1) * embedding_dim))
        self.popularity = nn.Sequential(nn.Linear(NUM_POPULARITY, 16), nn.ReLU(), nn.Linear(16, 1))
        pair_width = NUM_PAIR + (NUM_PAIR_VALUE if pair_value else 0)
        self.repeat = nn.Sequential(nn.Linear(pair_width + embedding_dim, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.register_buffer("repeat_shift", torch.zeros(()))

    @classmethod
    def from_config(cls, config: ModelConfig, specs: dict[str, TableSpec]) -> PurchaseHead:
        """The head of a model of shape ``config`` over a graph of ``specs`` (the articles' codes)."""
        return cls(config.hidden, config.embedding_dim, specs[ARTICLE].cardinalities, config.pair_value)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # bundles written before the shift existed rank as they always did
        state_dict.setdefault(prefix + "repeat_shift", torch.zeros(()))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S, D + 1)``: queries for customers, keys (without prior) for articles."""
        if seed_type == ARTICLE:
            return self.article(emb)
        query = self.customer(emb)
        return torch.cat([query, query.new_ones(query.shape[0], 1)], dim=-1)

    def prior(self, popularity: Tensor) -> Tensor:
        """``(A, NUM_POPULARITY)`` recent sales -> ``(A,)`` score added to each article's key bias."""
        return self.popularity(popularity).squeeze(-1)

    def with_prior(self, keys: Tensor, popularity: Tensor) -> Tensor:
        """``(A, D+1)`` keys with :meth:`prior` added to their bias column."""
        return torch.cat([keys[:, :-1], keys[:, -1:] + self.prior(popularity).unsqueeze(-1)], dim=-1)

    def repeat_score(self, query: Tensor, history: PurchaseHistory) -> Tensor:
        """``(B, D+1)`` queries and ``(B, N)`` histories -> ``(B, N)`` scores of the past articles."""
        q = query[:, :-1].unsqueeze(1).expand(-1, history.features.shape[1], -1)
        taste = (self.attributes(history.codes + self.code_offsets).sum(dim=2) * q).sum(dim=-1)
        pair = [history.features, history.value] if self.pair_value else [history.features]
        return self.repeat(torch.cat([*pair, q], dim=-1)).squeeze(-1) + taste

    def scores(self, query: Tensor, keys: Tensor, history: PurchaseHistory | None = None) -> Tensor:
        """``(B, A)`` scores: dot products, with the repeat score (plus ``repeat_shift``) at each
        history article's column."""
        scores = query @ keys.T
        if history is None:
            return scores
        rows, slots = history.mask.nonzero(as_tuple=True)
        repeat = self._history_scores(query, history, rows, slots) + self.repeat_shift
        # A history holds distinct articles, so no (row, article) is written twice.
        return scores.index_put_((rows, history.article[rows, slots]), repeat.to(scores.dtype))

    def _history_scores(self, query: Tensor, history: PurchaseHistory, rows: Tensor, slots: Tensor) -> Tensor:
        """:meth:`repeat_score` of the real slots ``(rows, slots)`` only, ``(R,)``: most of a row's
        slots are empty, and summing the attribute embeddings as a bag never builds the (B, N, C, D)
        tensor (4x faster, same values)."""
        q = query[rows, :-1]
        codes = history.codes[rows, slots] + self.code_offsets
        if codes.shape[-1]:
            taste = (F.embedding_bag(codes, self.attributes.weight, mode="sum") * q).sum(dim=-1)
        else:  # articles without categorical columns (a dataset spec may give none): no taste part
            taste = q.new_zeros(q.shape[0])
        pair = [history.features[rows, slots]] + ([history.value[rows, slots]] if self.pair_value else [])
        return self.repeat(torch.cat([*pair, q], dim=-1)).squeeze(-1) + taste

    def rank_parts(self, query: Tensor, keys: Tensor, k: int, history: PurchaseHistory) -> RankParts:
        """What :meth:`rank` merges, kept apart so any ``repeat_shift`` can be tried without
        scoring again: the best ``k`` dot products outside the history, and the history's repeat
        scores without the shift (see :func:`models.nn.ranking.merge_ranked`)."""
        scores = query @ keys.T
        rows, slots = history.mask.nonzero(as_tuple=True)
        scores.index_put_((rows, history.article[rows, slots]), scores.new_tensor(float("-inf")))
        top, top_articles = torch.topk(scores, min(k, keys.shape[0]), dim=-1)
        repeat = torch.full(history.mask.shape, float("-inf"), dtype=top.dtype, device=top.device)
        repeat[rows, slots] = self._history_scores(query, history, rows, slots).to(top.dtype)
        return RankParts(top, top_articles, repeat, history.article)

    def rank(self, query: Tensor, keys: Tensor, k: int,
             history: PurchaseHistory | None = None) -> tuple[Tensor, Tensor]:
        """Best ``k`` articles per query: ``(B, k)`` scores and ``(B, k)`` article indices."""
        return torch.topk(self.scores(query, keys, history), min(k, keys.shape[0]), dim=-1)

    @staticmethod
    def score(query: Tensor, keys: Tensor) -> Tensor:
        """``(B, D+1)`` x ``(A, D+1)`` -> ``(B, A)`` two-tower scores."""
        return query @ keys.T

    @staticmethod
    def topk(query: Tensor, keys: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """Best ``k`` articles per query by the two-tower score alone."""
        return torch.topk(query @ keys.T, min(k, keys.shape[0]), dim=-1)

    def loss(self, query: Tensor, positive_keys: Tensor, weight: Tensor, log_q: Tensor | None = None,
             extras: PurchaseExtras | None = None) -> Tensor:
        """Sampled softmax over in-batch positives, catalogue negatives (and, with ``extras``, the
        row's own history).

        Row ``i``'s positive is key ``i``, every other key a negative. With ``extras`` the keys get
        their :meth:`prior`, row ``i``'s own history articles join its candidates with their
        :meth:`repeat_score` (and in-batch keys of those articles are dropped for that row, as
        :meth:`scores` replaces them), and a positive in the history is its history slot. Keys
        marked ``extras.negative`` were drawn uniformly from the whole catalogue: in-batch
        negatives are other customers' purchases, so an article nobody buys is never shown as a
        negative and its key is never pushed down, yet at ranking time it competes with every
        article (mixed negative sampling, Yang et al. 2020).

        Args:
            query: ``(S, D+1)`` customer queries.
            positive_keys: ``(S', D+1)`` keys: row ``i``'s positive for ``i < S`` (rows without a
                query, or past the batch's rows, are padding), then any catalogue negatives.
            weight: ``(S,)``; padded rows have weight 0 and their keys are masked out as negatives too.
            log_q: ``(S',)`` log of how often each key's article occurs among a batch's keys (its
                probability of being drawn as a negative), or ``None``. Subtracted from its column,
                the logQ correction of sampled softmax: without it a popular article, often someone
                else's positive, is pushed down as a negative as often as it is pulled up, and the
                keys' bias never learns popularity.
            extras: the keys' articles and popularity, which keys are catalogue negatives, and the
                ``S`` histories (padded like ``query``).
        """
        rows = min(query.shape[0], positive_keys.shape[0])  # both towers may pad to different buckets
        query, weight = query[:rows], weight[:rows]
        target = torch.arange(rows, device=query.device)
        keys = torch.arange(positive_keys.shape[0], device=query.device)
        diagonal = target.unsqueeze(1) == keys.unsqueeze(0)
        live = F.pad(weight > 0, (0, positive_keys.shape[0] - rows))
        if extras is not None and extras.negative is not None:
            live = live | extras.negative
        # Padded keys are no negatives; the diagonal stays so every row keeps a finite logit.
        padded_key = ~live.unsqueeze(0) & ~diagonal
        if extras is not None:
            positive_keys = self.with_prior(positive_keys, extras.popularity)
        logits = query @ positive_keys.T
        if log_q is not None:
            logits = logits - log_q.unsqueeze(0)
        logits = logits.masked_fill(padded_key, float("-inf"))
        if extras is None:
            return _weighted_mean(F.cross_entropy(logits, target, reduction="none"), weight)
        if extras.negative is not None:  # a catalogue negative that is the row's own positive is none
            drawn_own = extras.article[:rows].unsqueeze(1) == extras.article.unsqueeze(0)
            logits = logits.masked_fill(drawn_own & extras.negative.unsqueeze(0), float("-inf"))
        history = PurchaseHistory(*(t[:rows] for t in extras.history))
        match = history.article.unsqueeze(-1) == extras.article.view(1, 1, -1)
        match = match & history.mask.unsqueeze(-1)  # (S, N, S')
        in_history = match.any(dim=1)  # (S, S'): key j's article is in row i's history
        own = torch.diagonal(in_history)
        repeat = self.repeat_score(query, history).masked_fill(~history.mask, float("-inf"))
        logits = torch.cat([logits.masked_fill(in_history, float("-inf")), repeat], dim=1)
        # Every bought history article is a positive (the drawn one among them), as is the drawn
        # in-batch key when not in the history; each positive's loss is its softmax against the
        # row's negatives only (the other positives left out), averaged over the row's positives.
        positive = torch.cat([diagonal & ~own.unsqueeze(1), extras.bought[:rows] & history.mask], dim=1)
        finite = logits.masked_fill(torch.isinf(logits), -1e9)  # no NaN gradients through empty rows
        negative = finite.masked_fill(positive | torch.isinf(logits), -1e9)
        negatives = torch.logsumexp(negative, dim=1, keepdim=True)
        each = torch.logaddexp(finite, negatives) - finite
        per_row = (each * positive).sum(dim=1) / positive.sum(dim=1).clamp(min=1)
        return _weighted_mean(per_row, weight)
