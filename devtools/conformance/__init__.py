"""`mlutp conformance`: scripted scenarios against a client under test, through the real stack
(issue 27; docs/protocol.md: Writing a client). The client talks to a recording pass-through
in front of launch and orders_state (`recording`); the kit drives the emulator (`scenarios`)
and checks the requests the client made against the contract (`checks`: pure functions over
the recorded exchanges); `runner` prints a table of scenario, pass or fail and why, and writes
a JSON report. A mobile team points its own build at the pass-through (`--external`)."""
