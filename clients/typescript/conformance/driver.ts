/**
 * The conformance driver: turns the JSON lines of tests/conformance/README.md
 * (stdin) into calls of the client's public API and writes the answers
 * (stdout). It decides nothing and asserts nothing.
 *
 * @module
 */
import * as http from "node:http";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import {
  Client,
  ClosedError,
  EncodingError,
  Layout,
  NoNodeError,
  RejectedError,
  decodeId,
  decodeUuid,
  encodeId,
  encodeUuid,
  type BootstrapOptions,
  type ClientOptions,
  type IdEncoding,
} from "../src/index.js";

type Req = Record<string, unknown> & { seq?: number; op?: string };

const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

let client: Client | undefined;

function write(o: unknown): void {
  process.stdout.write(JSON.stringify(o) + "\n");
}

/** An error of the client as the protocol's error object. */
export function errorObject(e: unknown): Record<string, unknown> {
  if (e instanceof EncodingError) return { type: "encoding", status: 0, code: e.kind, max: null, message: e.message };
  if (e instanceof RejectedError) {
    return { type: "rejected", status: e.status, code: e.code, max: e.max ?? null, message: e.message };
  }
  if (e instanceof NoNodeError) return { type: "no_node", message: e.message };
  if (e instanceof ClosedError) return { type: "closed", message: e.message };
  if (e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")) return { type: "deadline", message: e.message };
  return { type: "other", message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
}

class DriverError extends Error {}

function opts(r: Req): { signal?: AbortSignal } {
  const d = r.deadline_ms;
  if (d === undefined || d === null) return {};
  if (typeof d !== "number" || !Number.isInteger(d) || d < 0) throw new DriverError(`deadline_ms ${JSON.stringify(d)}`);
  return { signal: AbortSignal.timeout(d) };
}

function held(): Client {
  if (!client) throw new DriverError("no client open");
  return client;
}

function num(r: Req, k: string): number {
  const v = r[k];
  if (typeof v !== "number" || !Number.isInteger(v)) throw new DriverError(`${k}: want an integer`);
  return v;
}

async function open(cfg: Record<string, unknown>): Promise<void> {
  const common: Omit<ClientOptions, "nodes"> = {};
  if (cfg.api_token !== undefined) common.apiToken = cfg.api_token as string;
  if (cfg.tag_tokens !== undefined) common.tagTokens = cfg.tag_tokens as Record<string, string>;
  if (cfg.tls !== undefined) common.tls = cfg.tls as { ca?: string; cert?: string; key?: string };
  if (cfg.timeout_ms !== undefined) common.timeoutMs = cfg.timeout_ms as number;
  if (cfg.max_batch !== undefined) common.maxBatch = cfg.max_batch as number;
  if (cfg.prefetch !== undefined) common.prefetch = cfg.prefetch as number;
  if (process.env.SNOWFLAKED_DRIVER_LOG) common.log = (m) => process.stderr.write(m + "\n");
  if (cfg.bootstrap !== undefined) {
    const o: BootstrapOptions = { ...common, bootstrap: cfg.bootstrap as string[] };
    if (cfg.bootstrap_interval_ms !== undefined) o.bootstrapIntervalMs = cfg.bootstrap_interval_ms as number;
    client = await Client.bootstrap(o);
  } else {
    client = new Client({ ...common, nodes: cfg.nodes as string[] });
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number;
}

async function bench(r: Req): Promise<Record<string, unknown>> {
  const mode = r.mode;
  const threads = num(r, "threads");
  const durationMs = num(r, "duration_ms");
  const warmupMs = typeof r.warmup_ms === "number" ? r.warmup_ms : 0;
  let call: () => Promise<unknown>;
  let agent: http.Agent | undefined;
  if (mode === "client") {
    const c = held();
    call = () => c.nextId();
  } else if (mode === "plain") {
    const node = String(r.node);
    const i = node.lastIndexOf(":");
    const host = node.slice(0, i).replace(/^\[|\]$/g, "");
    const port = Number(node.slice(i + 1));
    const ag = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    agent = ag;
    call = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.request({ agent: ag, host, port, path: "/id", method: "GET" }, (res) => {
          res.on("data", () => {});
          res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end();
      });
  } else {
    throw new DriverError(`bench mode ${JSON.stringify(mode)}`);
  }
  const start = performance.now();
  const measureFrom = start + warmupMs;
  const end = measureFrom + durationMs;
  const lat: number[] = [];
  let failed = 0;
  const task = async () => {
    for (;;) {
      const t0 = performance.now();
      if (t0 >= end) return;
      try {
        await call();
      } catch {
        failed++;
        continue;
      }
      if (t0 >= measureFrom) lat.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: threads }, task));
  const seconds = (performance.now() - measureFrom) / 1000;
  agent?.destroy();
  lat.sort((a, b) => a - b);
  if (failed > 0) process.stderr.write(`bench: ${failed} calls failed\n`);
  return { calls: lat.length, seconds, p50_us: Math.round(percentile(lat, 50) * 1000), p99_us: Math.round(percentile(lat, 99) * 1000) };
}

async function load(r: Req): Promise<Record<string, unknown>> {
  const c = held();
  const threads = num(r, "threads");
  const calls = num(r, "calls");
  const mark = typeof r.mark === "number" ? r.mark : 0;
  const kind = r.call;
  const n = kind === "next_ids" ? num(r, "n") : 1;
  if (kind !== "next_id" && kind !== "next_ids") throw new DriverError(`load call ${JSON.stringify(kind)}`);
  let finished = 0;
  let marked = false;
  const failures: Record<string, unknown>[] = [];
  const out: string[][] = [];
  const one = (): Promise<bigint[]> => (kind === "next_id" ? c.nextId(opts(r)).then((id) => [id]) : c.nextIds(n, opts(r)));
  const task = async (t: number) => {
    const mine: string[] = (out[t] = []);
    for (let i = 0; i < calls; i++) {
      try {
        for (const id of await one()) mine.push(id.toString());
      } catch (e) {
        failures.push(errorObject(e));
      }
      finished++;
      if (!marked && finished >= mark) {
        marked = true;
        write({ seq: r.seq, event: "mark" });
      }
    }
  };
  if (mark <= 0) {
    marked = true;
    write({ seq: r.seq, event: "mark" });
  }
  await Promise.all(Array.from({ length: threads }, (_, t) => task(t)));
  return { threads: out, failures, calls: finished };
}

async function serve(r: Req): Promise<Record<string, unknown>> {
  switch (r.op) {
    case "describe":
      return {
        client: "typescript",
        version: VERSION,
        routes: ["/ids", "/segment/{tag}", "/uuids", "/cluster/nodes", "/bounds"],
        codes: ["batch_timeout", "unknown_tag", "invalid_count", "invalid_gene", "invalid_tag", "invalid_format", "invalid_range"],
      };
    case "open":
      client?.close();
      client = undefined;
      await open((r.config ?? {}) as Record<string, unknown>);
      return {};
    case "close":
      client?.close();
      client = undefined;
      return {};
    case "next_id":
      return { ids: [(await held().nextId(opts(r))).toString()] };
    case "next_ids":
      return { ids: (await held().nextIds(num(r, "n"), opts(r))).map(String) };
    case "next_gene":
      return { ids: [(await held().nextGene(BigInt(String(r.key)), opts(r))).toString()] };
    case "next_segment": {
      const tag = String(r.tag);
      if (r.n === undefined || r.n === null) return { ids: [(await held().nextSegment(tag, opts(r))).toString()] };
      return { ids: (await held().nextSegments(tag, num(r, "n"), opts(r))).map(String) };
    }
    case "next_uuid":
      return { uuid: await held().nextUuid(opts(r)) };
    case "decode": {
      const l = (r.layout ?? {}) as Record<string, number>;
      const layout = new Layout({
        timeBits: l.time_bits,
        workerBits: l.worker_bits,
        sequenceBits: l.sequence_bits,
        geneBits: l.gene_bits,
        epoch: l.epoch_ms,
        unit: l.unit_ms,
      });
      const d = layout.decode(BigInt(String(r.id)));
      const decoded: Record<string, number> = { timestamp_ms: d.timestampMs, worker_id: d.workerId, sequence: d.sequence };
      if (d.gene !== undefined) decoded.gene = d.gene;
      return { decoded };
    }
    case "encode": {
      const e = String(r.encoding) as IdEncoding;
      if (r.kind === "uuid") return { text: encodeUuid(String(r.value), e) };
      return { text: encodeId(BigInt(String(r.value)), e, r.bits === undefined ? 63 : num(r, "bits")) };
    }
    case "decode_string": {
      const e = String(r.encoding) as IdEncoding;
      if (r.kind === "uuid") return { value: decodeUuid(String(r.text), e) };
      return { value: decodeId(String(r.text), e, r.bits === undefined ? 63 : num(r, "bits")).toString() };
    }
    case "bounds": {
      const b = await held().bounds(new Date(num(r, "from_ms")), new Date(num(r, "to_ms")), opts(r));
      const out: Record<string, unknown> = { from_ms: b.from.getTime(), to_ms: b.to.getTime(), min_id: b.minId.toString(), max_id: b.maxId.toString() };
      if (b.minUuid !== undefined) {
        out.min_uuid = b.minUuid;
        out.max_uuid = b.maxUuid;
      }
      return { bounds: out };
    }
    case "next_segment_text": {
      const o: { signal?: AbortSignal; format?: "text" | IdEncoding } = opts(r);
      if (r.format !== undefined && r.format !== null) o.format = String(r.format) as IdEncoding;
      return { texts: await held().nextSegmentText(String(r.tag), r.n === undefined || r.n === null ? 1 : num(r, "n"), o) };
    }
    case "nodes":
      return { nodes: held().nodes() };
    case "load":
      return load(r);
    case "bench":
      return bench(r);
    default:
      throw new DriverError(`unknown op ${JSON.stringify(r.op)}`);
  }
}

async function main(): Promise<void> {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim() === "") continue;
    let r: Req;
    try {
      r = JSON.parse(line) as Req;
      if (r === null || typeof r !== "object") throw new Error("not an object");
    } catch (e) {
      write({ seq: 0, error: { type: "driver", message: `cannot parse ${JSON.stringify(line.slice(0, 200))}: ${(e as Error).message}` } });
      continue;
    }
    const seq = typeof r.seq === "number" ? r.seq : 0;
    try {
      write({ seq, ...(await serve(r)) });
    } catch (e) {
      write({ seq, error: e instanceof DriverError ? { type: "driver", message: e.message } : errorObject(e) });
    }
  }
  client?.close();
  client = undefined;
}

await main();
