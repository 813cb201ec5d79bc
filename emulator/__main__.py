from collections.abc import Mapping
from typing import Any

from emulator.app import SERVICE, create_app
from emulator.config import EmulatorSettings
from shared.runner import run_service


def main(overrides: Mapping[str, Any] | None = None) -> None:
    run_service(SERVICE, EmulatorSettings, create_app, overrides=overrides)


if __name__ == "__main__":
    main()
