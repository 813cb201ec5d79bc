"""The protocol's decisions as pure functions, no I/O: tags, need_request, ordering,
allowed_changes, the polling interval. Handlers only do I/O around them."""
