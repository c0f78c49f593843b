import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client, NoNodeError } from "../src/index.js";
import { FakeNode, apiError, deadAddr, json, nodes, serveIds, until } from "./fake.js";

/** Every test ends within this, whatever the client does. */
const T = { timeout: 20_000 };

const stops: FakeNode[] = [];
after(async () => {
  await Promise.all(stops.map((n) => n.stop()));
});

test("bootstrap: the nodes from a seed's /cluster/nodes; the last list kept while none answers", T, async () => {
  const [seed, a, b] = await nodes(3);
  stops.push(seed!, a!, b!);
  let list = [a!.addr, b!.addr];
  let answering = true;
  const lister = (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => {
    if (req.url !== "/cluster/nodes") return serveIds(req, res, seed!);
    if (!answering) return apiError(res, 503, "out_of_service", {}, { "retry-after": "1" });
    json(res, 200, { nodes: list.map((addr, i) => ({ worker_id: i, addr })) });
  };
  seed!.handler = lister;
  a!.handler = lister;
  b!.handler = lister;
  const c = await Client.bootstrap({ bootstrap: [await deadAddr(), seed!.addr], bootstrapIntervalMs: 20 });
  try {
    assert.deepEqual(c.nodes(), [a!.addr, b!.addr]);
    await c.nextIds(3);
    await c.nextIds(3);
    assert.equal(seed!.count("/ids"), 0, "the seed is not in the list");
    assert.equal(a!.count("/ids"), 1, "round-robin over the list");

    answering = false;
    const asked = () => seed!.count("/cluster/nodes") + a!.count("/cluster/nodes") + b!.count("/cluster/nodes");
    const before = asked();
    assert.ok(await until(() => asked() >= before + 6), "polls go on");
    assert.deepEqual(c.nodes(), [a!.addr, b!.addr], "the last list stays");

    list = [b!.addr];
    answering = true;
    assert.ok(await until(() => c.nodes().length === 1), "a new list is taken");
    assert.deepEqual(c.nodes(), [b!.addr]);
    assert.ok(await until(() => a!.connections() === 0), "the idle connection to the node that left is closed");
  } finally {
    c.close();
  }
});

test("bootstrap: no seed answering at the start is a NoNodeError", T, async () => {
  const [bad] = await nodes(1, (_req, res) => json(res, 200, { nodes: [] }));
  stops.push(bad!);
  const e = await Client.bootstrap({ bootstrap: [await deadAddr(), bad!.addr] }).then(() => undefined, (x: unknown) => x);
  assert.ok(e instanceof NoNodeError, String(e));
  assert.equal(e.causes.length, 2);
  assert.match(e.message, /no node in service/);
});

test("bootstrap: the poll's timer never holds the process", T, async () => {
  const [seed] = await nodes(1, (req, res, n) =>
    req.url === "/cluster/nodes" ? json(res, 200, { nodes: [{ worker_id: 1, addr: req.headers.host }] }) : serveIds(req, res, n),
  );
  stops.push(seed!);
  const index = fileURLToPath(new URL("../src/index.js", import.meta.url));
  const script = `import { Client } from ${JSON.stringify(index)};
    const c = await Client.bootstrap({ bootstrap: [${JSON.stringify(seed!.addr)}], bootstrapIntervalMs: 50 });
    console.log(String(await c.nextId()));`; // never closed
  // The fake's own event loop must keep running: spawn asynchronously.
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => {
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      resolve(null);
    }, 5000);
    child.on("exit", (c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
  assert.equal(code, 0, "the process exited by itself");
  assert.match(out, /^\d+\n$/);
});
