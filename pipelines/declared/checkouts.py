"""Shop checkouts: orders completed and refunded, produced straight to Kafka by the checkout
service (contract ``data_contracts/checkouts``, view ``orders_by_currency``)."""

from pipelines.spec import PipelineSpec, Producer, Reconciliation

PIPELINE = PipelineSpec(
    name="checkouts",
    contract="checkouts",
    contract_major=1,
    topic="shop.checkouts.v1",
    arrival=Producer("checkout-service"),
    views=("orders_by_currency",),
    owner="shop-data",
    identity=("buyer_id",),
    reconcile=(
        Reconciliation("orders_by_currency", "orders", "type = 'order_completed'"),
        Reconciliation("orders_by_currency", "refunds", "type = 'order_refunded'"),
    ),
)
