"""A deterministic simulation of the BFF where its mechanisms meet (issue 39): the real
engine, listings, tag cache, waiting polls and part service, driven in virtual time against
in-memory doubles of everything outside them, under a schedule of faults drawn from a seed,
with the protocol's invariants checked on every answer, look and window. See
tests/simulation/README.md."""
