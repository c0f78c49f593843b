// Adversarial cases: close() with a request out on a reused connection, a
// wall clock stepped back while a request hangs.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client, ClosedError, NoNodeError } from "../src/index.js";
import { FakeNode, nodes, serveIds, until } from "./fake.js";

const T = { timeout: 20_000 };

const stops: FakeNode[] = [];
async function fakes(k: number): Promise<FakeNode[]> {
  const ns = await nodes(k);
  stops.push(...ns);
  return ns;
}
after(async () => {
  await Promise.all(stops.map((n) => n.stop()));
});

/** What p settled with within ms (setTimeout: the monotonic clock), or "pending". */
async function within<V>(p: Promise<V>, ms: number): Promise<{ value?: V; error?: unknown } | "pending"> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"pending">((r) => (timer = setTimeout(() => r("pending"), ms)));
  try {
    return await Promise.race([p.then((value) => ({ value }), (error: unknown) => ({ error })), late]);
  } finally {
    clearTimeout(timer);
  }
}

for (const kind of ["nextGene", "nextId"] as const) {
  test(`close() with a ${kind} out on a reused connection: settles, nothing is sent again, no connection stays`, T, async () => {
    const [a] = await fakes(1);
    const c = new Client({ nodes: [a!.addr], timeoutMs: 60_000 });
    try {
      await c.nextId(); // a keep-alive connection, idle now
      a!.handler = () => {}; // the node never answers again
      const p = kind === "nextGene" ? c.nextGene(5) : c.nextId();
      assert.ok(await until(() => a!.seen.length === 2), "the request went out");
      c.close();
      const r = await within(p, 2000);
      assert.notEqual(r, "pending", "the call settled after close()");
      assert.ok(r !== "pending" && r.error instanceof ClosedError, `ClosedError, got ${JSON.stringify(r)}`);
      await new Promise((res) => setTimeout(res, 100)); // a request sent again would be seen by now
      assert.equal(a!.seen.length, 2, `no request after close(): ${a!.seen.map((s) => s.url).join(", ")}`);
      assert.ok(await until(() => a!.connections() === 0, 2000), `connections left open: ${a!.connections()}`);
    } finally {
      c.close();
    }
  });
}

test("a wall clock stepped back an hour does not stretch a request's timeout", T, async () => {
  const [a] = await fakes(1);
  a!.handler = () => {}; // accepts, never answers
  const c = new Client({ nodes: [a!.addr], timeoutMs: 200, attempts: 1 });
  const realNow = Date.now;
  try {
    const p = c.nextId();
    assert.ok(await until(() => a!.seen.length === 1));
    Date.now = () => realNow() - 3_600_000; // NTP steps the clock back
    const r = await within(p, 3000);
    assert.notEqual(r, "pending", "the request timed out within 3 s");
    assert.ok(r !== "pending" && r.error instanceof NoNodeError, `NoNodeError, got ${String(r !== "pending" && r.error)}`);
  } finally {
    Date.now = realNow;
    c.close();
  }
});

test("a tag beyond ASCII goes as UTF-8, percent-encoded; it takes no node down for the other tags", T, async () => {
  const [a, b] = await fakes(2);
  const c = new Client({ nodes: [a!.addr, b!.addr] });
  try {
    // "订单" cannot go raw in a node:http path; "cafÃ©" in latin1 bytes is "café" in UTF-8: another tag.
    for (const tag of ["订单", "cafÃ©", "café"]) {
      const [na, nb] = [a!.seen.length, b!.seen.length];
      const id = await c.nextSegment(tag);
      assert.equal(typeof id, "bigint");
      assert.equal(a!.seen.length + b!.seen.length, na + nb + 1, "one request");
      const url = (a!.seen.length > na ? a! : b!).seen.slice(-1)[0]!.url;
      assert.equal(decodeURIComponent(new URL(url, "http://x").pathname), `/segment/${tag}`);
    }
    assert.equal(typeof (await c.nextSegment("orders")), "bigint");
  } finally {
    c.close();
  }
});
