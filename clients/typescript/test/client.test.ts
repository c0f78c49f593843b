import { test, after } from "node:test";
import assert from "node:assert/strict";
import type * as http from "node:http";
import { Client, ClosedError, ConfigError, NoNodeError, RejectedError, SnowflakedError } from "../src/index.js";
import { FakeNode, apiError, countOf, deadAddr, idsBody, nodes, serveIds, until, type Handler } from "./fake.js";

/** Every test ends within this, whatever the client does. */
const T = { timeout: 20_000 };

const stops: FakeNode[] = [];
async function fakes(k: number, handler = serveIds): Promise<FakeNode[]> {
  const ns = await nodes(k, handler);
  stops.push(...ns);
  return ns;
}
after(async () => {
  await Promise.all(stops.map((n) => n.stop()));
});

function increasing(ids: bigint[]): boolean {
  return ids.every((id, i) => i === 0 || id > (ids[i - 1] as bigint));
}

test("IDs are bigints, never numbers, beyond 2^53", T, async () => {
  const [a] = await fakes(1);
  const c = new Client({ nodes: [a!.addr] });
  try {
    const id = await c.nextId();
    assert.equal(typeof id, "bigint");
    assert.ok(id > BigInt(Number.MAX_SAFE_INTEGER));
    const ids = await c.nextIds(5);
    assert.equal(ids.length, 5);
    for (const x of ids) assert.equal(typeof x, "bigint");
    assert.ok(increasing(ids));
    const s = await c.nextSegments("orders", 3);
    for (const x of s) assert.equal(typeof x, "bigint");
    assert.deepEqual(a!.seen.map((r) => r.url), ["/ids?count=1", "/ids?count=5", "/segment/orders?count=3"]);
  } finally {
    c.close();
  }
});

test("a caller alone sends its request at once; callers arriving meanwhile share the next", T, async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => (release = r));
  const [a] = await fakes(1, async (req, res) => {
    if (countOf(req.url) === 1 && a!.seen.length === 1) await held; // the first request waits
    res.end(idsBody(countOf(req.url)));
  });
  const c = new Client({ nodes: [a!.addr] });
  try {
    const first = c.nextId();
    assert.ok(await until(() => a!.seen.length === 1), "the lone caller's request went out");
    const rest = Array.from({ length: 9 }, () => c.nextId());
    const two = c.nextIds(2);
    release!();
    const ids = [await first, ...(await Promise.all(rest)), ...(await two)];
    assert.equal(new Set(ids).size, 12);
    assert.deepEqual(a!.seen.map((r) => r.url), ["/ids?count=1", "/ids?count=11"]);
  } finally {
    c.close();
  }
});

test("a batch never asks for more than maxBatch", T, async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => (release = r));
  const [a] = await fakes(1, async (req, res) => {
    if (a!.seen.length === 1) await held;
    res.end(idsBody(countOf(req.url)));
  });
  const c = new Client({ nodes: [a!.addr], maxBatch: 4 });
  try {
    const first = c.nextId();
    assert.ok(await until(() => a!.seen.length === 1));
    const rest = Array.from({ length: 10 }, () => c.nextId());
    release!();
    const ids = [await first, ...(await Promise.all(rest))];
    assert.equal(new Set(ids).size, 11);
    for (const r of a!.seen) assert.ok(countOf(r.url) <= 4, r.url);
    assert.equal(a!.seen.reduce((s, r) => s + countOf(r.url), 0), 11);
    const big = await c.nextIds(10); // one call above maxBatch: several batches, sorted
    assert.equal(big.length, 10);
    assert.ok(increasing(big));
  } finally {
    c.close();
  }
});

test("503 with Retry-After: another node, and that one is left alone for its Retry-After", T, async () => {
  const [a, b] = await fakes(2);
  a!.handler = (_req, res) => apiError(res, 503, "out_of_service", { reason: "clock_rollback" }, { "retry-after": "5" });
  const c = new Client({ nodes: [a!.addr, b!.addr] });
  try {
    for (let i = 0; i < 6; i++) assert.equal(typeof (await c.nextId()), "bigint");
    assert.equal(a!.seen.length, 1, "the node out of service was asked once");
    assert.equal(b!.seen.length, 6);
    // Dense IDs are another service: the node is not down for them.
    await c.nextSegment("t");
    await c.nextSegment("t");
    assert.equal(a!.count("/segment/"), 1);
  } finally {
    c.close();
  }
});

test("503 batch_timeout moves the batch but leaves the node up", T, async () => {
  const [a, b] = await fakes(2);
  a!.handler = (_req, res) => apiError(res, 503, "batch_timeout");
  const c = new Client({ nodes: [a!.addr, b!.addr] });
  try {
    for (let i = 0; i < 4; i++) await c.nextId();
    assert.equal(a!.seen.length, 4, "asked again on every call: never down");
    assert.equal(b!.seen.length, 4);
  } finally {
    c.close();
  }
});

test("a 4xx is rejected with no other node asked; unknown_tag too, but a stale 404 fails over", T, async () => {
  const [a, b] = await fakes(2);
  a!.handler = (req, res) => {
    if (req.url?.startsWith("/segment/nope")) return apiError(res, 404, "unknown_tag");
    if (req.url?.startsWith("/segment/")) return apiError(res, 404, "not_found");
    return apiError(res, 400, "gene_off");
  };
  // A new client per case: its first request goes to the first node, a.
  const fresh = () => new Client({ nodes: [a!.addr, b!.addr] });
  let c = fresh();
  try {
    const e1 = await c.nextGene(7n).then(() => undefined, (e: unknown) => e);
    assert.ok(e1 instanceof RejectedError && e1 instanceof SnowflakedError);
    assert.equal(e1.status, 400);
    assert.equal(e1.code, "gene_off");
    assert.equal(e1.node, a!.addr);
    assert.equal(a!.seen[0]!.url, "/ids?gene=7&count=1");
    c.close();

    c = fresh();
    const e2 = await c.nextSegment("nope").then(() => undefined, (e: unknown) => e);
    assert.ok(e2 instanceof RejectedError, String(e2));
    assert.equal(e2.code, "unknown_tag");
    assert.equal(e2.status, 404);
    assert.equal(b!.seen.length, 0, "no other node asked");
    c.close();

    c = fresh();
    assert.equal(typeof (await c.nextSegment("other")), "bigint"); // a's 404 not_found: b serves it
    assert.equal(a!.count("/segment/other"), 1);
    assert.equal(b!.count("/segment/other"), 1);
  } finally {
    c.close();
  }
});

test("a count above a node's max is asked again in requests of at most max, remembered", T, async () => {
  const [a] = await fakes(1, (req, res) => {
    const n = countOf(req.url);
    if (n > 5) return apiError(res, 400, "invalid_count", { max: 5 });
    res.end(idsBody(n));
  });
  const c = new Client({ nodes: [a!.addr] });
  try {
    const ids = await c.nextIds(12);
    assert.equal(ids.length, 12);
    assert.ok(increasing(ids));
    assert.deepEqual(a!.seen.map((r) => countOf(r.url)), [12, 5, 5, 2]);
    await c.nextIds(7);
    assert.deepEqual(a!.seen.slice(4).map((r) => countOf(r.url)), [5, 2], "the limit is remembered");
    // A count the node refuses without a smaller max stays a rejection.
    a!.handler = (_req, res) => apiError(res, 400, "invalid_count", { max: 5 });
    const e = await c.nextIds(3).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof RejectedError);
    assert.equal(e.max, 5);
  } finally {
    c.close();
  }
});

test("the caller's deadline: rejects with the signal's reason, the node stays up", T, async () => {
  const [a] = await fakes(1);
  const hung: http.ServerResponse[] = [];
  a!.handler = (_req, res) => {
    hung.push(res); // never answered
  };
  const c = new Client({ nodes: [a!.addr], timeoutMs: 5000 });
  try {
    const t0 = Date.now();
    const e = await c.nextId({ signal: AbortSignal.timeout(50) }).then(() => undefined, (x: unknown) => x);
    const took = Date.now() - t0;
    assert.ok(e instanceof DOMException && e.name === "TimeoutError", String(e));
    assert.ok(took < 1000, `took ${took} ms`);
    // An aborted signal before the call: the same, without a request.
    const ac = new AbortController();
    ac.abort(new Error("gone"));
    await assert.rejects(c.nextIds(2, { signal: ac.signal }), /gone/);
    a!.handler = serveIds;
    assert.equal(typeof (await c.nextId()), "bigint", "the node was not marked down");
    assert.equal(a!.seen.length, 2);
  } finally {
    c.close();
    for (const r of hung) r.destroy();
  }
});

test("a queued caller whose signal aborts leaves at once; the others are served", T, async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => (release = r));
  const [a] = await fakes(1, async (req, res) => {
    if (a!.seen.length === 1) await held;
    res.end(idsBody(countOf(req.url)));
  });
  const c = new Client({ nodes: [a!.addr], stallAfterMs: 60_000 });
  try {
    const first = c.nextId();
    assert.ok(await until(() => a!.seen.length === 1));
    const ac = new AbortController();
    const quitter = c.nextId({ signal: ac.signal });
    const stayer = c.nextId();
    ac.abort(new Error("quit"));
    await assert.rejects(quitter, /quit/);
    release!();
    await first;
    assert.equal(typeof (await stayer), "bigint");
    assert.deepEqual(a!.seen.map((r) => r.url), ["/ids?count=1", "/ids?count=1"], "the caller that left is not asked for");
  } finally {
    c.close();
  }
});

test("bad answers fail over: too few, not increasing, garbage, no Content-Length, too long", T, async () => {
  const bad: Array<(res: http.ServerResponse, n: number) => void> = [
    (res, n) => res.end(idsBody(n - 1)),
    (res) => res.end("5\n4\n"),
    (res, n) => res.end("0x10\n".repeat(n)),
    (res, n) => {
      res.write(idsBody(n)); // chunked: no Content-Length
      res.end();
    },
    (res, n) => {
      res.writeHead(200, { "content-length": String(n * 20 + 1) });
      res.end("1".repeat(n * 20 + 1));
    },
  ];
  for (const [i, answer] of bad.entries()) {
    const [a, b] = await fakes(2);
    a!.handler = (req, res) => answer(res, countOf(req.url));
    const c = new Client({ nodes: [a!.addr, b!.addr] });
    try {
      const ids = await c.nextIds(2);
      assert.equal(ids.length, 2, `case ${i}`);
      assert.equal(a!.seen.length, 1, `case ${i}`);
      assert.equal(b!.seen.length, 1, `case ${i}`);
      await c.nextIds(2);
      assert.equal(a!.seen.length, 1, `case ${i}: down for downForMs`);
    } finally {
      c.close();
    }
  }
});

test("no node: a NoNodeError with each node's cause, at most attempts nodes", T, async () => {
  const dead = await Promise.all([deadAddr(), deadAddr()]);
  const [x, y] = await fakes(2, (_req, res) => apiError(res, 500, "internal"));
  const c = new Client({ nodes: [...dead, x!.addr, y!.addr], attempts: 3 });
  try {
    const e = await c.nextId().then(() => undefined, (z: unknown) => z);
    assert.ok(e instanceof NoNodeError, String(e));
    assert.ok(e.causes.length >= 3);
    assert.match(e.message, /ECONNREFUSED/);
    assert.equal(x!.seen.length + y!.seen.length, 1, "three nodes tried, not four");
  } finally {
    c.close();
  }
});

test("tokens: apiToken for IDs and UUIDs, a tag's token for that tag only", T, async () => {
  const [a] = await fakes(1);
  const c = new Client({ nodes: [a!.addr], apiToken: "api-t", tagTokens: { orders: "tag-t" } });
  try {
    await c.nextId();
    const u = await c.nextUuid();
    assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    await c.nextSegment("orders");
    await c.nextSegment("other");
    assert.deepEqual(
      a!.seen.map((s) => [s.url, s.auth]),
      [
        ["/ids?count=1", "Bearer api-t"],
        ["/uuids?count=1", "Bearer api-t"],
        ["/segment/orders?count=1", "Bearer tag-t"],
        ["/segment/other?count=1", undefined],
      ],
    );
  } finally {
    c.close();
  }
});

test("the client refuses bad arguments and options itself", T, async () => {
  const [a] = await fakes(1);
  const c = new Client({ nodes: [a!.addr], maxBatch: 10 });
  try {
    for (const p of [c.nextIds(0), c.nextIds(1.5), c.nextSegment("a/b"), c.nextGene(-1n), c.nextUuids(11)]) {
      const e = await p.then(() => undefined, (x: unknown) => x);
      assert.ok(e instanceof RejectedError, String(e));
      assert.equal(e.status, 0);
    }
    assert.equal(a!.seen.length, 0);
  } finally {
    c.close();
  }
  assert.throws(() => new Client({ nodes: [] }), ConfigError);
  assert.throws(() => new Client({ nodes: ["nohost"] }), ConfigError);
  assert.throws(() => new Client({ nodes: [a!.addr], maxBatch: 0 }), ConfigError);
  assert.throws(() => new Client({ nodes: [a!.addr], apiToken: "a b" }), ConfigError);
});

test("close: calls in flight and later calls reject with ClosedError", T, async () => {
  const [a] = await fakes(1, () => {}); // never answers
  const c = new Client({ nodes: [a!.addr] });
  const p = c.nextId();
  assert.ok(await until(() => a!.seen.length === 1));
  const q = c.nextId(); // queued
  c.close();
  await assert.rejects(p, ClosedError);
  await assert.rejects(q, ClosedError);
  await assert.rejects(c.nextId(), ClosedError);
  await assert.rejects(c.nextSegment("t"), ClosedError);
  c.close(); // twice: nothing
});

test("prefetch: nextId from a buffer filled ahead, unique", T, async () => {
  const [a] = await fakes(1);
  const c = new Client({ nodes: [a!.addr], prefetch: 40 });
  try {
    const ids = new Set<bigint>();
    for (let i = 0; i < 100; i++) ids.add(await c.nextId());
    assert.equal(ids.size, 100);
    for (const r of a!.seen) assert.equal(countOf(r.url), 10, r.url); // chunks of prefetch/4
    assert.ok(a!.seen.length < 40, `${a!.seen.length} requests for 100 IDs`);
  } finally {
    c.close();
  }
});

test("a hung request gives its slot up after stallAfterMs: the callers waiting go to the next node", T, async () => {
  const [a, b] = await fakes(2);
  const hung: http.ServerResponse[] = [];
  a!.handler = (_req, res) => {
    hung.push(res); // never answered
  };
  const c = new Client({ nodes: [a!.addr, b!.addr], stallAfterMs: 20, timeoutMs: 60_000, maxInFlight: 1 });
  try {
    const stuck = c.nextId().then(() => "served", () => "failed");
    assert.ok(await until(() => a!.seen.length === 1));
    const t0 = Date.now();
    const waiting = await Promise.all(Array.from({ length: 5 }, () => c.nextId()));
    assert.equal(new Set(waiting).size, 5);
    assert.ok(Date.now() - t0 < 10_000, "not held for the hung request's timeout");
    assert.deepEqual(b!.seen.map((r) => r.url), ["/ids?count=5"]);
    c.close();
    assert.equal(await stuck, "failed");
  } finally {
    c.close();
    for (const r of hung) r.destroy();
  }
});

test("a tag's ceiling (tag_max): merged callers are split, one caller above it is refused", T, async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => (release = r));
  const [a] = await fakes(1, async (req, res) => {
    const n = countOf(req.url);
    if (a!.seen.length === 1) await held;
    if (n > 3) return apiError(res, 400, "invalid_count", { max: 1000, tag_max: 3 });
    res.end(idsBody(n));
  });
  const c = new Client({ nodes: [a!.addr] });
  try {
    const first = c.nextSegment("small");
    assert.ok(await until(() => a!.seen.length === 1));
    const merged = Array.from({ length: 5 }, () => c.nextSegment("small"));
    release!();
    const ids = [await first, ...(await Promise.all(merged))];
    assert.equal(new Set(ids).size, 6);
    assert.deepEqual(a!.seen.map((r) => countOf(r.url)), [1, 5, 3, 2]);
    const e = await c.nextSegments("small", 5).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof RejectedError, String(e));
    assert.equal(e.status, 0);
    assert.equal(e.tagMax, 3);
    assert.equal(a!.seen.length, 4, "refused without asking");
    assert.deepEqual((await c.nextSegments("small", 3)).length, 3);
  } finally {
    c.close();
  }
});

test("one request in flight per node by default, each to a node with none out", T, async () => {
  let release: (() => void) | undefined;
  const held = new Promise<void>((r) => (release = r));
  const hold: Handler = async (req, res) => {
    await held;
    res.end(idsBody(countOf(req.url)));
  };
  const [a, b] = await fakes(2, hold);
  const c = new Client({ nodes: [a!.addr, b!.addr], stallAfterMs: 60_000 });
  try {
    const calls = [c.nextId()];
    assert.ok(await until(() => a!.seen.length === 1));
    calls.push(c.nextId());
    assert.ok(await until(() => b!.seen.length === 1), "the second caller goes to the idle node");
    for (let i = 0; i < 6; i++) calls.push(c.nextId());
    release!();
    assert.equal(new Set(await Promise.all(calls)).size, 8);
    assert.deepEqual([...a!.seen, ...b!.seen].map((r) => countOf(r.url)).sort(), [1, 1, 6]);
  } finally {
    c.close();
  }
});

test("UUIDs: an answer that is not increasing version 7 UUIDs fails over", T, async () => {
  const [a, b] = await fakes(2);
  a!.handler = (_req, res) => {
    res.end("01900000-0000-4000-8000-000000000001\n"); // version 4
  };
  const c = new Client({ nodes: [a!.addr, b!.addr] });
  try {
    const us = await c.nextUuids(3);
    assert.equal(us.length, 3);
    assert.ok(us[0]! < us[1]! && us[1]! < us[2]!);
    assert.equal(a!.seen.length, 1);
    assert.equal(b!.seen.length, 1);
  } finally {
    c.close();
  }
});
