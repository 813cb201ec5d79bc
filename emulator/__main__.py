from emulator.app import SERVICE, create_app
from emulator.config import EmulatorSettings
from shared.runner import run_service

run_service(SERVICE, EmulatorSettings, create_app)
