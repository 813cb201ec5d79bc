from collections.abc import Mapping
from typing import Any

from services.launch.app import SERVICE, create_app
from services.launch.config import LaunchSettings
from shared.runner import run_service


def main(overrides: Mapping[str, Any] | None = None) -> None:
    run_service(SERVICE, LaunchSettings, create_app, overrides=overrides)


if __name__ == "__main__":
    main()
