// The client half of the order polling contract (docs/protocol.md), for a browser: the same steps as
// client/client.py, written to be read beside it.
//
// - launch with extended order info: every order renders from the launch answer alone;
// - the waiting poll: orders/state with wait_ms, answered when a part changes;
// - parts by priority, a few requests at a time, up to 3 orders each;
// - partial updates: a part's fields replace the old ones, and one absent is deleted;
// - a stale order keeps what the client had, with a loader;
// - every order is shown at once, and its card changes as each part lands: only required
//   parts hold it;
// - part requests (and launch's part_parameters) carry their part type's parameters, a
//   totw one the app's position as {point: [lon, lat], dx: metres};
// - known orders echo their brief fields, so a stale order keeps them;
// - a part error marks every field of its rule stale;
// - with `storage` (the page's localStorage), orders, tags and policy versions survive a
//   reload: shown at once, revalidated by launch, nothing unchanged fetched again;
// - polls are revalidated by their answer_tag (sent back in the body; 204 for nothing new);
// - a poll repeating the body it sent last goes as that body's digest alone;
// - the route (route_distance_depended) is polled by its own rule: often when the car is close;
// - force after a user change until a part shows it (or its deadline passes);
// - the order's change capabilities decide what the user may change.
//
// `onChange(views)` is called with what the UI renders whenever something changed. It runs in
// a browser and in Node (`fetch` and `baseUrl` are options; tests/js runs it with node --test).

import { FEATURE_FIELDS, userChanges } from "./changes.js";
import { parts } from "./parts.js";
import { routes } from "./route.js";
import { echoFields, store } from "./store.js";
import { transport } from "./transport.js";

const STATE_KEYS = new Set([
  "orderid", "service", "status", "tags", "need_request", "update_status",
  "change_capabilities", "parts",
]);
const SUPPORTED_PART_TYPES = new Set(["totw", "eats_full", "grocery_full", "taxiroute"]);

// X-Mlutp-Wait values after which the next poll goes at once
const AT_ONCE = new Set(["news", "wakeup", "timeout", "shutdown"]);

export const OPTIONS = {
  supportedServices: ["taxi", "eats", "grocery"],
  waitMs: 25000,
  fallbackIntervalMs: 2000,
  parallelRequests: 2,
  maxOrdersPerPartRequest: 3,
  changeDeadlineMs: 15000,
  backoffBaseMs: 1000,
  backoffCapMs: 30000,
  // part type → what its part requests carry beside `orders`
  partParameters: { totw: { format_currency: true, extend_freecars: false, supported: [] } },
  // the route's own rule: this often (ms) while the car is at most this far (m); farther, the last
  routeEveryMs: [[500, 2000], [2000, 5000], [10000, 10000]],
  routeFarEveryMs: 20000,
  pollRoute: true,
  storageKey: "mlutp-client-state",
  // the feature services' user change endpoints, under the page's origin (or `baseUrl`)
  featuresPath: "/demo/v1/features",
  // request bodies this long or longer go gzipped where that pays (docs/protocol.md: Request
  // bodies); null: every body plain, as a client that never gzips sends it
  gzipMinBytes: 256,
  // a poll repeating the body it sent last goes as its digest (docs/protocol.md: The digest
  // request); false: every body in full, as a client that never sends one. Without
  // crypto.subtle (a page over plain HTTP from another host) every body goes in full
  requestDigests: true,
};

export class Traffic {
  // what this client sent and received: requests and bytes, per kind
  constructor() {
    this.requests = 0;
    this.bytesSent = 0;
    this.bytesReceived = 0;
    this.polls = 0;
    this.partRequests = 0;
    // digest requests sent, and those the server did not keep the body of (sent in full)
    this.digests = 0;
    this.digestMisses = 0;
  }
}

export function newOrder(orderid, service, status) {
  return {
    orderid, service, status,
    updateStatus: "actual",
    brief: {},
    parts: {}, // part name → {tag, fields, arrived, stale, failures, retryAt}
    seenVersion: 0,
    pending: null, // a user change on its way: {feature, value, deadline, version, key, ...}
    capabilities: {},
  };
}

// the app's position from a Geolocation API fix's coords: what totw part requests carry
// (docs/protocol.md: Part endpoints), the accuracy with the point
export function positionOf({ longitude, latitude, accuracy }) {
  return { point: [longitude, latitude], dx: accuracy };
}

export function newPart() {
  return {
    tag: null, fields: {}, arrived: false, stale: false, failures: 0, retryAt: 0, fetchedAt: 0,
  };
}

export class MlutpClient {
  constructor({
    onChange = () => {}, options = {}, fetch = globalThis.fetch.bind(globalThis), baseUrl = "",
    storage = null, headers = {},
  } = {}) {
    this.options = { ...OPTIONS, ...options };
    this.onChange = onChange;
    this.fetch = fetch;
    this.baseUrl = baseUrl;
    // sent with every request (a page served by a gateway needs none: it adds the user's own)
    this.headers = headers;
    this.storage = storage;
    this.validated = new Map(); // url → [answer_tag, answer]: polls revalidated by it
    // url → {text, digest}: the last full body sent there, once answered (so the server keeps
    // it); the next same body goes as its digest
    this.sentFull = new Map();
    // the device's position as the app knows it, {point: [lon, lat], dx: accuracy in metres}
    // (null: not known); positionOf makes it from a browser's location fix
    this.position = null;
    this.rules = {}; // service → rules by priority
    this.policyVersions = {};
    this.orders = []; // as shown, in order
    this.views = new Map(); // "service/orderid" → what the UI shows
    this.intervalMs = this.options.fallbackIntervalMs;
    this.traffic = new Traffic();
    this.lastAnswer = { waited: null, intervalMs: null, at: null };
    this.pollAbort = null;
    this.stopped = false;
    this.changeResults = []; // {service, orderid, feature, outcome}
    this.partsFailed = false;
    this.pollNowAsked = false;
    this.load();
  }

  // --- the protocol ------------------------------------------------------------------------

  // told: the policy versions a poll told the client to hold, named so that a launch replica
  // that serves them (announced, mid-rollout) hands them out
  async launch(told = {}) {
    const body = {
      supported_services: this.options.supportedServices,
      known_orders: this.known(),
      supported: ["extended_order_info"],
      part_parameters: Object.fromEntries(
        Object.keys(this.options.partParameters).map((type) => [type, this.partParameters(type)]),
      ),
    };
    const held = { ...this.policyVersions, ...told };
    if (Object.keys(held).length > 0) body.policy_versions = held;
    const answer = await this.post("/4.0/launch", body, { poll: true });
    if (answer === null) return false;
    const state = answer.mlutp_orders_state;
    const versions = { ...(state.policy_versions || {}) };
    for (const order of this.orders) {
      const before = this.policyVersions[order.service] ?? versions[order.service];
      // another version: every part of the service is fetched anew from its endpoints, once
      if (before !== versions[order.service]) order.parts = {};
    }
    this.policyVersions = versions;
    this.rules = {};
    for (const rule of state.polling_policy) {
      if (!SUPPORTED_PART_TYPES.has(rule.part_type)) continue; // unknown part types are ignored
      (this.rules[rule.service] ||= []).push(rule);
    }
    for (const rules of Object.values(this.rules)) rules.sort((a, b) => a.priority - b.priority);
    await this.applyState(state.orders);
    this.save();
    return true;
  }

  // one poll, then the parts it asks for, then the visible state
  async cycle() {
    if (Object.keys(this.rules).length === 0) {
      await this.launch();
      return;
    }
    this.partsFailed = false;
    this.pollNowAsked = false;
    const answer = await this.pollState();
    if (answer === "aborted") return;
    const told = answer !== null ? this.toldVersions(answer.policy_versions || {}) : {};
    if (Object.keys(told).length > 0) {
      // told to hold another policy: fetch it at once
      await this.launch(told);
      return;
    }
    if (answer !== null) {
      await this.applyState(answer.orders);
    } else {
      // no answer at all: keep everything, show loaders
      for (const order of this.orders) order.updateStatus = "stale";
      this.publish(this.orders, new Set());
    }
    await this.followChanges();
    this.save();
  }

  // poll until stopped: right after a waiting poll's answer, or at the server's interval
  async run() {
    while (!(await this.launch()) && !this.stopped) await this.pause(this.intervalMs);
    // the route keeps its own rhythm beside polls that may be held for long
    if (this.options.pollRoute) this.routeLoop();
    // launch's interval holds for the first poll as for any other
    await this.pause(this.intervalMs);
    while (!this.stopped) {
      const started = Date.now();
      await this.cycle();
      // after news, a wake-up, a wait's end or a shutdown the next poll may go at once; after
      // "unavailable" or "shed" (or a part that failed and is still needed) it waits the
      // interval, so a broken stack is not hammered
      if (AT_ONCE.has(this.lastAnswer.waited) && !this.partsFailed) continue;
      if (this.pollNowAsked) {
        this.pollNowAsked = false;
        continue;
      }
      await this.pause(Math.max(0, this.intervalMs - (Date.now() - started)));
    }
  }

  stop() {
    this.stopped = true;
    this.pollAbort?.abort();
    this.wake?.();
  }

  // the user made an order, which got its id back: show it (loading) and poll for it now
  orderCreated(service, orderid, status) {
    if (this.order(service, orderid)) return;
    const order = newOrder(orderid, service, status);
    this.orders.push(order);
    this.publish([order], new Set());
    this.pollNow();
  }

  // a held waiting poll does not name what changed since: give it up for one that does
  pollNow() {
    this.pollNowAsked = true;
    this.pollAbort?.abort();
    this.wake?.();
  }

  async pollState() {
    const body = {
      known_orders: this.known(),
      supported_services: this.options.supportedServices,
      wait_ms: this.options.waitMs,
      // the versions it holds: a replica that serves them answers by them
      policy_versions: this.policyVersions,
    };
    this.pollAbort = new AbortController();
    try {
      return await this.post("/mlutp/v1/orders/state", body, {
        poll: true,
        signal: this.pollAbort.signal,
      });
    } catch (error) {
      if (error.name === "AbortError") return "aborted";
      throw error;
    } finally {
      this.pollAbort = null;
    }
  }

  // the services whose policy the client holds in another version than it is told
  toldVersions(versions) {
    return Object.fromEntries(
      Object.entries(versions).filter(
        ([service, version]) => service in this.rules && this.policyVersions[service] !== version,
      ),
    );
  }

  // --- internals ---------------------------------------------------------------------------

  order(service, orderid) {
    return this.orders.find((o) => o.service === service && o.orderid === orderid) || null;
  }

  rule(service, partName) {
    return (this.rules[service] || []).find((r) => r.part_name === partName) || null;
  }

  known() {
    return this.orders.map((order) => {
      const tags = {};
      for (const [name, part] of Object.entries(order.parts)) if (part.tag) tags[name] = part.tag;
      const entry = {
        ...echoFields(order.brief),
        orderid: order.orderid, service: order.service, status: order.status, tags,
      };
      if (order.pending) entry.force = true; // a user change waits to be seen
      return entry;
    });
  }

  async applyState(answered) {
    const byKey = new Map(this.orders.map((o) => [`${o.service}/${o.orderid}`, o]));
    const orders = [];
    const needed = new Map(); // key → part names
    const inlined = new Set(); // "service/orderid/part" that came with launch
    for (const item of answered) {
      const key = `${item.service}/${item.orderid}`;
      const order = byKey.get(key) || newOrder(item.orderid, item.service, item.status);
      order.updateStatus = item.update_status;
      order.capabilities = item.change_capabilities || {};
      if (order.updateStatus === "actual") {
        order.status = item.status;
        order.brief = Object.fromEntries(
          Object.entries(item).filter(([name]) => !STATE_KEYS.has(name)),
        );
        // tags the server did not echo are invalid: forget them
        for (const [name, part] of Object.entries(order.parts)) {
          if (!(name in item.tags)) part.tag = null;
        }
        needed.set(key, item.need_request.filter((name) => this.rule(order.service, name)));
        for (const [name, fields] of Object.entries(item.parts || {})) {
          const rule = this.rule(order.service, name);
          if (!rule) continue;
          order.parts[name] ||= newPart();
          if (this.applyPart(order, rule, { ...fields, orderid: order.orderid })) {
            inlined.add(`${key}/${name}`);
          }
        }
      }
      orders.push(order);
    }
    this.orders = orders; // orders left out have finished
    const shown = new Set(orders.map((o) => `${o.service}/${o.orderid}`));
    for (const key of [...this.views.keys()]) if (!shown.has(key)) this.views.delete(key);
    // every order at once (one never shown as a placeholder); then each part as it lands
    const arrived = new Set(inlined);
    this.publish(orders, arrived, needed);
    await this.fetchParts(needed, arrived);
  }

  // an order's new state is shown only once the required parts asked for in this cycle
  // have arrived; until then its previous view stays
  publish(orders, arrived, needed = new Map()) {
    for (const order of orders) {
      const key = `${order.service}/${order.orderid}`;
      const rules = this.rules[order.service] || [];
      const required = rules.filter((r) => r.required).map((r) => r.part_name);
      const waiting = (needed.get(key) || []).filter(
        (name) => required.includes(name) && !arrived.has(`${key}/${name}`),
      );
      const neverArrived = required.some((name) => !order.parts[name]?.arrived);
      const parts = {};
      const staleFields = new Set();
      for (const rule of rules) {
        const part = order.parts[rule.part_name];
        // every field of a failed part's rule, held or not: none is known to be new
        if (part?.stale) for (const field of rule.fields) staleFields.add(field);
        if (rule.polling_type !== "tag_defined") continue;
        parts[rule.part_name] = !part?.arrived ? "missing" : part.stale ? "stale" : "fresh";
      }
      const held = this.views.get(key);
      if (waiting.length && held) {
        this.views.set(key, {
          ...held, parts, staleFields, locked: order.pending !== null,
          capabilities: order.capabilities,
        });
        continue;
      }
      const data = {};
      for (const part of Object.values(order.parts)) Object.assign(data, part.fields);
      const pending = order.pending;
      const field = pending ? FEATURE_FIELDS[pending.feature] : undefined;
      if (field !== undefined) data[field] = pending.value; // optimistic, until it is seen
      this.views.set(key, {
        key,
        orderid: order.orderid,
        service: order.service,
        status: order.status,
        updateStatus: order.updateStatus,
        loading: neverArrived || order.updateStatus === "stale",
        locked: pending !== null,
        data,
        brief: { ...order.brief },
        parts,
        staleFields,
        capabilities: { ...order.capabilities },
        seenVersion: order.seenVersion,
      });
    }
    this.onChange(this.view());
  }

  view() {
    return this.orders
      .map((o) => this.views.get(`${o.service}/${o.orderid}`))
      .filter((v) => v !== undefined);
  }

}

// user changes, parts, the route, the kept state and the transport: methods of the client, in
// modules of their own
Object.assign(MlutpClient.prototype, userChanges, parts, routes, store, transport);
