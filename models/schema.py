"""The H&M relational schema: file names, exact CSV headers, feature columns and edge types.

Shared by the generator, the CSV loader, the graph snapshot and the models, so that
one place says what a column is called and how it is used.
"""

from __future__ import annotations

import datetime as dt

CUSTOMERS_CSV = "customers.csv"
ARTICLES_CSV = "articles.csv"
TRANSACTIONS_CSV = "transactions_train.csv"

CUSTOMER_COLUMNS: tuple[str, ...] = (
    "customer_id", "FN", "Active", "club_member_status", "fashion_news_frequency", "age", "postal_code",
)
ARTICLE_COLUMNS: tuple[str, ...] = (
    "article_id", "product_code", "prod_name", "product_type_no", "product_type_name",
    "product_group_name", "graphical_appearance_no", "graphical_appearance_name", "colour_group_code",
    "colour_group_name", "perceived_colour_value_id", "perceived_colour_value_name",
    "perceived_colour_master_id", "perceived_colour_master_name", "department_no", "department_name",
    "index_code", "index_name", "index_group_no", "index_group_name", "section_no", "section_name",
    "garment_group_no", "garment_group_name", "detail_desc",
)
TRANSACTION_COLUMNS: tuple[str, ...] = ("t_dat", "customer_id", "article_id", "price", "sales_channel_id")

# H&M's id widths: facts of the built-in H&M spec and the synthetic generator only. Nothing else
# assumes an id's shape (models.store.ids, docs/ids.md).
CUSTOMER_ID_LEN = 64  # lowercase hex
ARTICLE_ID_LEN = 10  # decimal digits, leading zero kept: an identifier, never an integer
# Every dataset's ids (see docs/dataset-spec.md): non-empty text of at most this many UTF-8 bytes.
MAX_ID_BYTES = 128

# Feature columns. Categorical values become codes 1..V (0 = missing or unseen); numeric
# columns are standardised with a separate 0/1 "was missing" column beside each.
CUSTOMER_CATEGORICAL: tuple[str, ...] = ("FN", "Active", "club_member_status", "fashion_news_frequency")
CUSTOMER_NUMERIC: tuple[str, ...] = ("age",)
ARTICLE_CATEGORICAL: tuple[str, ...] = (
    "product_type_no", "product_group_name", "graphical_appearance_no", "colour_group_code",
    "perceived_colour_value_id", "perceived_colour_master_id", "department_no", "index_code",
    "index_group_no", "section_no", "garment_group_no",
)
ARTICLE_NUMERIC: tuple[str, ...] = ()

CUSTOMER = "customer"
ARTICLE = "article"
NODE_TYPES: tuple[str, ...] = (CUSTOMER, ARTICLE)

EdgeType = tuple[str, str, str]
# Messages flow from a sampled neighbour to the node it was sampled for.
BUYS: EdgeType = (CUSTOMER, "buys", ARTICLE)
BOUGHT_BY: EdgeType = (ARTICLE, "bought_by", CUSTOMER)
EDGE_TYPES: tuple[EdgeType, ...] = (BUYS, BOUGHT_BY)
# Each node type has one incoming edge type: a node's neighbours are sampled along it.
INCOMING: dict[str, EdgeType] = {dst: (src, rel, dst) for src, rel, dst in EDGE_TYPES}
NEIGHBOUR_TYPE: dict[str, str] = {dst: src for src, _, dst in EDGE_TYPES}

EPOCH = dt.date(1970, 1, 1)


def day_number(date: dt.date | str) -> int:
    """Days since 1970-01-01 for a date or a ``YYYY-MM-DD`` string (the unit of every time here)."""
    if isinstance(date, str):
        date = dt.date.fromisoformat(date)
    return (date - EPOCH).days


def day_to_date(day: int) -> dt.date:
    """Inverse of :func:`day_number`."""
    return EPOCH + dt.timedelta(days=int(day))
