# Shorthands for the two commands of dev.py (which needs nothing but Python 3.11+).
.PHONY: run test bench

run:
	python3 dev.py run

test:
	python3 dev.py test

bench:
	.venv/bin/python benchmarks/order_tags_get.py
	.venv/bin/python benchmarks/orders_state.py
	.venv/bin/python benchmarks/parts.py
