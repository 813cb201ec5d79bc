// What the client holds of its orders, as it sends it and as it keeps it (docs/protocol.md:
// Writing a client): known orders echo their brief fields (so a stale order keeps them), and
// with `storage` (the page's localStorage) the orders, their tags and the policy versions
// survive a reload: shown at once, revalidated by launch, nothing unchanged fetched again.
// Methods of MlutpClient (client.js), kept here by job.

import { newOrder, newPart } from "./client.js";

// a known order's own keys, never sent as echo fields; the server's bounds on echo fields
const KNOWN_ORDER_KEYS = new Set(["orderid", "service", "status", "tags", "force"]);
const MAX_ECHO_FIELDS = 16;
const MAX_ECHO_BYTES = 2048;
const STATE_VERSION = 1;

// an order's brief fields as its known order sends them back: within the server's bounds
export function echoFields(brief) {
  const echo = {};
  let size = 2;
  for (const [name, value] of Object.entries(brief)) {
    if (KNOWN_ORDER_KEYS.has(name) || Object.keys(echo).length >= MAX_ECHO_FIELDS) continue;
    const item = JSON.stringify({ [name]: value }).length - 1;
    if (size + item > MAX_ECHO_BYTES) continue;
    echo[name] = value;
    size += item;
  }
  return echo;
}

export const store = {
  // what the app kept when it stopped: shown at once, revalidated by launch
  load() {
    if (!this.storage) return;
    try {
      const state = JSON.parse(this.storage.getItem(this.options.storageKey) || "null");
      if (!state || state.version !== STATE_VERSION) return;
      this.policyVersions = { ...state.policy_versions };
      this.orders = state.orders.map((saved) => {
        const order = newOrder(saved.orderid, saved.service, saved.status);
        order.updateStatus = "stale"; // from the cache until launch says more
        order.brief = { ...saved.brief };
        for (const [name, part] of Object.entries(saved.parts)) {
          order.parts[name] = { ...newPart(), tag: part.tag, fields: { ...part.fields }, arrived: true };
        }
        return order;
      });
      this.publish(this.orders, new Set());
    } catch {
      this.orders = []; // a state this client cannot read: start afresh
      this.policyVersions = {};
    }
  },

  save() {
    if (!this.storage) return;
    const orders = this.orders.map((order) => ({
      orderid: order.orderid,
      service: order.service,
      status: order.status,
      brief: order.brief,
      parts: Object.fromEntries(
        Object.entries(order.parts)
          .filter(([, part]) => part.arrived)
          .map(([name, part]) => [name, { tag: part.tag, fields: part.fields }]),
      ),
    }));
    const state = { version: STATE_VERSION, policy_versions: this.policyVersions, orders };
    this.storage.setItem(this.options.storageKey, JSON.stringify(state));
  },
};
