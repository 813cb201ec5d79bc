from collections.abc import Mapping
from typing import Any

from services.order_tags.app import SERVICE, create_app
from services.order_tags.config import OrderTagsSettings
from shared.runner import run_service


def main(overrides: Mapping[str, Any] | None = None) -> None:
    run_service(SERVICE, OrderTagsSettings, create_app, overrides=overrides)


if __name__ == "__main__":
    main()
