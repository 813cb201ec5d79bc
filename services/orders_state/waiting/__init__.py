"""The waiting poll (docs/protocol.md: Waiting poll), all of it but its pure decisions
(`shared.protocol.waiting`): `polls` holds a poll until news, `ports` says what it needs
of the wake-ups, `wakeups` (the hub) and `shard` (one pub/sub connection) listen on Redis for
tag writes, `metrics` counts, `setup` wires it into orders_state."""
