from services.order_tags.app import SERVICE, create_app
from services.order_tags.config import OrderTagsSettings
from shared.runner import run_service

run_service(SERVICE, OrderTagsSettings, create_app)
