"""The reference clients of the order polling protocol (docs/protocol.md: Writing a client):
`client.client.MlutpClient`, and `client.legacy.LegacyClient` (the old totw polling, the
load baseline). They import nothing of the server: they are what a mobile team would write.

Read it as documentation of the client half of the contract:

1. `launch()`: the short state of all active orders, and the polling policy; with extended
   order info, the required parts of each order inline, so it renders with no part request.
2. `cycle()`: poll `/mlutp/v1/orders/state` with the known orders, in the order they are
   shown, each with its per-part tags; then fetch the parts in `need_request`, by priority,
   a few requests in parallel; then show the result.
3. `run()`: cycle at the interval the server gives in `X-Yataxi-Polling-Interval-Ms`
   (never cached; 2 s when absent). With `wait_ms` set, each poll is a waiting poll: the
   server holds it until something changes, and the next poll goes out right after the
   answer (and the parts it asked for), unless the server says it could not wait
   (`X-Mlutp-Wait: unavailable | shed`) or a part failed: then the interval applies.

Rules the client keeps:
- A part's response replaces that part's fields: a field of the part absent from it is deleted.
- A `stale` order keeps what the client had (its echo fields, its tags) and shows a loader;
  its `need_request` is ignored. Each known order carries its brief fields back as echo
  fields, so the server returns them for a stale one.
- An order that disappears from the answer has finished: it is dropped.
- A part that fails is marked stale (its old fields stay, and every field of its rule is
  flagged) and retried with capped, jittered backoff. An `expired` order is gone.
- Parts of an unknown `part_type` are ignored.
- Every order of an answer is shown at once (one never shown before as a placeholder), and
  its view changes again as each part lands; only its `required` parts hold it
  (`views.on_change` tells a UI to render).
- Part requests (and launch's `part_parameters`) carry their `part_type`'s parameters:
  for `totw`, `format_currency`, `extend_freecars`, `supported` and the app's position
  (`position`: `{"point": [lon, lat], "dx": <accuracy in metres>}`, from `client.position`).
- With `state_file`, the orders, their tags and the policy versions survive a restart: the
  app shows them at once, and launch revalidates the tags, so nothing unchanged is fetched.
- After a user change, the order is locked and polled with `force: true` until a part shows
  the version the change returned.
- The route part (`route_distance_depended`) is polled by the client's own rule.
- Every poll and launch names the policy versions the client holds (`policy_versions`). An
  answer naming another version than the client holds makes it launch again at once, naming
  the version it was told: new rules, and every part of that service fetched anew, once.

The modules, one job each: `client` (the cycle: launch, poll, fetch, show), `timing` (when
the next poll goes out, and the loop that keeps that rhythm), `transport` (replicas, timeouts,
counters), `model` (rules, orders, parts, views: data), `answer` (what an answer does to the
orders held), `parts` (which requests, and what an answer does to a part), `policy` (when the
policy version moves), `view` (what a UI renders), `changes` (user changes), `route` (the
route's own rule), `store` (the known orders it sends, and its state between app starts).
"""
