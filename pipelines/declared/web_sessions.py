"""Web sessions: the website's visits, from the web events (a pipeline over a pipeline:
contract ``data_contracts/web_sessions``, transformation ``derived/web_sessions.py``)."""

from pipelines.derived import DerivedSpec, Input

PIPELINE = DerivedSpec(
    name="web_sessions",
    contract="web_sessions",
    contract_major=1,
    inputs=(Input("web_events"),),
    day="session_date",
    owner="web-analytics",
    readers=("marketing",),
    identity=("visitor_id", "user_id"),
)
