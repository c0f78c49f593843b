import { test, after } from "node:test";
import assert from "node:assert/strict";
import type * as http from "node:http";
import { Client, NoNodeError, RejectedError } from "../src/index.js";
import { FakeNode, apiError, countOf, json, nodes, type Handler } from "./fake.js";

const T = { timeout: 20_000 };

const stops: FakeNode[] = [];
async function fakes(k: number, handler: Handler): Promise<FakeNode[]> {
  const ns = await nodes(k, handler);
  stops.push(...ns);
  return ns;
}
after(async () => {
  await Promise.all(stops.map((n) => n.stop()));
});

const BOUNDS = {
  from: "2026-01-01T00:00:00.000Z",
  to: "2026-01-02T00:00:00.000Z",
  from_ms: 1767225600000,
  to_ms: 1767312000000,
  min_id: "265945513574400000",
  max_id: "266307891363839999",
  min_uuid: "019b7662-4800-7000-8000-000000000000",
  max_uuid: "019b7b88-a3ff-7fff-bfff-ffffffffffff",
};

function text(res: http.ServerResponse, body: string): void {
  res.writeHead(200, { "content-type": "text/plain", "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
}

function query(url: string): Record<string, string> {
  return Object.fromEntries(new URL(url, "http://x").searchParams);
}

async function client(ns: FakeNode[], extra: Record<string, unknown> = {}): Promise<Client> {
  const c = new Client({ nodes: ns.map((n) => n.addr), ...extra });
  after(() => c.close());
  return c;
}

test("bounds: GET /bounds in ms, a typed answer", T, async () => {
  const [a] = await fakes(1, (_req, res) => json(res, 200, BOUNDS));
  const c = await client([a!]);
  const from = new Date("2026-01-01T00:00:00Z");
  const b = await c.bounds(from, new Date(from.getTime() + 86_400_000));
  assert.equal(b.minId, 265945513574400000n);
  assert.equal(b.maxId, 266307891363839999n);
  assert.equal(b.from.getTime(), from.getTime());
  assert.equal(b.to.toISOString(), "2026-01-02T00:00:00.000Z");
  assert.equal(b.fromMs, 1767225600000);
  assert.equal(b.toMs, 1767312000000);
  assert.equal(b.minUuid, BOUNDS.min_uuid);
  assert.equal(b.maxUuid, BOUNDS.max_uuid);
  assert.equal(a!.seen[0]!.url, "/bounds?from=1767225600000&to=1767312000000");
  assert.equal(a!.seen[0]!.auth, undefined);
  await c.bounds(5, 6);
  assert.deepEqual(query(a!.seen[1]!.url), { from: "5", to: "6" });
});

test("bounds: no UUIDs when the layout has none", T, async () => {
  const { min_uuid: _a, max_uuid: _b, ...doc } = BOUNDS;
  const [a] = await fakes(1, (_req, res) => json(res, 200, doc));
  const b = await (await client([a!])).bounds(1, 2);
  assert.equal(b.minUuid, undefined);
  assert.equal(b.maxUuid, undefined);
});

test("bounds: invalid_range is rejected, not retried", T, async () => {
  const ns = await fakes(2, (_req, res) => apiError(res, 400, "invalid_range"));
  const c = await client(ns);
  await assert.rejects(c.bounds(10, 5), (e: unknown) => e instanceof RejectedError && e.status === 400 && e.code === "invalid_range");
  assert.equal(ns[0]!.seen.length + ns[1]!.seen.length, 1);
  await assert.rejects(c.bounds(new Date(NaN), 5), (e: unknown) => e instanceof RejectedError && e.status === 0 && e.code === "invalid_range");
  await assert.rejects(c.bounds(1.5, 5), (e: unknown) => e instanceof RejectedError && e.status === 0 && e.code === "invalid_range");
  assert.equal(ns[0]!.seen.length + ns[1]!.seen.length, 1);
});

test("bounds: a failing node or a bad answer fails over", T, async () => {
  for (const bad of ["[]", "{", JSON.stringify({ from_ms: 1 }), JSON.stringify({ ...BOUNDS, min_id: 5 }), JSON.stringify({ ...BOUNDS, max_uuid: "x" }), "503"]) {
    const [a] = await fakes(1, (_req, res) => (bad === "503" ? apiError(res, 503, "out_of_service") : text(res, bad)));
    const [b] = await fakes(1, (_req, res) => json(res, 200, BOUNDS));
    const c = await client([a!, b!]);
    assert.equal((await c.bounds(1, 2)).maxId, 266307891363839999n, bad);
  }
  const [x] = await fakes(1, (_req, res) => text(res, "nope"));
  await assert.rejects((await client([x!])).bounds(1, 2), NoNodeError);
});

test("nextSegmentText: the lines as strings, with the tag's token", T, async () => {
  const lines = ["ORD-20261207-000123", "ORD-20261207-000124", "ORD-20261207-000125"];
  const [a] = await fakes(1, (req, res) => text(res, lines.slice(0, countOf(req.url)).join("\n") + "\n"));
  const c = await client([a!], { tagTokens: { orders: "tok-orders" } });
  assert.deepEqual(await c.nextSegmentText("orders", 3), lines);
  assert.deepEqual(await c.nextSegmentText("orders"), lines.slice(0, 1));
  assert.equal(a!.seen[0]!.url, "/segment/orders?count=3");
  assert.equal(a!.seen[0]!.auth, "Bearer tok-orders");
});

test("nextSegmentText: format", T, async () => {
  const [a] = await fakes(1, (_req, res) => text(res, "00000000001\n00000000002\n"));
  const c = await client([a!]);
  assert.deepEqual(await c.nextSegmentText("plain", 2, { format: "base62" }), ["00000000001", "00000000002"]);
  assert.deepEqual(query(a!.seen[0]!.url), { format: "base62", count: "2" });
  await c.nextSegmentText("plain", 2, { format: "text" });
  assert.deepEqual(query(a!.seen[1]!.url), { count: "2" });
  const refused = (code: string) => (e: unknown) => e instanceof RejectedError && e.status === 0 && e.code === code;
  await assert.rejects(c.nextSegmentText("plain", 2, { format: "base64" as "base62" }), refused("invalid_format"));
  await assert.rejects(c.nextSegmentText("plain", 0), refused("invalid_count"));
  await assert.rejects(c.nextSegmentText("a/b", 1), refused("invalid_tag"));
  assert.equal(a!.seen.length, 2);
});

test("nextSegmentText: a reset tag's invalid_format is rejected", T, async () => {
  const [a] = await fakes(1, (_req, res) => apiError(res, 400, "invalid_format"));
  await assert.rejects((await client([a!])).nextSegmentText("orders", 1, { format: "base36" }), (e: unknown) => e instanceof RejectedError && e.status === 400 && e.code === "invalid_format");
});

test("nextSegmentText: bad answers fail over", T, async () => {
  for (const bad of ["a\n", "a\na\n", "a b\nc\n", "\n\n", "x".repeat(200) + "\ny\n", "a\nb\nc\n"]) {
    const [a] = await fakes(1, (_req, res) => text(res, bad));
    const [b] = await fakes(1, (_req, res) => text(res, "X-1\nX-2\n"));
    const c = await client([a!, b!]);
    assert.deepEqual(await c.nextSegmentText("t", 2), ["X-1", "X-2"], JSON.stringify(bad));
    assert.equal(a!.seen.length, 1);
  }
});

test("nextSegmentText: clamped parts keep the node's order", T, async () => {
  let k = 100;
  const [a] = await fakes(1, (req, res) => {
    const n = countOf(req.url);
    if (n > 2) return apiError(res, 400, "invalid_count", { max: 2 });
    text(res, Array.from({ length: n }, () => `Z${k--}`).join("\n") + "\n");
  });
  assert.deepEqual(await (await client([a!])).nextSegmentText("t", 5), ["Z100", "Z99", "Z98", "Z97", "Z96"]);
});

test("nextSegment(s) on a tag whose IDs are not numbers: rejected, naming the text", T, async () => {
  let body = "ORD-20261207-000123\n";
  const ns = await fakes(2, (_req, res) => text(res, body));
  const c = await client(ns);
  await assert.rejects(c.nextSegment("orders"), (e: unknown) => {
    assert.ok(e instanceof RejectedError, String(e));
    assert.equal(e.status, 200);
    assert.equal(e.code, "");
    assert.match(e.message, /ORD-20261207-000123/);
    assert.match(e.message, /nextSegmentText/);
    return true;
  });
  assert.equal(ns[0]!.seen.length + ns[1]!.seen.length, 1); // no failover: every node answers so
  body = "20261207000000000000123\n"; // beyond 63 bits: no ID either
  await assert.rejects(c.nextSegments("orders", 1), RejectedError);
  body = "20261207000123\n"; // a reset tag's number that fits is an ID
  assert.equal(await c.nextSegment("orders2"), 20261207000123n);
});

test("nextSegment on garbage still fails over", T, async () => {
  const [a] = await fakes(1, (_req, res) => text(res, "x\ny\n"));
  const [b] = await fakes(1, (req, res) => text(res, "7\n"));
  const c = await client([a!, b!]);
  assert.equal(await c.nextSegment("t"), 7n);
  assert.equal(b!.seen.length, 1);
});
