"""orders_state: the poll, the part endpoints and the legacy totw pass-through."""
