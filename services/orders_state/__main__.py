from services.orders_state.app import SERVICE, create_app
from services.orders_state.config import OrdersStateSettings
from shared.web import run_service

run_service(SERVICE, OrdersStateSettings, create_app)
