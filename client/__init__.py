"""The reference client of the polling protocol and the load generator."""
