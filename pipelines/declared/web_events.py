"""Website activity: Segment/RudderStack calls through the collector, the platform's first
pipeline (contract ``data_contracts/web_events``, views page, site, search and clicks)."""

from pipelines.spec import Collector, PipelineSpec, Reconciliation

PIPELINE = PipelineSpec(
    name="web_events",
    contract="web_events",
    contract_major=1,
    views=("page_activity", "site_activity", "search_terms", "clicks"),
    arrival=Collector(),
    owner="web-analytics",
    readers=("marketing",),
    identity=("userId", "anonymousId"),
    reconcile=(
        Reconciliation("site_activity", "events"),
        Reconciliation("site_activity", "page_views", "type = 'page'"),
        Reconciliation(
            "page_activity",
            "page_views",
            "type = 'page' AND coalesce(properties.path, context.page.path) IS NOT NULL",
        ),
    ),
)
