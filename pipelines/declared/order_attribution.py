"""Orders attributed to campaigns: the shop's checkouts joined to the buyers' web sessions
(a pipeline over two teams' pipelines: contract ``data_contracts/order_attribution``,
transformation ``derived/order_attribution.py``)."""

from pipelines.derived import DerivedSpec, Input

PIPELINE = DerivedSpec(
    name="order_attribution",
    contract="order_attribution",
    contract_major=1,
    # An order reads the 7 days of sessions before it: a session's day reaches 7 days on.
    inputs=(Input("checkouts"), Input("web_sessions", reach_days=7)),
    day="attribution_date",
    owner="shop-data",
    readers=("marketing",),
)
