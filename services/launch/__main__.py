from services.launch.app import SERVICE, create_app
from services.launch.config import LaunchSettings
from shared.runner import run_service

run_service(SERVICE, LaunchSettings, create_app)
