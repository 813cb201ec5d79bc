// One launch and one poll through the client openapi-generator makes from openapi/client.yaml
// (typescript-fetch), against a running stack; prints what it parsed as one JSON line. The
// user goes in the spec's security scheme (X-Yandex-UID, an apiKey): the Configuration's apiKey.
// The test copies it beside the generated client (./client) and compiles both with tsc.
//   node driver.js LAUNCH_URL ORDERS_STATE_URL USER ORDERID
import { Configuration, LaunchApi, OrdersStateApi, type StateOrder } from "./client/index";

// Node's own, without @types/node: the driver needs nothing else of it
declare const process: { argv: string[]; exitCode?: number };

function brief(order: StateOrder): Record<string, unknown> {
  return {
    orderid: order.orderid,
    service: order.service,
    updateStatus: order.updateStatus,
    needRequest: order.needRequest,
    tags: order.tags,
  };
}

async function main(): Promise<void> {
  const [launchUrl, stateUrl, user, orderid] = process.argv.slice(2);
  const launchApi = new LaunchApi(new Configuration({ basePath: launchUrl, apiKey: user }));
  const launched = await launchApi.launch({
    launchRequest: { supportedServices: ["taxi"] },
  });
  const state = launched.mlutpOrdersState;
  const order = state.orders.find((one) => one.orderid === orderid);
  if (order === undefined) {
    throw new Error(`launch did not list ${orderid}`);
  }
  const stateApi = new OrdersStateApi(new Configuration({ basePath: stateUrl, apiKey: user }));
  // known_orders has uniqueItems: the generator makes it a Set
  const known = new Set([
    { orderid, service: order.service, status: order.status, tags: order.tags },
  ]);
  const polled = await stateApi.pollOrdersState({
    ordersStateBody: { knownOrders: known },
  });
  if (!polled) {
    throw new Error("the first poll came without a body");
  }
  // its answer_tag sent back: nothing new is a 204, no body, and no error thrown
  const again = await stateApi.pollOrdersStateRaw({
    ordersStateBody: { knownOrders: known, answerTag: polled.answerTag },
  });
  console.log(
    JSON.stringify({
      launch: {
        orders: state.orders.map(brief),
        policyUrls: state.pollingPolicy.map((rule) => rule.url),
        allowedChanges: state.allowedChanges.map((changes) => changes.service),
      },
      poll: {
        orders: polled.orders.map(brief),
        policyVersions: polled.policyVersions,
        answerTag: polled.answerTag,
      },
      again: { status: again.raw.status, ok: again.raw.ok },
    }),
  );
}

main().catch((error: unknown) => {
  console.log(`driver failed: ${error instanceof Error ? error.stack : String(error)}`);
  process.exitCode = 1;
});
