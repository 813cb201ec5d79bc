"""Developer tooling: the `mlutp` CLI, the process stacks, the live clients and the load
test. It may import every other package of the project; nothing imports it."""
