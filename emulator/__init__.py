"""The upstream emulator: order sources, totw, eats details, taxiroute, feature services."""
