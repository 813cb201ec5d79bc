// The route part's own rule (route_distance_depended): while a taxi is on its way, polled
// often when the car is close and rarely when it is far, with the app's own position and
// time, beside polls that may be held for long. Methods of MlutpClient (client.js), kept here
// by job.

import { newPart } from "./client.js";

const ROUTE_STATUSES = new Set(["driving", "waiting", "transporting"]);

// the route's polling interval for a car this far from where it goes
export function routeIntervalMs(distanceLeftM, options) {
  if (typeof distanceLeftM !== "number") return options.routeEveryMs[0][1];
  for (const [upToM, everyMs] of options.routeEveryMs) if (distanceLeftM <= upToM) return everyMs;
  return options.routeFarEveryMs;
}

export const routes = {
  // the routes due now, each polled with the app's own position and time
  async pollRoutes() {
    const now = Date.now();
    for (const order of [...this.orders]) {
      if (!ROUTE_STATUSES.has(order.status) || order.updateStatus !== "actual") continue;
      for (const rule of this.rules[order.service] || []) {
        if (rule.polling_type !== "route_distance_depended") continue;
        const part = (order.parts[rule.part_name] ||= newPart());
        const everyMs = routeIntervalMs(part.fields.distance_left_m, this.options);
        if (now - part.fetchedAt < everyMs || part.retryAt > now) continue;
        const body = {
          orderid: order.orderid, timestamp: new Date(now).toISOString(), use_history: true,
        };
        // taxiroute's own field: the point alone (it has none for the accuracy)
        if (this.position) body.coordinates = [...this.position.point];
        part.fetchedAt = now;
        this.applyPart(order, rule, await this.post(rule.url, body));
        this.publish([order], new Set());
      }
    }
  },

  async routeLoop() {
    while (!this.stopped) {
      await this.pollRoutes();
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  },
};
