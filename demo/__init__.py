"""The demo page: a browser client of the real services for one demo user, served with a
same-origin proxy to launch, orders_state and the emulator."""
