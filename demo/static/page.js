// The demo page: renders what the client (client.js) shows, sends the user's actions, and
// keeps the traffic panel. Cards are updated in place and never rebuilt, so nothing moves
// unless the order of the orders does.

import { MlutpClient } from "./client.js";

const $ = (id) => document.getElementById(id);
// the page's localStorage keeps the orders and their tags across reloads
const client = new MlutpClient({ onChange: render, storage: window.localStorage });
const cards = new Map(); // key → card element
const shownSince = new Map(); // key → when the card appeared (legacy polls it from then)
const shownUntil = new Map(); // key → when it left (null while shown)
let legacyIntervalS = 5;
let upstream = { calls: {}, bytes_sent: {} };

function text(value) {
  return value === undefined || value === null || value === "" ? "—" : String(value);
}

function money(value) {
  return value ? `${value.value} ${value.currency}` : "—";
}

function allowed(view, capability) {
  return Boolean(view.capabilities?.[capability]?.allowed) && !view.locked
    && view.updateStatus === "actual";
}

function details(view) {
  const d = view.data;
  if (view.service === "taxi") {
    const car = d.vehicle ? `${d.vehicle.color} ${d.vehicle.model}, ${d.vehicle.plates}` : null;
    return [
      ["driver", d.driver ? `${d.driver.name} ★${d.driver.rating}` : null],
      ["car", car],
      ["eta", d.eta ? `${d.eta.minutes} min` : null],
      ["cost", money(d.cost)],
      ["comment", d.comment],
      ["tips", d.tips ? `${d.tips.value}${d.tips.type === "percent" ? " %" : ""}` : null],
    ];
  }
  return [
    ["place", d.place?.name],
    ["courier", d.courier?.name],
    ["eta", d.eta ? `${d.eta.minutes} min` : null],
    ["total", money(d.total)],
  ];
}

function newCard(view) {
  const card = document.createElement("article");
  card.className = "card";
  card.dataset.key = view.key;
  card.innerHTML = `
    <div class="top"><span class="status"></span><span class="id"></span></div>
    <span class="loader"></span>
    <dl></dl>
    <div class="parts"></div>
    <div class="actions">
      <button type="button" data-action="advance" title="the emulator moves the order on">Advance</button>
      <input type="text" data-input="comment" placeholder="comment for the driver">
      <button type="button" data-action="comment">Change comment</button>
      <button type="button" data-action="tips">+10 % tips</button>
      <button type="button" data-action="cancel">Cancel</button>
    </div>
    <p class="result"></p>`;
  card.addEventListener("click", (event) => {
    const action = event.target.dataset?.action;
    if (action) act(card.dataset.key, action, card);
  });
  return card;
}

function fill(card, view) {
  card.dataset.status = view.status;
  card.dataset.updateStatus = view.updateStatus;
  card.dataset.locked = String(view.locked);
  card.classList.toggle("stale", view.updateStatus === "stale");
  card.classList.toggle("loading", view.loading && view.updateStatus !== "stale");
  card.classList.toggle("locked", view.locked);
  card.querySelector(".status").textContent =
    `${view.status}${view.data.status_info?.text ? ` · ${view.data.status_info.text}` : ""}`;
  card.querySelector(".id").textContent = `${view.service} ${view.orderid}`;
  card.querySelector(".loader").textContent = view.updateStatus === "stale"
    ? "service unavailable: showing what we had"
    : "loading…";
  card.querySelector("dl").innerHTML = details(view)
    .map(([name, value]) => `<dt>${name}</dt><dd data-field="${name}"></dd>`)
    .join("");
  for (const [name, value] of details(view)) {
    card.querySelector(`dd[data-field="${name}"]`).textContent = text(value);
  }
  card.querySelector(".parts").innerHTML = Object.entries(view.parts)
    .map(([name, state]) => `<span class="${state}" title="${state}">${name}</span>`)
    .join("");
  const taxi = view.service === "taxi";
  const buttons = {
    advance: !view.locked,
    comment: taxi && allowed(view, "comment"),
    tips: taxi && allowed(view, "add_tips"),
    cancel: allowed(view, "cancel"),
  };
  for (const [action, enabled] of Object.entries(buttons)) {
    card.querySelector(`[data-action="${action}"]`).disabled = !enabled;
  }
  card.querySelector('[data-input="comment"]').disabled = !buttons.comment;
  card.querySelector('[data-input="comment"]').hidden = !taxi;
  card.querySelector('[data-action="comment"]').hidden = !taxi;
  card.querySelector('[data-action="tips"]').hidden = !taxi;
  const result = card.querySelector(".result");
  if (view.locked) result.textContent = "your change is on its way: locked until the data shows it";
}

function render(views) {
  const now = Date.now();
  const keys = new Set(views.map((v) => v.key));
  for (const [key, card] of cards) {
    if (!keys.has(key)) {
      card.remove();
      cards.delete(key);
      shownUntil.set(key, now);
    }
  }
  const list = $("orders");
  let previous = $("empty");
  for (const view of views) {
    let card = cards.get(view.key);
    if (!card) {
      card = newCard(view);
      cards.set(view.key, card);
      if (!shownSince.has(view.key)) shownSince.set(view.key, now);
      shownUntil.set(view.key, null);
    }
    fill(card, view);
    if (previous.nextSibling !== card) list.insertBefore(card, previous.nextSibling);
    previous = card;
  }
  $("empty").hidden = views.length > 0;
  renderTraffic();
}

async function act(key, action, card) {
  const view = client.view().find((v) => v.key === key);
  if (!view) return;
  const result = card.querySelector(".result");
  result.classList.remove("failed");
  if (action === "advance") {
    await fetch(`/demo/v1/orders/${view.service}/${view.orderid}/advance`, { method: "POST" });
    return; // the next poll answers with it: no other notice needed
  }
  if (action === "cancel") {
    const { status, answer } = await client.cancel(view.service, view.orderid);
    result.textContent = status === 200 ? "cancelled" : `cancel refused: ${answer?.reason || answer?.code}`;
    result.classList.toggle("failed", status !== 200);
    return;
  }
  const value = action === "comment"
    ? card.querySelector('[data-input="comment"]').value
    : { type: "percent", value: Math.min(100, (view.data.tips?.value || 0) + 10) };
  const feature = action === "comment" ? "comment" : "tips";
  const before = client.changeResults.length;
  const sent = await client.change(view.service, view.orderid, feature, value);
  if (!sent) {
    const last = client.changeResults.at(-1);
    result.textContent = `${feature} refused: ${last?.outcome || "failed"}`;
    result.classList.add("failed");
    return;
  }
  // the outcome comes with a later poll: shown when the client decides it
  const watch = setInterval(() => {
    const done = client.changeResults.slice(before).find((r) => r.feature === feature);
    if (!done) return;
    clearInterval(watch);
    result.textContent = done.outcome === "seen"
      ? `${feature} changed: seen in the data`
      : `${feature} not applied: ${done.outcome}`;
    result.classList.toggle("failed", done.outcome !== "seen");
  }, 200);
}

function legacy() {
  // one totw per shown order every legacyIntervalS, from the moment it was shown
  const now = Date.now();
  let requests = 0;
  for (const [key, since] of shownSince) {
    const until = shownUntil.get(key) ?? now;
    requests += 1 + Math.floor((until - since) / 1000 / legacyIntervalS);
  }
  return requests;
}

function heavyCalls(counts) {
  return Object.entries(counts)
    .filter(([target]) => target === "totw" || target.endsWith("_details"))
    .reduce((sum, [, n]) => sum + n, 0);
}

function sum(counts) {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

function kb(bytes) {
  return bytes < 10240 ? `${bytes} B` : `${(bytes / 1024).toFixed(0)} KB`;
}

function renderTraffic() {
  const t = client.traffic;
  const legacyRequests = legacy();
  const heavy = heavyCalls(upstream.calls);
  const heavyBytes = heavyCalls(upstream.bytes_sent);
  // a legacy request returns the whole document: the size the upstream served on average
  const perDocument = heavy ? heavyBytes / heavy : 9000;
  $("t-requests").textContent = t.requests;
  $("t-bytes").textContent = kb(t.bytesReceived);
  $("t-heavy").textContent = heavy;
  $("t-upstream").textContent = sum(upstream.calls);
  $("l-requests").textContent = legacyRequests;
  $("l-bytes").textContent = kb(Math.round(legacyRequests * perDocument));
  $("l-heavy").textContent = legacyRequests;
  $("l-upstream").textContent = legacyRequests;
  const wait = client.lastAnswer.waited;
  $("poll-state").textContent = `last answer: ${wait ? `X-Mlutp-Wait ${wait}` : "—"}, `
    + `interval ${client.intervalMs} ms; ${t.polls} polls, ${t.partRequests} part requests`;
}

async function refreshUpstream() {
  try {
    const response = await fetch("/demo/v1/traffic");
    if (response.ok) upstream = await response.json();
  } catch {
    // the panel keeps its last figures
  }
  renderTraffic();
}

async function createOrder(service) {
  const response = await fetch("/demo/v1/orders", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ service }),
  });
  if (!response.ok) return;
  const { orderid } = await response.json();
  client.orderCreated(service, orderid, service === "taxi" ? "searching" : "created");
}

async function setUp() {
  const config = await (await fetch("/demo/v1/config")).json();
  $("user").textContent = config.user_id;
  legacyIntervalS = config.legacy_interval_s;
  const labels = { tag_cache: "tag cache down", eats_source: "food source down", totw: "totw errors" };
  $("faults").innerHTML = config.faults
    .map((f) => `<label><input type="checkbox" data-fault="${f}"> ${labels[f] || f}</label>`)
    .join("");
  $("faults").addEventListener("change", async (event) => {
    const box = event.target;
    box.disabled = true;
    await fetch("/demo/v1/faults", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ fault: box.dataset.fault, on: box.checked }),
    });
    box.disabled = false;
    client.pollNow(); // a held poll would show the fault only when its wait ends
  });
  for (const service of ["taxi", "eats", "grocery"]) {
    $(`new-${service}`).addEventListener("click", () => createOrder(service));
  }
  setInterval(refreshUpstream, 1000);
  window.mlutpDemo = client; // for a look from the browser's console
  client.run();
}

setUp();
