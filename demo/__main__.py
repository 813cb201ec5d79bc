from demo.app import SERVICE, create_app
from demo.config import DemoSettings
from shared.runner import run_service

run_service(SERVICE, DemoSettings, create_app)
