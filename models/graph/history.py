"""Purchase history features: a customer's own past articles and every article's recent sales.

The one computation of the ID-aware purchase score's inputs, used by training batches, offline
evaluation and the server alike, so the three read exactly the same numbers. Everything is
vectorised over the snapshot's time-sorted CSR (binary searches, ``unique``, scatters): no
Python loop over customers or articles. Like the sampler, only edges strictly before the seed
time count, so an event on the seed day itself never leaks in.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.feature_definitions import HISTORY_EDGES, HISTORY_SLOTS, NUM_PAIR_VALUE, PAIR_WINDOWS
from models.nn.inputs import PurchaseHistory
from models.schema import ARTICLE, CUSTOMER
from models.store.csr import TemporalCSR
from models.store.keyed import keyed_csr, prefix_sums
from models.store.snapshot import GraphSnapshot


def _log(x: Tensor) -> Tensor:
    return torch.log1p(x.float())


def article_popularity(csr: TemporalCSR, article: Tensor, time: Tensor) -> Tensor:
    """Recent sales of each article before its seed time.

    Args:
        csr: the article -> customer adjacency.
        article: ``(M,)`` int64 article indices.
        time: ``(M,)`` int64 seed times (exclusive).

    Returns:
        ``(M, NUM_POPULARITY)`` float32: ``log1p`` of the purchases in each window of
        :data:`PAIR_WINDOWS` and on the last day, and ``log1p`` of the days since the last sale
        (capped at 366, also when it never sold).
    """
    start, end = csr.row_bounds_before(article, time)
    counts = []
    for window in (*PAIR_WINDOWS, 1):
        window_start = csr.row_bounds_before(article, time - window)[1]
        counts.append(_log(end - window_start))
    last = csr.day.index_select(0, (end - 1).clamp(min=0)).long()
    since = torch.where(end > start, time - last, torch.full_like(time, 366)).clamp(max=366)
    return torch.stack([*counts, _log(since)], dim=-1)


def segments(length: Tensor) -> tuple[Tensor, Tensor]:
    """For ``(B,)`` segment lengths, each element's segment and offset in it, both ``(sum,)``."""
    # searchsorted, not repeat_interleave: the latter is several times slower on CPU.
    ends = length.cumsum(0)
    segment = torch.searchsorted(ends, torch.arange(int(ends[-1]) if ends.numel() else 0), right=True)
    return segment, torch.arange(segment.numel()) - (ends - length).index_select(0, segment)


def customer_history(customer_csr: TemporalCSR, article_csr: TemporalCSR, article_codes: Tensor,
                     customer: Tensor, time: Tensor, slots: int = HISTORY_SLOTS,
                     popularity: Tensor | None = None, spend: Tensor | None = None,
                     mean_price: float = 1.0, candidates: Tensor | None = None) -> PurchaseHistory:
    """The ``slots`` most recent distinct articles each customer bought before its seed time, then
    any ``candidates`` it did not buy.

    Reads each customer's last :data:`HISTORY_EDGES` purchases before ``time``. Per (customer,
    article) pair the features are ``log1p`` of: times bought, days since last and since first
    bought, the mean days between its purchases and the days since the last in units of that
    mean (both 0 for an article bought once), times bought in each window of
    :data:`PAIR_WINDOWS`; whether bought in each window; the slot's recency rank over ``slots``;
    the share of the customer's purchases; ``log1p`` of the customer's purchases, distinct articles
    and days since its last purchase; whether the slot is the most recent; ``log1p`` of the
    customer's purchases in each window; then the article's :func:`article_popularity`. Slots are
    ordered by the pair's latest purchase (a later row of the same day counts as later, as the
    repeat baseline orders them). Apart from those, what the pair's lines were worth
    (:attr:`PurchaseHistory.value`, in units of ``mean_price``): ``log1p`` of their total, its share
    of the customer's spend over the purchases read, and ``log1p`` of their mean.

    Args:
        customer_csr: the customer -> article adjacency.
        article_csr: the article -> customer adjacency (for popularity).
        article_codes: ``(A, C)`` int64 categorical codes of every article.
        customer: ``(B,)`` int64 customer indices.
        time: ``(B,)`` int64 seed times (exclusive).
        slots: ``N``.
        popularity: ``(A, NUM_POPULARITY)`` every article's :func:`article_popularity` at the seed
            time, when all rows share one (the server's case): gathered instead of recomputed.
        spend: ``(E + 1,)`` the customer CSR's cumulative edge prices (its
            :class:`models.store.snapshot_prefix.EdgePrefix` ``spend``), or ``None``: every line
            is worth ``mean_price``.
        mean_price: the unit of the values.
        candidates: ``(B, P)`` int64 more articles per row (:func:`popular_now`), in ``P`` slots
            after the ``slots``: scored like the history, so the repeat score weighs what sells now
            against what the customer bought before. A candidate's pair columns are 0, except its rank
            (``1 + j / P``), the customer's columns and the article's popularity; a slot whose
            article is in the history is empty.
    """
    num = customer.numel()
    start, end = customer_csr.row_bounds_before(customer, time)
    start = torch.maximum(start, end - HISTORY_EDGES)
    length = end - start
    row, offset = segments(length)
    pos = start.index_select(0, row) + offset
    article = customer_csr.col.index_select(0, pos).long()
    day = customer_csr.day.index_select(0, pos).long()
    age = time.index_select(0, row) - day  # days before the seed time, >= 1

    pair, group = torch.unique(row * max(article_csr.num_rows, 1) + article, return_inverse=True)
    size = pair.numel()

    def reduce(values: Tensor, how: str) -> Tensor:
        return torch.zeros(size, dtype=values.dtype).scatter_reduce(0, group, values, how, include_self=False)

    unit = max(float(mean_price), 1e-12)
    if spend is None:
        price = torch.ones(pos.shape, dtype=torch.float64)
    else:  # each line's price: a difference of the float64 prefix sums
        price = spend.index_select(0, pos + 1).double() - spend.index_select(0, pos).double()
        price = (price / unit).clamp(min=0.0)
    pair_spend = torch.zeros(size, dtype=torch.float64).index_add_(0, group, price)
    customer_spend = torch.zeros(num, dtype=torch.float64).index_add_(0, row, price)
    ones = torch.ones_like(day)
    count, latest_pos = reduce(ones, "sum"), reduce(pos, "amax")
    last, first = reduce(day, "amax"), reduce(day, "amin")
    within = [(age <= w).long() for w in PAIR_WINDOWS]
    windows = [reduce(inside, "sum") for inside in within]
    customer_windows = [torch.zeros(num, dtype=torch.long).index_add_(0, row, inside) for inside in within]
    pair_row = pair // max(article_csr.num_rows, 1)
    pair_article = pair % max(article_csr.num_rows, 1)

    # newest pair first within each customer, then keep the first `slots` of each
    order = torch.sort(pair_row * (customer_csr.num_edges + 1) + customer_csr.num_edges - latest_pos).indices
    per_row = torch.bincount(pair_row, minlength=num)
    rank = segments(per_row)[1]
    keep = order[rank < slots]
    rank = rank[rank < slots]
    r = pair_row.index_select(0, keep)
    t = time.index_select(0, r)
    n_events, n_distinct = length.index_select(0, r), per_row.index_select(0, r)
    last_day = customer_csr.day.index_select(0, (end - 1).clamp(min=0)).long()
    recent_row = torch.where(length > 0, time - last_day, torch.zeros_like(time))
    recent = recent_row.index_select(0, r)
    c = count.index_select(0, keep)
    since_last, since_first = t - last.index_select(0, keep), t - first.index_select(0, keep)
    # A reorder rhythm: the mean days between the pair's purchases, and how many of those gaps have
    # passed since the last one (how due it is); both 0 for an article bought once (first == last).
    gap = (since_first - since_last).float() / (c - 1).clamp(min=1).float()
    due = since_last.float() / gap.clamp(min=1.0) * (c > 1).float()
    columns = [_log(c), _log(since_last), _log(since_first), _log(gap), _log(due)]
    columns += [_log(w.index_select(0, keep)) for w in windows]
    columns += [(w.index_select(0, keep) > 0).float() for w in windows]
    columns += [rank.float() / slots, c.float() / n_events.float(), _log(n_events), _log(n_distinct),
                _log(recent), (rank == 0).float()]
    columns += [_log(active.index_select(0, r)) for active in customer_windows]
    art = pair_article.index_select(0, keep)
    pop = article_popularity(article_csr, art, t) if popularity is None else popularity.index_select(0, art)
    features = torch.cat([torch.stack(columns, dim=-1), pop], dim=-1)
    worth = pair_spend.index_select(0, keep)
    share = worth / customer_spend.index_select(0, r).clamp(min=1e-12)
    value = torch.stack([_log(worth), share.float(), _log(worth / c.double())], dim=-1)

    flat = r * slots + rank
    out_article = torch.zeros(num * slots, dtype=torch.long).index_copy_(0, flat, art)
    out_mask = torch.zeros(num * slots, dtype=torch.bool).index_fill_(0, flat, True)
    out_features = torch.zeros(num * slots, features.shape[1]).index_copy_(0, flat, features)
    out_value = torch.zeros(num * slots, NUM_PAIR_VALUE).index_copy_(0, flat, value)
    codes = article_codes if hasattr(article_codes, "index_select") else torch.as_tensor(article_codes)
    slot_codes = codes.index_select(0, out_article) * out_mask.unsqueeze(-1)
    history = PurchaseHistory(out_article.view(num, slots), out_mask.view(num, slots),
                              out_features.view(num, slots, -1), slot_codes.view(num, slots, -1),
                              out_value.view(num, slots, -1))
    if candidates is None:
        return history
    customer_columns = [_log(length), _log(per_row), _log(recent_row), *(_log(a) for a in customer_windows)]
    return _with_candidates(history, candidates, torch.stack(customer_columns, dim=-1), article_csr, codes,
                            time, popularity)


def _with_candidates(history: PurchaseHistory, candidates: Tensor, customer_columns: Tensor,
                     article_csr: TemporalCSR, codes: Tensor, time: Tensor,
                     popularity: Tensor | None) -> PurchaseHistory:
    """``history`` with ``candidates`` ``(B, P)`` in ``P`` more slots (see :func:`customer_history`);
    ``customer_columns``: ``(B, 3 + len(PAIR_WINDOWS))`` the rows' customer columns."""
    num, extra = candidates.shape
    windows = len(PAIR_WINDOWS)
    mask = ~((candidates.unsqueeze(-1) == history.article.unsqueeze(1)) & history.mask.unsqueeze(1)).any(-1)
    flat = candidates.reshape(-1)
    pop = (article_popularity(article_csr, flat, time.repeat_interleave(extra)) if popularity is None
           else popularity.index_select(0, flat)).view(num, extra, -1)
    rank = 1.0 + torch.arange(extra, dtype=torch.float32) / extra
    customer = customer_columns.unsqueeze(1).expand(-1, extra, -1)
    # the column order of customer_history: 5 pair columns, 2 x windows, rank, share, 3 customer
    # columns, most recent, the customer's windows, popularity
    zeros = torch.zeros(num, extra, 5 + 2 * windows)
    features = torch.cat([zeros, rank.view(1, -1, 1).expand(num, -1, 1), zeros[..., :1], customer[..., :3],
                          zeros[..., :1], customer[..., 3:], pop], dim=-1) * mask.unsqueeze(-1)
    article = candidates * mask
    slot_codes = codes.index_select(0, article.reshape(-1)).view(num, extra, -1) * mask.unsqueeze(-1)
    value = torch.zeros(num, extra, history.value.shape[-1])
    return PurchaseHistory(*(torch.cat(pair, 1) for pair in zip(
        history, (article, mask, features, slot_codes, value), strict=True)))


def popular_now(article_csr: TemporalCSR, times: Tensor, count: int) -> Tensor:
    """``(T, count)`` the ``count`` articles sold most often in the 7 days before each of ``times``
    ``(T,)`` (ties: the lower index first), the candidates of :func:`customer_history`."""
    num_articles = article_csr.num_rows
    count = min(count, num_articles)
    every = torch.arange(num_articles).repeat(len(times))
    at = times.long().repeat_interleave(num_articles)
    sold = article_csr.row_bounds_before(every, at)[1] - article_csr.row_bounds_before(every, at - 7)[1]
    order = sold.view(len(times), num_articles) * num_articles + torch.arange(num_articles - 1, -1, -1)
    return torch.topk(order, count, dim=1).indices


def snapshot_history(snapshot: GraphSnapshot, customer: Tensor, time: Tensor,
                     popularity: Tensor | None = None, candidates: Tensor | None = None) -> PurchaseHistory:
    """:func:`customer_history` over ``snapshot``'s adjacency (``(B,)`` customers and seed times)."""
    prefix, mean_price = prefix_sums(snapshot, CUSTOMER)
    return customer_history(keyed_csr(snapshot, CUSTOMER), keyed_csr(snapshot, ARTICLE),
                            snapshot.categorical[ARTICLE], customer, time, popularity=popularity,
                            spend=prefix.spend, mean_price=mean_price, candidates=candidates)


def snapshot_popularity(snapshot: GraphSnapshot, article: Tensor, time: Tensor) -> Tensor:
    """:func:`article_popularity` over ``snapshot``'s adjacency (``(M,)`` articles and seed times)."""
    return article_popularity(keyed_csr(snapshot, ARTICLE), article, time)
