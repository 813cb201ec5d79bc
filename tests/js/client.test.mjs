// The browser reference client (demo/static/client.js) against a server of this file's own,
// run by Node's test runner: `node --test tests/js/` (python3 dev.py test runs it). Each test
// names what docs/protocol.md ("Writing a client") asks of a client.

import assert from "node:assert/strict";
import { test } from "node:test";

import { MlutpClient, positionOf } from "../../demo/static/client.js";
import { requestDigest } from "../../demo/static/transport.js";

const RULES = [
  { service: "taxi", part_name: "fast_info", url: "/mlutp/v1/taxi/fast_info", part_type: "totw",
    fields: ["status", "eta"], polling_type: "tag_defined", priority: 0, required: true },
  { service: "taxi", part_name: "slow", url: "/mlutp/v1/taxi/slow", part_type: "totw",
    fields: ["performer", "park"], polling_type: "tag_defined", priority: 4 },
  { service: "taxi", part_name: "route", url: "/mlutp/v1/taxi/route", part_type: "taxiroute",
    fields: ["distance_left_m"], polling_type: "route_distance_depended", priority: 5 },
  { service: "grocery", part_name: "grocery_full", url: "/mlutp/v1/grocery/full",
    part_type: "grocery_full", fields: ["items"], polling_type: "tag_defined", priority: 0,
    required: true },
];

// orders/state, launch and the part endpoints, as the contract says, over in-memory orders;
// every request recorded, and what a part endpoint answers can be held or made to fail
class Server {
  constructor() {
    this.orders = []; // {orderid, service, status, brief, tags: {part: tag}, data: {part: fields}}
    this.events = []; // ["request", {url, body, headers}] and ["frame", views], in order
    this.hold = new Map(); // part name → a promise its answers wait for
    this.failing = new Set(); // part names answered with an error
    this.shedding = false; // orders/state answered 503, as admission control sheds a poll
    this.needAnyway = new Set(); // part names listed in need_request even when current
    this.versions = { taxi: "v1", grocery: "v1" }; // the policy versions a client is to hold
    this.kept = new Map(); // digest → the orders/state body it stands for
    this.forgetting = false; // every digest unknown, as a restarted server's
    this.fetch = this.fetch.bind(this);
  }

  add(orderid, service, status, data, brief = {}) {
    const tags = Object.fromEntries(Object.keys(data).map((part) => [part, `${part}-1`]));
    this.orders.push({ orderid, service, status, brief, tags, data });
  }

  change(orderid, part, fields, status) {
    const order = this.orders.find((o) => o.orderid === orderid);
    order.data[part] = { ...order.data[part], ...fields };
    order.tags[part] = `${part}-${Number(order.tags[part].split("-").pop()) + 1}`;
    if (status) order.status = status;
  }

  requests(fragment) {
    return this.events.filter(([kind, r]) => kind === "request" && r.url.includes(fragment))
      .map(([, r]) => r);
  }

  state(known) {
    const byId = new Map(known.map((k) => [k.orderid, k]));
    return this.orders.map((order) => {
      const held = byId.get(order.orderid)?.tags || {};
      const tags = {};
      const need = [];
      for (const rule of RULES.filter((r) => r.service === order.service)) {
        if (rule.polling_type !== "tag_defined") continue;
        const current = held[rule.part_name] === order.tags[rule.part_name];
        if (current) tags[rule.part_name] = held[rule.part_name];
        if (!current || this.needAnyway.has(rule.part_name)) need.push(rule.part_name);
      }
      return {
        orderid: order.orderid, service: order.service, status: order.status,
        update_status: "actual", tags, need_request: need, ...order.brief,
      };
    });
  }

  async fetch(url, init) {
    const path = new URL(url).pathname;
    // a gzipped body read as the services read it (docs/protocol.md: Request bodies)
    const gzipped = init.headers["Content-Encoding"] === "gzip";
    const text = gzipped
      ? await new Response(
        new Blob([init.body]).stream().pipeThrough(new DecompressionStream("gzip")),
      ).text()
      : init.body;
    let body = JSON.parse(text);
    // a digest request (docs/protocol.md: The digest request), recorded as the full body it
    // stands for if this server keeps it
    const digest = path === "/mlutp/v1/orders/state" && Object.keys(body).join() === "request_digest";
    if (digest) {
      const kept = this.kept.get(body.request_digest);
      if (!kept || this.forgetting) {
        this.events.push(["request", { url: path, body, headers: init.headers, digest, unknown: true }]);
        return json({ code: "unknown_request_digest", message: "send the full body" }, {}, 400);
      }
      body = kept;
    } else if (path === "/mlutp/v1/orders/state") {
      this.kept.set(await requestDigest(text), body);
    }
    // bytes as they went, and as the JSON they stand for
    const sentBytes = gzipped ? init.body.length : new TextEncoder().encode(text).length;
    const jsonBytes = new TextEncoder().encode(text).length;
    this.events.push(["request", { url: path, body, headers: init.headers, sentBytes, jsonBytes, digest }]);
    if (path === "/4.0/launch") {
      const state = {
        orders: this.state(body.known_orders), allowed_changes: {},
        polling_policy: RULES, policy_versions: { ...this.versions },
      };
      return json({ mlutp_orders_state: state });
    }
    if (path === "/mlutp/v1/orders/state") {
      if (this.shedding) return json({ code: "overloaded" }, { "Retry-After": "2" }, 503);
      // only the versions to hold the poll did not name (docs/protocol.md: Policy changes)
      const named = body.policy_versions || {};
      const answer = {
        orders: this.state(body.known_orders), allowed_changes: {},
        policy_versions: Object.fromEntries(
          Object.entries(this.versions).filter(([service, version]) => named[service] !== version),
        ),
      };
      // the answer_tag: a digest of the rest of the answer (here, its JSON text whole)
      const tag = JSON.stringify(answer);
      if (body.answer_tag === tag) {
        return new Response(null, { status: 204, headers: { "X-Yataxi-Polling-Interval-Ms": "1000" } });
      }
      return json({ ...answer, answer_tag: tag });
    }
    const rule = RULES.find((r) => r.url === path);
    if (rule.polling_type === "route_distance_depended") return json({ distance_left_m: 1500 });
    await this.hold.get(rule.part_name);
    if (this.failing.has(rule.part_name)) return json({ code: "upstream" }, {}, 500);
    return json({
      orders: body.orders.map(({ orderid, tag }) => {
        const order = this.orders.find((o) => o.orderid === orderid);
        // a part the app already holds: a new tag, no fields (docs/protocol.md: Part endpoints)
        if (tag === order.tags[rule.part_name]) return { orderid, tag, unchanged: true };
        return { orderid, tag: order.tags[rule.part_name], ...order.data[rule.part_name] };
      }),
    });
  }
}

function json(value, headers = {}, status = 200) {
  return new Response(JSON.stringify(value), {
    status, headers: { "Content-Type": "application/json", "X-Yataxi-Polling-Interval-Ms": "1000", ...headers },
  });
}

function clientOf(server, { storage = null, options = {} } = {}) {
  return new MlutpClient({
    fetch: server.fetch, baseUrl: "http://bff.test", storage,
    options: { waitMs: 0, backoffBaseMs: 0, pollRoute: false, ...options },
    onChange: (views) => server.events.push(["frame", views]),
  });
}

function deferred() {
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  return { promise, resolve };
}

function taxi(server, orderid = "t1") {
  server.add(orderid, "taxi", "driving", {
    fast_info: { status: "driving", eta: 5 }, slow: { performer: "Ivan", park: "Park 1" },
  }, { short_address: "Lenina 1", tariff_class: "econom" });
}

test("every order of the launch is shown before any part is asked for", async () => {
  const server = new Server();
  taxi(server);
  server.add("g1", "grocery", "assembling", { grocery_full: { items: 3 } });
  const client = clientOf(server);
  await client.launch();
  const firstPart = server.events.findIndex(([k, r]) => k === "request" && r.url !== "/4.0/launch");
  const firstFrame = server.events.findIndex(([k]) => k === "frame");
  assert.ok(firstFrame < firstPart);
  const shown = server.events[firstFrame][1];
  assert.deepEqual(shown.map((v) => v.orderid).sort(), ["g1", "t1"]);
  assert.ok(shown.every((v) => v.loading));
  // grocery's part type is one the client knows: its card gets its details
  assert.equal(client.view().find((v) => v.service === "grocery").data.items, 3);
});

test("a status change shows as soon as the required part lands, before a slow part", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  server.change("t1", "fast_info", { status: "transporting" }, "transporting");
  server.change("t1", "slow", { park: "Park 2" });
  const slow = deferred();
  server.hold.set("slow", slow.promise);
  const cycle = client.cycle();
  // the cycle is still out (the slow part held) when the new status is shown
  while (client.view()[0]?.data.status !== "transporting") await new Promise((r) => setImmediate(r));
  assert.equal(client.view()[0].data.park, "Park 1");
  slow.resolve();
  await cycle;
  assert.equal(client.view()[0].data.park, "Park 2");
});

test("part requests and launch carry the part type's parameters", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  client.position = { point: [37.6, 55.7], dx: 1009 };
  await client.launch();
  // docs/protocol.md (Part endpoints): the position with its accuracy in metres
  const expected = {
    format_currency: true, extend_freecars: false, supported: [],
    position: { point: [37.6, 55.7], dx: 1009 },
  };
  assert.deepEqual(server.requests("/4.0/launch")[0].body.part_parameters.totw, expected);
  const parts = server.requests("/mlutp/v1/taxi/");
  assert.ok(parts.length > 0);
  for (const { body } of parts) {
    const { orders, ...parameters } = body;
    assert.deepEqual(parameters, expected);
  }
});

test("a location fix becomes the position part requests carry", () => {
  const fix = { longitude: 37.6, latitude: 55.7, accuracy: 1009, altitude: null };
  assert.deepEqual(positionOf(fix), { point: [37.6, 55.7], dx: 1009 });
});

test("known orders echo their brief fields", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  const [poll] = server.requests("/orders/state");
  assert.equal(poll.body.known_orders[0].short_address, "Lenina 1");
  assert.equal(poll.body.known_orders[0].tariff_class, "econom");
});

test("known orders echo the version of their last actual answer", async () => {
  const server = new Server();
  server.add("t1", "taxi", "driving", { fast_info: { status: "driving", eta: 5 } }, {
    created_at: "2026-01-01T10:00:00.000Z", version: 7,
  });
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  const [poll] = server.requests("/orders/state");
  assert.equal(poll.body.known_orders[0].version, 7);
  assert.equal(poll.body.known_orders[0].created_at, "2026-01-01T10:00:00.000Z");
});

test("a part error marks every field of its rule stale", async () => {
  const server = new Server();
  taxi(server);
  server.failing.add("slow");
  const client = clientOf(server);
  await client.launch();
  const [view] = client.view();
  assert.deepEqual([...view.staleFields].sort(), ["park", "performer"]);
  assert.equal(view.data.status, "driving");
});

test("a reloaded app shows its orders at once and fetches nothing unchanged", async () => {
  const server = new Server();
  taxi(server);
  const kept = new Map();
  const storage = { getItem: (k) => kept.get(k) ?? null, setItem: (k, v) => kept.set(k, v) };
  const before = clientOf(server, { storage });
  await before.launch();
  const shown = before.view().map((v) => v.data);

  const after = clientOf(server, { storage });
  assert.deepEqual(after.view().map((v) => v.data), shown); // from its cache
  server.events.length = 0;
  await after.launch();
  await after.cycle();
  assert.equal(after.traffic.partRequests, 0);
  assert.deepEqual(after.view().map((v) => v.data), shown);
  assert.ok(after.view().every((v) => !v.loading && v.updateStatus === "actual"));
});

test("a part answered unchanged keeps its fields: it is not every field absent", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  const shown = client.view()[0].data;
  server.needAnyway.add("fast_info");
  server.events.length = 0;
  await client.cycle();
  const [asked] = server.requests("/fast_info");
  assert.ok(asked.body.orders[0].tag, "the part is asked with the tag the app holds");
  assert.deepEqual(client.view()[0].data, shown);
  assert.equal(client.view()[0].data.eta, 5);
});

test("a poll sends back its answer_tag, and a 204 keeps the answer", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  const shown = client.view();
  await client.cycle();
  await client.cycle();
  const [first, second, third] = server.requests("/orders/state");
  assert.equal(first.body.answer_tag, undefined);
  assert.ok(second.body.answer_tag);
  // the 204 kept the answer held, its tag too: sent again
  assert.equal(third.body.answer_tag, second.body.answer_tag);
  assert.deepEqual(client.view(), shown);
  assert.equal(client.view()[0].updateStatus, "actual");
  assert.ok(!client.view()[0].loading);
  // no If-None-Match: orders/state is a POST
  assert.ok(server.requests("/orders/state").every((r) => !("If-None-Match" in r.headers)));
});

test("a shed poll comes back after Retry-After, spread over the second after it", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  server.shedding = true;
  const waits = [];
  for (let i = 0; i < 20; i += 1) {
    await client.cycle();
    waits.push(client.intervalMs);
  }
  assert.ok(waits.every((ms) => ms >= 2000 && ms < 3000), `${waits}`);
  // clients shed in one instant do not all come back in another
  assert.ok(new Set(waits).size > 1, `${waits}`);
});

test("the route is polled by its own rule, with the app's position", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  client.position = { point: [37.6, 55.7], dx: 25 };
  await client.launch();
  await client.pollRoutes();
  await client.pollRoutes(); // 1.5 km left: not due again for seconds
  const routes = server.requests("/taxi/route");
  assert.equal(routes.length, 1);
  assert.deepEqual(routes[0].body.coordinates, [37.6, 55.7]);
  assert.equal(client.view()[0].data.distance_left_m, 1500);
});

test("a rule of an unknown part type is ignored: no request to it, nothing broken", async () => {
  const unknown = {
    service: "taxi", part_name: "hologram", url: "/mlutp/v1/taxi/hologram",
    part_type: "hologram_3d", fields: ["hologram"], polling_type: "tag_defined", priority: 1,
    required: true,
  };
  RULES.push(unknown);
  try {
    const server = new Server();
    taxi(server);
    const client = clientOf(server);
    await client.launch();
    await client.cycle();
    assert.deepEqual(server.requests("/hologram"), []);
    // the order is shown, its known parts fetched: the unknown required part holds nothing
    const [view] = client.view();
    assert.equal(view.orderid, "t1");
    assert.equal(view.loading, false);
    assert.equal(view.data.eta, 5);
  } finally {
    RULES.pop();
  }
});

test("after an expired part the next poll waits the interval, not at once", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  server.change("t1", "fast_info", { status: "transporting" }, "transporting");
  // a kept source answer that missed the order's end lists it; its parts say it is gone
  const answer = server.fetch;
  client.fetch = async (url, init) => {
    const path = new URL(url).pathname;
    if (path === "/mlutp/v1/orders/state") {
      const response = await answer(url, init);
      const headers = new Headers(response.headers);
      headers.set("X-Mlutp-Wait", "news");
      return new Response(await response.text(), { status: response.status, headers });
    }
    if (path.startsWith("/mlutp/v1/taxi/")) {
      const body = JSON.parse(init.body);
      return json({ orders: body.orders.map(({ orderid }) => ({ orderid, error: { update_status: "expired" } })) });
    }
    return answer(url, init);
  };
  await client.cycle();
  assert.deepEqual(client.view(), []);
  assert.equal(client.lastAnswer.waited, "news");
  // the loop's rule: news would poll at once, but not after a part that came back expired
  assert.equal(client.partsFailed, true);
});

test("a client keeps the policy versions it holds when a poll's answer names none", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  await client.cycle();
  const [, second] = server.requests("/mlutp/v1/orders/state");
  assert.deepEqual(second.body.policy_versions, { taxi: "v1", grocery: "v1" });
  assert.equal(server.requests("/4.0/launch").length, 1); // nothing told: no launch again
  assert.deepEqual(client.policyVersions, { taxi: "v1", grocery: "v1" });
  // a version it is told is named alone, and the client launches again to hold it
  server.versions = { taxi: "v2", grocery: "v1" };
  await client.cycle();
  assert.equal(server.requests("/4.0/launch").length, 2);
  assert.deepEqual(server.requests("/4.0/launch")[1].body.policy_versions, { taxi: "v2", grocery: "v1" });
  assert.deepEqual(client.policyVersions, { taxi: "v2", grocery: "v1" });
});

test("a poll over the threshold goes gzipped and smaller; a small part request plain", async () => {
  const server = new Server();
  taxi(server);
  server.add("g1", "grocery", "assembling", { grocery_full: { items: 3 } }, { place_name: "Lavka" });
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  await client.cycle();
  const polls = server.requests("/orders/state");
  assert.ok(polls.length >= 2);
  for (const poll of polls) {
    assert.ok(poll.jsonBytes >= client.options.gzipMinBytes, "the poll is over the threshold");
    assert.equal(poll.headers["Content-Encoding"], "gzip");
    assert.ok(poll.sentBytes < poll.jsonBytes * 0.8, `${poll.sentBytes} of ${poll.jsonBytes}`);
  }
  const parts = server.requests("/mlutp/v1/taxi/");
  assert.ok(parts.length > 0);
  for (const part of parts) {
    assert.ok(part.jsonBytes < client.options.gzipMinBytes);
    assert.equal(part.headers["Content-Encoding"], undefined);
  }
  // the traffic panel counts what went: the gzipped polls, the plain part requests
  const sent = server.requests("").reduce((total, r) => total + r.sentBytes, 0);
  assert.equal(client.traffic.bytesSent, sent);
});

test("a client that never gzips sends every body plain and is shown the same", async () => {
  const views = [];
  for (const gzipMinBytes of [null, 256]) {
    const server = new Server();
    taxi(server);
    server.add("g1", "grocery", "assembling", { grocery_full: { items: 3 } }, { place_name: "Lavka" });
    const client = clientOf(server, { options: { gzipMinBytes } });
    await client.launch();
    await client.cycle();
    server.change("t1", "fast_info", { eta: 3 }, "waiting");
    await client.cycle();
    const encodings = server.requests("").map((r) => r.headers["Content-Encoding"]);
    if (gzipMinBytes === null) assert.ok(encodings.every((e) => e === undefined));
    else assert.ok(encodings.includes("gzip"));
    views.push(client.view());
  }
  assert.deepEqual(views[0], views[1]);
  assert.equal(views[0][0].status, "waiting");
  assert.equal(views[0][0].data.eta, 3);
});

test("the digest of a body is the first 16 bytes of its SHA-256, base64url unpadded", async () => {
  // the value tests/shared/protocol/test_request_digest.py checks the server's against
  assert.equal(await requestDigest("{}"), "RBNvo1WzZ4oRRq0W9-hkng");
});

test("a poll repeating the body sent last goes as its digest, answered as that body", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  const shown = client.view();
  await client.cycle();
  await client.cycle();
  const [first, second, third] = server.requests("/orders/state");
  assert.ok(!first.digest && !second.digest);
  // the third repeats the second (its answer_tag sent back, a 204): the digest alone
  assert.ok(third.digest && third.headers["Content-Encoding"] === undefined);
  assert.deepEqual(third.body, second.body);
  assert.equal(client.traffic.digests, 1);
  assert.deepEqual(client.view(), shown);
  // news comes through it as through the full body
  server.change("t1", "fast_info", { eta: 3 });
  await client.cycle();
  assert.equal(client.view()[0].data.eta, 3);
});

test("a digest the server does not keep is followed at once by the full body, no backoff", async () => {
  const server = new Server();
  taxi(server);
  const client = clientOf(server);
  await client.launch();
  await client.cycle();
  await client.cycle();
  server.forgetting = true; // as a restarted server: it keeps nothing sent before
  const before = server.requests("/orders/state").length;
  await client.cycle();
  const [digest, full] = server.requests("/orders/state").slice(before);
  assert.ok(digest.unknown);
  assert.ok(!full.digest && full.body.answer_tag);
  assert.equal(client.traffic.digestMisses, 1);
  assert.equal(client.intervalMs, 1000); // the server's, not the fallback
  assert.equal(client.view()[0].updateStatus, "actual");
  server.forgetting = false;
  await client.cycle();
  assert.ok(server.requests("/orders/state").at(-1).digest);
});

test("a client told never to send digests, or without crypto.subtle, sends full bodies", async () => {
  const server = new Server();
  taxi(server);
  const never = clientOf(server, { options: { requestDigests: false } });
  await never.launch();
  for (let i = 0; i < 3; i += 1) await never.cycle();
  assert.ok(server.requests("/orders/state").every((r) => !r.digest));
  const crypto = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true });
  try {
    const bare = clientOf(server);
    await bare.launch();
    for (let i = 0; i < 3; i += 1) await bare.cycle();
  } finally {
    Object.defineProperty(globalThis, "crypto", crypto);
  }
  assert.ok(server.requests("/orders/state").every((r) => !r.digest));
  assert.equal(server.requests("/orders/state").length, 6);
});
