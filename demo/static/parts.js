// Parts (docs/protocol.md: Part endpoints): fetched by priority, a few orders a request and a
// few requests at a time, each with its part type's parameters; each applied and shown as it
// lands (a field absent from its answer is deleted); an error marks it stale and backs it
// off; `expired` ends the order. Methods of MlutpClient (client.js), kept here by job.

import { newPart } from "./client.js";

// the part types whose requests carry the app's position
const POSITIONED_PART_TYPES = new Set(["totw"]);

export const parts = {
  // fetch by priority, batching orders per part, a few requests at a time
  async fetchParts(needed, arrived = new Set()) {
    const now = Date.now();
    const batches = new Map(); // url → {rule, orders}
    for (const [key, names] of needed) {
      const order = this.orders.find((o) => `${o.service}/${o.orderid}` === key);
      if (!order) continue;
      for (const name of names) {
        const rule = this.rule(order.service, name);
        order.parts[name] ||= newPart();
        if (!rule) continue;
        if (order.parts[name].retryAt > now) {
          // backing off after errors, and still needed: the next poll waits the interval
          this.partsFailed = true;
          continue;
        }
        if (!batches.has(rule.url)) batches.set(rule.url, { rule, orders: [] });
        batches.get(rule.url).orders.push(order);
      }
    }
    const requests = [];
    const sorted = [...batches.values()].sort((a, b) => a.rule.priority - b.rule.priority);
    for (const { rule, orders } of sorted) {
      for (let i = 0; i < orders.length; i += this.options.maxOrdersPerPartRequest) {
        requests.push({ rule, orders: orders.slice(i, i + this.options.maxOrdersPerPartRequest) });
      }
    }
    const fetchOne = async ({ rule, orders }) => {
      const body = {
        ...this.partParameters(rule.part_type),
        orders: orders.map((order) => {
          const tag = order.parts[rule.part_name].tag;
          return tag ? { orderid: order.orderid, tag } : { orderid: order.orderid };
        }),
      };
      this.traffic.partRequests += 1;
      const answer = await this.post(rule.url, body);
      const results = new Map((answer?.orders || []).map((r) => [r.orderid, r]));
      for (const order of orders) {
        if (this.applyPart(order, rule, results.get(order.orderid) || null)) {
          arrived.add(`${order.service}/${order.orderid}/${rule.part_name}`);
        }
      }
      this.publish(orders.filter((o) => this.orders.includes(o)), arrived, needed);
    };
    // requests in priority order, at most `parallelRequests` at a time
    let next = 0;
    const worker = async () => {
      while (next < requests.length) await fetchOne(requests[next++]);
    };
    await Promise.all(Array.from({ length: this.options.parallelRequests }, worker));
    return arrived;
  },

  partParameters(partType) {
    const parameters = { ...(this.options.partParameters[partType] || {}) };
    if (POSITIONED_PART_TYPES.has(partType) && this.position) {
      // the design note's object: totw would misread a bare [lon, lat]
      parameters.position = { point: [...this.position.point], dx: this.position.dx };
    }
    return parameters;
  },

  applyPart(order, rule, result) {
    const part = order.parts[rule.part_name];
    if (result === null || "error" in result) {
      if (result?.error?.update_status === "expired") {
        this.orders = this.orders.filter((o) => o !== order);
        // back to the interval, not at once: a kept source answer that missed the order's
        // end lists it again until it is asked anew, and polling at once would spin
        this.partsFailed = true;
        return false;
      }
      // the part's fields are old now; retry with backoff
      this.partsFailed = true;
      part.stale = true;
      part.failures += 1;
      const backoff = Math.min(
        this.options.backoffCapMs, this.options.backoffBaseMs * 2 ** (part.failures - 1),
      );
      part.retryAt = Date.now() + backoff * (0.5 + Math.random() / 2);
      return false;
    }
    // `unchanged`: the part the app holds is current; it keeps its fields under the new tag
    // (not "every field absent"). Otherwise the part's fields, exactly: one absent from the
    // answer is deleted
    if (result.unchanged !== true) {
      part.fields = {};
      for (const name of rule.fields) if (name in result) part.fields[name] = result[name];
    }
    part.tag = result.tag ?? null;
    Object.assign(part, { arrived: true, stale: false, failures: 0, retryAt: 0 });
    part.fetchedAt = Date.now();
    const version = part.fields.version;
    if (Number.isInteger(version) && version > order.seenVersion) order.seenVersion = version;
    return true;
  },
};
