from collections.abc import Mapping
from typing import Any

from demo.app import SERVICE, create_app
from demo.config import DemoSettings
from shared.runner import run_service


def main(overrides: Mapping[str, Any] | None = None) -> None:
    run_service(SERVICE, DemoSettings, create_app, overrides=overrides)


if __name__ == "__main__":
    main()
