// User changes, the client half (docs/protocol.md: Feature data and user changes): a change
// is shown at once and locked, and the order polled with force until a part shows it;
// versioned features catch up once after a conflict, last-write-wins ones retry once with
// the same idempotency key. Methods of MlutpClient (client.js), kept here by job.

// feature → the field it writes; versioned unless listed as last-write-wins
export const FEATURE_FIELDS = { destination: "destinations", comment: "comment", tips: "tips" };
const LAST_WRITE_WINS = new Set(["tips"]);

export const userChanges = {
  // A user change through its feature service: shown at once, locked, polled with force
  // until a part shows it. Returns the feature's answer, or null if it refused.
  async change(service, orderid, feature, value) {
    const order = this.order(service, orderid);
    if (!order) return null;
    const pending = {
      feature, value, deadline: Date.now() + this.options.changeDeadlineMs,
      version: null, key: null, conflict: false, retried: false,
    };
    if (LAST_WRITE_WINS.has(feature)) pending.key = crypto.randomUUID();
    order.pending = pending;
    this.publish([order], new Set());
    const sent = await this.sendChange(order, pending);
    this.publish([order], new Set());
    if (sent) this.pollNow();
    return sent;
  },

  // cancel has no field to show: the order is gone from the next answer, or it is refused
  async cancel(service, orderid) {
    const status = await this.call(`${this.options.featuresPath}/${service}/${orderid}/cancel`, {});
    if (status.status === 200) this.pollNow();
    return status;
  },

  async sendChange(order, pending) {
    const body = { value: pending.value };
    if (pending.key !== null) {
      body.idempotency_key = pending.key;
      body.requested_at_ms = Date.now();
    } else {
      body.version = order.seenVersion;
    }
    const url = `${this.options.featuresPath}/${order.service}/${order.orderid}/${pending.feature}`;
    const { status, answer } = await this.call(url, body);
    if (status === 200 && answer) {
      pending.version = answer.version;
      pending.conflict = false;
      return true;
    }
    if (status === 409 && answer?.code === "version_conflict" && !pending.retried) {
      // another device changed it first: catch up to that version, then retry once
      pending.version = answer.current_version;
      pending.conflict = true;
      pending.conflictSeen = answer.current_version;
      return true;
    }
    this.changeDone(order, answer?.reason || answer?.code || "failed");
    return false;
  },

  // after each poll: a change is seen (unlock), its conflict caught up (retry once), or its
  // deadline passed (last-write-wins: retry once; versioned: failed)
  async followChanges() {
    const now = Date.now();
    for (const order of [...this.orders]) {
      const pending = order.pending;
      if (!pending) continue;
      if (pending.conflict) {
        if (pending.version !== null && order.seenVersion >= pending.version) {
          pending.retried = true;
          pending.deadline = now + this.options.changeDeadlineMs;
          await this.sendChange(order, pending);
        } else if (now >= pending.deadline) {
          this.changeDone(order, "failed");
        }
        continue;
      }
      if (this.changeSeen(order, pending)) {
        this.changeDone(order, "seen");
      } else if (now >= pending.deadline) {
        if (pending.key !== null && !pending.retried) {
          pending.retried = true; // the same key: a change that did land changes nothing twice
          pending.deadline = now + this.options.changeDeadlineMs;
          await this.sendChange(order, pending);
        } else {
          this.changeDone(order, "failed");
        }
      }
    }
  },

  changeSeen(order, pending) {
    const field = FEATURE_FIELDS[pending.feature];
    if (pending.key !== null) {
      // last-write-wins: the requested value itself shows it
      return Object.values(order.parts).some(
        (part) => part.arrived && JSON.stringify(part.fields[field]) === JSON.stringify(pending.value),
      );
    }
    return pending.version !== null && order.seenVersion >= pending.version;
  },

  // seen or failed: the lock is released and force stops
  changeDone(order, outcome) {
    if (order.pending) {
      this.changeResults.push({
        service: order.service, orderid: order.orderid, feature: order.pending.feature, outcome,
      });
    }
    order.pending = null;
    this.publish([order], new Set());
  },
};
