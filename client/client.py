"""The reference client: its cycle (launch, poll, fetch the parts asked for, show), read as
documentation of the client half of the contract; see the package's docstring for its rules."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiohttp

from client.answer import merge_answer
from client.changes import UserChanges
from client.model import (
    ClientOptions,
    Order,
    OrderKey,
    OrderView,
    PartKey,
    Position,
    Rule,
    VersionSeen,
)
from client.parts import PartOutcome, apply_part, part_order, part_parameters, part_requests
from client.policy import forget_moved_parts, rules_by_service, told_versions
from client.route import route_request, routes_due
from client.store import known_orders, load_state, save_state
from client.timing import cycle_until, next_poll, unless_set
from client.transport import ClientStats, Replicas, Transport
from client.view import Views


class MlutpClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        launch_url: str | Sequence[str],
        orders_state_url: str | Sequence[str],
        user_id: str,
        supported_services: Iterable[str] = ("taxi", "eats", "grocery"),
        user_agent: str = "mlutp-reference-client/1.0",
        options: ClientOptions | None = None,
        on_version_seen: VersionSeen | None = None,
        rng: random.Random | None = None,
        features_url: str | None = None,
    ) -> None:
        self.options = options or ClientOptions()
        self.transport = Transport(
            session,
            user_id=user_id,
            user_agent=user_agent,
            timeout_s=self.options.request_timeout_s,
            stats=ClientStats(),
            gzip_min_bytes=self.options.gzip_min_bytes,
            request_digests=self.options.request_digests,
        )
        self.point_at(launch_url, orders_state_url)
        self.supported_services = list(supported_services)
        self.on_version_seen = on_version_seen
        self.rng = rng or random.Random()
        self.changes = UserChanges(
            self.transport, features_url, self.options, lambda order: self._publish([order])
        )
        self.rules: dict[str, list[Rule]] = {}
        # the policy version of each service whose rules the client holds (from launch)
        self.policy_versions: dict[str, str] = {}
        self.orders: list[Order] = []  # as shown, in order
        self.interval_s = self.options.fallback_interval_s
        # the last waiting poll may be followed by the next one at once
        self.poll_again_at_once = False
        self._parts_failed = False
        # what a UI renders; `views.on_change` tells it when to render again
        self.views = Views()
        # the device's position as the app knows it (None: not known): sent with totw part
        # requests and launch's part_parameters, and its point with route requests
        self.position: Position | None = None
        # set by order_created: the next poll goes out now, a poll in flight is given up
        self._poll_now = asyncio.Event()
        if self.options.state_file is not None:
            # what the app held when it stopped: shown at once, revalidated by launch
            self.orders, self.policy_versions = load_state(self.options.state_file)
            self._publish(self.orders)

    @property
    def stats(self) -> ClientStats:
        """The requests counted so far; replaced to count afresh (a load test's phase)."""
        return self.transport.stats

    @stats.setter
    def stats(self, stats: ClientStats) -> None:
        self.transport.stats = stats

    @property
    def user_id(self) -> str:
        return self.transport.headers["X-Yandex-UID"]

    @user_id.setter
    def user_id(self, user_id: str) -> None:
        self.transport.headers["X-Yandex-UID"] = user_id

    @property
    def change_results(self) -> list[tuple[str, str, str, str]]:
        """(service, orderid, feature, "seen" | "failed") of each user change, in order."""
        return self.changes.results

    def point_at(
        self, launch_url: str | Sequence[str], orders_state_url: str | Sequence[str]
    ) -> None:
        """Where the client sends its requests from now on: one URL of each (a balancer's),
        or the replicas of each (see Replicas). `launch_url` is the whole launch URL,
        `orders_state_url` the base the policy's part URLs are under."""
        self._launch = Replicas(launch_url)
        self._orders_state = Replicas(orders_state_url)

    # --- the protocol ----------------------------------------------------------------------

    async def launch(self, told: Mapping[str, str] | None = None) -> None:
        """Launch: the orders and the policy. `told`: the versions a poll told the client to
        hold, named so that a replica announcing them (mid-rollout) hands them out."""
        body: dict[str, Any] = {
            "supported_services": self.supported_services,
            "known_orders": known_orders(self.orders),
        }
        held = {**self.policy_versions, **(told or {})}
        if held:
            body["policy_versions"] = held
        if self.options.extended_order_info:
            body["supported"] = ["extended_order_info"]
            body["part_parameters"] = {
                part_type: part_parameters(part_type, self.options, self.position)
                for part_type in self.options.part_parameters
            }
        answer = await self._poll(self._launch, "", body)
        if answer is None:
            return
        state = answer["mlutp_orders_state"]
        versions = dict(state.get("policy_versions", {}))
        forget_moved_parts(self.orders, self.policy_versions, versions)
        self.policy_versions = versions
        self.rules = rules_by_service(state["polling_policy"])
        await self._apply_state(state["orders"])
        save_state(self.options.state_file, self.orders, self.policy_versions)

    async def cycle(self) -> None:
        """One poll, then the parts it asks for, then the visible state."""
        if not self.rules:
            await self.launch()
            return
        self._parts_failed = False
        answer = await self._poll_state()
        versions = (answer or {}).get("policy_versions", {})
        if told := told_versions(self.policy_versions, versions, self.rules):
            # the client is told to hold another policy: fetch it at once
            await self.launch(told)
            return
        if answer is not None:
            await self._apply_state(answer["orders"])
            # a part that failed keeps being needed: back to the interval, not a tight loop
            self.poll_again_at_once = self.poll_again_at_once and not self._parts_failed
        elif self.orders:
            # no answer at all: keep everything, show loaders
            for order in self.orders:
                order.update_status = "stale"
            self._publish(self.orders)
        await self.changes.follow(self.orders)
        save_state(self.options.state_file, self.orders, self.policy_versions)

    async def run(self, stop: asyncio.Event) -> None:
        """Cycle at the server's interval (or, waiting, right after each answer) until `stop`
        is set (client.timing). A waiting poll in flight is abandoned when `stop` is set."""
        await self.launch()
        await cycle_until(
            stop,
            cycle=self.cycle,
            poll_now=self._poll_now,
            at_once=lambda: self.poll_again_at_once,
            interval_s=lambda: self.interval_s,
            routes=self._poll_routes,
            waiting=bool(self.options.wait_ms),
        )

    async def _poll(
        self,
        replicas: Replicas,
        path: str,
        body: dict[str, Any],
        extra_timeout_s: float = 0,
        *,
        digest: bool = False,
    ) -> dict[str, Any] | None:
        """A poll (revalidated by its answer_tag; orders/state, `digest`, repeated as a
        digest): its answer, and from it when to poll next."""
        reply = await self.transport.post(
            replicas,
            path,
            body,
            extra_timeout_s=extra_timeout_s,
            revalidate=path,
            digest=digest,
        )
        if reply.status:
            self.stats.poll_latencies.append(reply.elapsed_s)
        self.interval_s, self.poll_again_at_once = next_poll(
            reply, self.options.fallback_interval_s, spread_s=random.random()
        )
        return reply.ok

    async def _poll_state(self) -> dict[str, Any] | None:
        """orders/state with the orders known now. An order the user creates meanwhile is
        polled for at once: the request in flight (a held waiting poll, most likely) is given
        up for one that names it."""
        while True:
            self._poll_now.clear()
            body: dict[str, Any] = {
                "known_orders": known_orders(self.orders),
                "supported_services": self.supported_services,
            }
            if self.policy_versions:
                # the versions it holds: a replica that serves them answers by them
                body["policy_versions"] = self.policy_versions
            if self.options.wait_ms:
                body["wait_ms"] = self.options.wait_ms
            request = await unless_set(
                self._poll(
                    self._orders_state,
                    "/mlutp/v1/orders/state",
                    body,
                    extra_timeout_s=self.options.wait_ms * 1.1 / 1000,
                    digest=True,
                ),
                self._poll_now,
            )
            if not self._poll_now.is_set():
                return request.result()
            # an answer to a request without the new order would drop it as finished

    def order_created(self, service: str, orderid: str, status: str) -> None:
        """The user made an order in this app, which got its id back: it is shown (loading)
        and polled for at once, not found at the next launch or whenever a poll returns."""
        if self._order(service, orderid) is not None:
            return
        order = Order(orderid, service, status)
        self.orders.append(order)
        self._publish([order])
        self._poll_now.set()

    async def change(self, service: str, orderid: str, feature: str, value: Any) -> bool:
        """The user changes the order through its feature service: the order shows the new
        value at once, locked, and is polled with force until a part shows the change.
        False if the feature refused it (the result is in `change_results`)."""
        order = self._order(service, orderid)
        if order is None:
            return False
        return await self.changes.change(order, feature, value)

    def user_changed(self, service: str, orderid: str, version: int) -> None:
        """The user changed the order elsewhere and its feature returned `version`: lock the
        order and poll with force until a part shows it (or the deadline passes)."""
        order = self._order(service, orderid)
        if order is not None:
            self.changes.changed_elsewhere(order, version)

    def view(self) -> list[OrderView]:
        return self.views.of(self.orders)

    # --- internals -------------------------------------------------------------------------

    def _order(self, service: str, orderid: str) -> Order | None:
        return next((o for o in self.orders if o.key == (service, orderid)), None)

    async def _apply_state(self, answered: list[dict[str, Any]]) -> None:
        """The answer's orders (client.answer) shown, their inline parts applied, and the
        parts they ask for fetched."""
        merged = merge_answer(self.orders, answered, self._rule)
        orders, needed = merged.orders, merged.needed
        # the parts that came inline need no request
        arrived: set[PartKey] = {
            (order.service, order.orderid, rule.part_name)
            for order, rule, fields in merged.inline
            if self._apply_part(order, rule, fields)
        }
        # orders left out have finished
        self.orders = orders
        self.views.keep_only(orders)
        # every order at once (one never shown as a placeholder); then each part as it lands:
        # only an order's required parts hold its view
        self._publish(orders, arrived, needed)
        await self._fetch_parts(needed, arrived)

    def _rule(self, service: str, part_name: str) -> Rule | None:
        return next((r for r in self.rules.get(service, ()) if r.part_name == part_name), None)

    async def _fetch_parts(self, needed: dict[OrderKey, list[str]], arrived: set[PartKey]) -> None:
        """Fetch by priority, batching orders per part, a few requests at a time; each answer
        adds the (service, orderid, part) that arrived to `arrived` and is shown at once."""
        requests, backing_off = part_requests(
            needed,
            {o.key: o for o in self.orders},
            self._rule,
            max_orders=self.options.max_orders_per_part_request,
            now=time.monotonic(),
        )
        self._parts_failed |= backing_off
        limit = asyncio.Semaphore(self.options.parallel_requests)

        async def fetch(rule: Rule, batch: list[Order]) -> None:
            async with limit:
                body = {
                    **part_parameters(rule.part_type, self.options, self.position),
                    "orders": [part_order(o, rule.part_name) for o in batch],
                }
                self.stats.part_requests += 1
                reply = await self.transport.post(self._orders_state, rule.url, body)
                answer = reply.ok
                results = {r["orderid"]: r for r in answer["orders"]} if answer else {}
                for order in batch:
                    if self._apply_part(order, rule, results.get(order.orderid)):
                        arrived.add((order.service, order.orderid, rule.part_name))
                shown = {o.key for o in self.orders}  # an expired one is gone
                self._publish([o for o in batch if o.key in shown], arrived, needed)

        await asyncio.gather(*(fetch(rule, batch) for rule, batch in requests))

    def _apply_part(self, order: Order, rule: Rule, result: dict[str, Any] | None) -> bool:
        """True when the part arrived."""
        outcome = apply_part(order, rule, result, self.options, self.rng)
        if outcome is PartOutcome.EXPIRED:
            self.orders = [o for o in self.orders if o is not order]
            # back to the interval, not at once: a kept source answer that missed the order's
            # end lists it again until it is asked anew, and polling at once would spin on
            # news, the part, expired, news
            self._parts_failed = True
        elif outcome is PartOutcome.FAILED:
            self._parts_failed = True
        else:
            version = order.parts[rule.part_name].fields.get("version")
            if isinstance(version, int) and version > order.seen_version:
                order.seen_version = version
                if self.on_version_seen is not None:
                    self.on_version_seen(order.service, order.orderid, version, time.time())
        return outcome is PartOutcome.ARRIVED

    def _publish(
        self,
        orders: list[Order],
        arrived: set[PartKey] | None = None,
        needed: dict[OrderKey, list[str]] | None = None,
    ) -> None:
        """Show the new state of an order only once its required parts asked for in this
        cycle have arrived; until then the previous view stays."""
        self.views.publish(orders, self.rules, arrived, needed)

    async def _poll_routes(self) -> None:
        """The route's own rule (client.route), with the app's own position and time."""
        if not self.options.poll_route:
            return
        for order, rule in list(routes_due(self.orders, self.rules, self.options)):
            reply = await self.transport.post(
                self._orders_state, rule.url, route_request(order, self.position)
            )
            self._apply_part(order, rule, reply.ok)
