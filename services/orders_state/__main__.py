from collections.abc import Mapping
from typing import Any

from services.orders_state.app import SERVICE, create_app
from services.orders_state.config import OrdersStateSettings
from shared.runner import run_service


def main(overrides: Mapping[str, Any] | None = None) -> None:
    # a client that hangs up frees its waiting poll's slot at once, not at the wait's end;
    # the service only reads, and part fetches other requests share are shielded
    run_service(
        SERVICE,
        OrdersStateSettings,
        create_app,
        handler_cancellation=True,
        overrides=overrides,
    )


if __name__ == "__main__":
    main()
