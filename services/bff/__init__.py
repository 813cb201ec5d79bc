"""Code the client-facing services (orders_state and launch) share: their settings, wire
types, upstream clients and the orders state engine. They share it in-process and never
call each other over HTTP."""
