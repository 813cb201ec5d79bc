"""launch: the orders state plus the polling policy, on app start."""
