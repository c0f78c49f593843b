import { createHash, randomBytes } from "node:crypto";
import { ClosedError, ConfigError, NoNodeError, RejectedError } from "./errors.js";
import { ENCODINGS, type IdEncoding } from "./encoding.js";
import { AbortedRequest, Transport, TransportError, monoNow, splitHostPort, type Answer, type TlsOptions } from "./transport.js";

/** Defaults of {@link ClientOptions}. */
export const defaults = {
  /** The most IDs one request asks for. */
  maxBatch: 1000,
  /** Per request to one node, ms. */
  timeoutMs: 2000,
  /** Nodes one batch tries before it fails. */
  attempts: 3,
  /** Requests out at once per kind of ID (snowflake IDs; each tag), per node the client talks to. */
  maxInFlightPerNode: 1,
  /** A request out longer than this while calls wait gives its slot up, ms. */
  stallAfterMs: 50,
  /** How long a node that failed without a Retry-After gets no traffic, ms. */
  downForMs: 1000,
  /** Prefetched IDs older than this are dropped, ms. */
  prefetchMaxAgeMs: 1000,
  /** Nodes a client talks to. */
  subset: 6,
  /** The bootstrap discovery's poll interval, ms (±20% at random). */
  bootstrapIntervalMs: 10_000,
} as const;

/** The largest `n` of {@link Client.nextIds} and {@link Client.nextSegments}. */
export const MAX_COUNT = 1 << 20;
/** The longest segment tag, in bytes, as the nodes accept. */
export const MAX_TAG_LEN = 128;

/** The options of a {@link Client}; each absent field is its default ({@link defaults}). */
export interface ClientOptions {
  /** The nodes, `host:port` each (a static list). */
  nodes: readonly string[];
  /** Bearer token sent with every request for snowflake IDs and UUIDs (nodes run with `--api-tokens-file`). */
  apiToken?: string;
  /** Bearer token per segment tag (tags created with `--require-token`); other tags go without one. */
  tagTokens?: Readonly<Record<string, string>>;
  /** HTTPS to every node, verified against `ca`, presenting `cert`/`key` when given. Absent: plain HTTP. */
  tls?: TlsOptions;
  /** Bound of one request to one node, ms (default 2000). */
  timeoutMs?: number;
  /** The most IDs one request asks for, 1..1,000,000 (default 1000). */
  maxBatch?: number;
  /** Nodes one batch tries before it fails, 1..100 (default 3). */
  attempts?: number;
  /**
   * Requests out at once per kind of ID, 1..1024 (default: one per node the
   * client talks to, `subset()`'s length). Fewer make bigger batches; a
   * batch goes to a node with no request of the client's out when there is
   * one.
   */
  maxInFlight?: number;
  /** While calls wait, a request out longer than this gives its in-flight slot up, ms (default 50). */
  stallAfterMs?: number;
  /** How long a node that failed without a Retry-After gets no traffic, ms (default 1000). */
  downForMs?: number;
  /** Snowflake IDs kept fetched ahead for {@link Client.nextId}, 0..10,000,000 (default 0: off). */
  prefetch?: number;
  /** Prefetched IDs older than this are dropped, ms (default 1000). */
  prefetchMaxAgeMs?: number;
  /** How many nodes of the list the client talks to, by rendezvous hashing, 1..4096 (default 6). */
  subset?: number;
  /** Receives a line per failover, per failed prefetch, per limit learnt and per failed bootstrap poll. Absent: nothing is logged. */
  log?: (message: string) => void;
}

/** The options of {@link Client.bootstrap}: those of a client, with seeds instead of nodes. */
export interface BootstrapOptions extends Omit<ClientOptions, "nodes"> {
  /** Seeds, `host:port` each: the nodes come from `GET /cluster/nodes` of the first that answers. */
  bootstrap: readonly string[];
  /** How often the node list is polled, ms, ±20% at random (default 10000). */
  bootstrapIntervalMs?: number;
}

/** The options of one call. */
export interface CallOptions {
  /** Ends the call: it rejects with `signal.reason` (e.g. `AbortSignal.timeout(ms)` for a deadline). */
  signal?: AbortSignal;
}

const SVC_IDS = 0;
const SVC_SEGMENTS = 1;
const MAX_ID_LINE = 20;
const MAX_UUID_LINE = 37;
/** One line of a segment answer: a dense ID, or a reset tag's ID as text (at most 128 characters), and a newline. */
const MAX_TEXT_LINE = 129;
const MAX_BOUNDS_BODY = 4096;
const MAX_RELEARN = 4;
const BOOTSTRAP_MAX_ASK = 16;
const BOOTSTRAP_MAX_BODY = 1 << 20;
const MAX_ID = 0x7fffffffffffffffn;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** One kind of request: snowflake IDs, the dense IDs of a tag, IDs with a gene, UUIDs. */
interface Endpoint {
  svc: number;
  /** The path up to and including "count=". */
  path: string;
  what: string;
  headers: Record<string, string> | undefined;
  uuids: boolean;
  unordered: boolean;
  /** A tag's ceiling once a node named it (0 before). */
  tag?: { max: number };
  /** The answer's lines as strings, in the node's order (nextSegmentText). */
  text?: boolean;
  /** A `/bounds` answer: `path` is the whole path, no count. */
  bounds?: boolean;
}

/** What {@link Client.bounds} gives: the IDs (and UUIDs) a node of the cluster can have issued in `[from, to)`, the range truncated to the start of its ticks. */
export interface Bounds {
  /** The start of the first tick in the range. */
  from: Date;
  /** The start of the first tick after it. */
  to: Date;
  /** {@link Bounds.from} in Unix milliseconds. */
  fromMs: number;
  /** {@link Bounds.to} in Unix milliseconds. */
  toMs: number;
  /** The smallest ID of a tick in the range: `minId <= id && id <= maxId` selects the IDs issued in it. */
  minId: bigint;
  /** The largest ID of a tick in the range. */
  maxId: bigint;
  /** The smallest UUIDv7 of the range, canonical text; undefined when the layout has no UUIDs. */
  minUuid?: string;
  /** The largest UUIDv7 of the range. */
  maxUuid?: string;
}

/** The options of {@link Client.nextSegmentText}. */
export interface SegmentTextOptions extends CallOptions {
  /** `"text"` (the default: as the node writes them) or an encoding of each ID. */
  format?: "text" | IdEncoding;
}

interface NodeState {
  addr: string;
  /** Requests of the client out to the node now. */
  busy: number;
  downUntil: [number, number];
  lastErr: [Error | undefined, Error | undefined];
  inSubset: boolean;
}

/** A caller waiting for n IDs (or UUIDs). */
interface Waiter {
  n: number;
  resolve: (v: never[]) => void;
  reject: (e: unknown) => void;
  gone: boolean;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  flight: Flight | undefined;
}

/** A request out, with its callers. */
interface Flight {
  waiters: Waiter[];
  abort: (() => void) | undefined;
  start: number;
  counted: boolean;
}

/** Thrown inside when every caller of a request left: nobody sees it. */
class GaveUp extends Error {}

function wanted(f: Flight): boolean {
  for (const w of f.waiters) if (!w.gone) return true;
  return false;
}

function settle(w: Waiter, v: unknown[] | undefined, err?: unknown): void {
  if (w.gone) return;
  w.gone = true;
  if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
  if (err !== undefined) w.reject(err);
  else w.resolve(v as never[]);
}

function newWaiter(n: number, signal: AbortSignal | undefined, resolve: (v: never[]) => void, reject: (e: unknown) => void): Waiter {
  return { n, resolve, reject, gone: false, signal, onAbort: undefined, flight: undefined };
}

/** Hooks w to its signal: an abort rejects it at once with the signal's reason, and aborts its request when nobody else waits for it. */
function watch(w: Waiter): void {
  const s = w.signal;
  if (!s) return;
  w.onAbort = () => {
    if (w.gone) return;
    settle(w, undefined, s.reason);
    const f = w.flight;
    if (f && !wanted(f)) f.abort?.();
  };
  s.addEventListener("abort", w.onAbort, { once: true });
}

function isHostPort(s: unknown): s is string {
  return typeof s === "string" && splitHostPort(s) !== undefined;
}

function validToken(t: unknown): boolean {
  if (typeof t !== "string" || t === "" || t.length > 512) return false;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

function checkTag(tag: unknown): RejectedError | undefined {
  const bad = (why: string) => new RejectedError({ code: "invalid_tag", message: `tag ${JSON.stringify(tag)}: ${why}` });
  if (typeof tag !== "string") return bad("not a string");
  const bytes = Buffer.byteLength(tag, "utf8");
  if (tag === "") return bad("empty");
  if (bytes > MAX_TAG_LEN) return bad(`${bytes} bytes, at most ${MAX_TAG_LEN}`);
  if (tag === "." || tag === "..") return bad("not a tag name");
  if (/[/ ?#%\\]/.test(tag)) return bad("contains one of / space ? # % \\");
  for (const ch of tag) {
    const c = ch.codePointAt(0) as number;
    if (c < 0x21 || c === 0x7f || c === 0xfffd || (c >= 0xd800 && c <= 0xdfff)) return bad("contains a control character or is not UTF-8");
  }
  return undefined;
}

/**
 * A valid tag as it goes in a path: its UTF-8 bytes, those beyond ASCII
 * percent-encoded (the node decodes the path). node:http writes a path in
 * latin1 and refuses characters above U+00FF, so a raw "订单" never left
 * (and every node was marked down for dense IDs) and "cafÃ©" went out as
 * the bytes of "café", another tag.
 */
function pathTag(tag: string): string {
  let out = "";
  for (const b of Buffer.from(tag, "utf8")) out += b < 0x80 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  return out;
}

/** The code, the text naming it and the error detail of a snowflaked JSON error body. */
function errorBody(body: string): { code: string; text: string; message: string; max?: number; tagMax?: number } {
  try {
    const e = JSON.parse(body)?.error;
    if (e && typeof e.code === "string" && e.code !== "") {
      const message = typeof e.message === "string" ? e.message : "";
      return {
        code: e.code,
        text: `${e.code}: ${message}`,
        message,
        max: Number.isSafeInteger(e.max) && e.max > 0 ? e.max : undefined,
        tagMax: Number.isSafeInteger(e.tag_max) && e.tag_max > 0 ? e.tag_max : undefined,
      };
    }
  } catch {
    // not JSON
  }
  const t = body.length > 80 ? `${body.slice(0, 80)}…` : body;
  return { code: "", text: JSON.stringify(t), message: JSON.stringify(t) };
}

/** Reads exactly n positive IDs, one a line: strictly increasing, or (unordered) distinct. */
function parseIds(body: string, n: number, increasing: boolean): bigint[] {
  const out = new Array<bigint>(n);
  let prev = 0n;
  let k = 0;
  const len = body.length;
  for (let i = 0; i < len; ) {
    let j = i;
    for (; j < len; j++) {
      const c = body.charCodeAt(j);
      if (c === 10) break;
      if (c < 48 || c > 57 || j - i >= 19) throw new Error(`${JSON.stringify(lineAt(body, i))} is not an ID`);
    }
    if (j === i) throw new Error("an empty line");
    if (k === n) throw new Error(`more than the ${n} IDs asked for`);
    const id = BigInt(body.slice(i, j));
    if (id <= 0n || id > MAX_ID) throw new Error(`${body.slice(i, j)} is not an ID`);
    if (increasing && k > 0 && id <= prev) throw new Error(`IDs not increasing: ${id} after ${prev}`);
    out[k++] = prev = id;
    i = j + 1;
  }
  if (k !== n) throw new Error(`answered ${k} of the ${n} IDs asked for`);
  if (!increasing) {
    const s = [...out].sort(cmp);
    for (let i = 1; i < s.length; i++) if (s[i] === s[i - 1]) throw new Error(`ID ${s[i]} twice in one answer`);
  }
  return out;
}

/** The line of body starting at i, at most 80 characters. */
function lineAt(body: string, i: number): string {
  const j = body.indexOf("\n", i);
  return body.slice(i, Math.min(j < 0 ? body.length : j, i + 80));
}

function lines(body: string): string[] {
  const ls = body.split("\n");
  if (ls.length > 0 && ls[ls.length - 1] === "") ls.pop();
  return ls;
}

/** Reads exactly n canonical version 7 UUIDs with the RFC variant, increasing. */
function parseUuids(body: string, n: number): string[] {
  const ls = lines(body);
  if (ls.length !== n) throw new Error(`${ls.length} UUIDs, want ${n}`);
  for (let i = 0; i < n; i++) {
    const u = ls[i] as string;
    if (!UUID_RE.test(u)) throw new Error(`line ${JSON.stringify(u.slice(0, 80))} is not a version 7 UUID with the RFC variant`);
    if (i > 0 && u <= (ls[i - 1] as string)) throw new Error(`${u} does not follow ${ls[i - 1]}: not increasing`);
  }
  return ls;
}

/** Exactly n lines of 1 to 128 printable ASCII characters each, none twice. */
function textLines(body: string, n: number): string[] {
  const ls = lines(body);
  if (ls.length !== n) throw new Error(`${ls.length} lines, want ${n}`);
  for (const l of ls) {
    if (l.length < 1 || l.length > MAX_TEXT_LINE - 1 || !/^[\x21-\x7e]+$/.test(l)) throw new Error(`${JSON.stringify(l.slice(0, 80))} is not an ID as text`);
  }
  if (new Set(ls).size !== n) throw new Error("an ID twice in one answer");
  return ls;
}

/** The first line that is not a 63-bit ID when body is otherwise a well-formed text answer of n IDs (a reset tag's); else undefined. */
function notANumber(body: string, n: number): string | undefined {
  let ls: string[];
  try {
    ls = textLines(body, n);
  } catch {
    return undefined;
  }
  return ls.find((l) => !/^[0-9]+$/.test(l) || BigInt(l) <= 0n || BigInt(l) > MAX_ID);
}

/** t in Unix milliseconds (floored), or why it is no time. */
function unixMs(t: unknown, name: string): number | string {
  if (t instanceof Date) {
    const v = t.getTime();
    return Number.isNaN(v) ? `${name}: an invalid Date` : v;
  }
  if (typeof t === "number" && Number.isSafeInteger(t)) return t;
  return `${name} ${String(t)}: want a Date or whole Unix milliseconds`;
}

const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function parseBounds(body: string): Bounds {
  const d: unknown = JSON.parse(body);
  if (typeof d !== "object" || d === null || Array.isArray(d)) throw new Error("not a JSON object");
  const o = d as Record<string, unknown>;
  const ms = (k: string): number => {
    const v = o[k];
    if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new Error(`${k} ${JSON.stringify(v)} is not a whole number`);
    return v;
  };
  const id = (k: string): bigint => {
    const v = o[k];
    if (typeof v !== "string" || !/^[0-9]{1,19}$/.test(v) || BigInt(v) > MAX_ID) throw new Error(`${k} ${JSON.stringify(v)} is not an ID in a decimal string`);
    return BigInt(v);
  };
  const uuid = (k: string): string | undefined => {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string" || !CANONICAL_UUID.test(v)) throw new Error(`${k} ${JSON.stringify(v)} is not a canonical UUID`);
    return v;
  };
  const fromMs = ms("from_ms");
  const toMs = ms("to_ms");
  const minId = id("min_id");
  const maxId = id("max_id");
  if (fromMs >= toMs || minId > maxId) throw new Error(`an empty range: from_ms ${fromMs}, to_ms ${toMs}, min_id ${minId}, max_id ${maxId}`);
  const b: Bounds = { from: new Date(fromMs), to: new Date(toMs), fromMs, toMs, minId, maxId };
  const minUuid = uuid("min_uuid");
  const maxUuid = uuid("max_uuid");
  if (minUuid !== undefined) b.minUuid = minUuid;
  if (maxUuid !== undefined) b.maxUuid = maxUuid;
  return b;
}

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function int(name: string, v: number | undefined, def: number, lo: number, hi: number): number {
  if (v === undefined) return def;
  if (!Number.isSafeInteger(v) || v < lo || v > hi) throw new ConfigError(`${name} ${v}: want a whole number from ${lo} to ${hi}`);
  return v;
}

/** The client's ID, keying its ranking of the nodes: drawn once per process. */
const SUBSET_ID = randomBytes(8).toString("hex");

function rank(addrs: string[]): number[] {
  const w = addrs.map((a) => createHash("sha256").update(SUBSET_ID).update("\0").update(a).digest().readBigUInt64BE(0));
  return addrs.map((_, i) => i).sort((i, j) => cmp(w[j] as bigint, w[i] as bigint));
}

interface Config {
  maxBatch: number;
  timeoutMs: number;
  attempts: number;
  /** 0: one per node of the subset. */
  maxInFlight: number;
  stallAfterMs: number;
  downForMs: number;
  prefetch: number;
  prefetchMaxAgeMs: number;
  subset: number;
  apiToken: string | undefined;
  tagTokens: Record<string, string>;
  log: (m: string) => void;
}

function config(o: Omit<ClientOptions, "nodes">): Config {
  if (o === null || typeof o !== "object") throw new ConfigError("options: want an object");
  if (o.apiToken !== undefined && !validToken(o.apiToken)) throw new ConfigError("apiToken: want 1..512 printable ASCII characters, no space");
  const tagTokens: Record<string, string> = {};
  for (const [tag, t] of Object.entries(o.tagTokens ?? {})) {
    const bad = checkTag(tag);
    if (bad) throw new ConfigError(`tagTokens: ${bad.detail}`);
    if (!validToken(t)) throw new ConfigError(`tagTokens[${JSON.stringify(tag)}]: want 1..512 printable ASCII characters, no space`);
    tagTokens[tag] = t;
  }
  return {
    maxBatch: int("maxBatch", o.maxBatch, defaults.maxBatch, 1, 1_000_000),
    timeoutMs: int("timeoutMs", o.timeoutMs, defaults.timeoutMs, 1, 3_600_000),
    attempts: int("attempts", o.attempts, defaults.attempts, 1, 100),
    maxInFlight: int("maxInFlight", o.maxInFlight, 0, 1, 1024),
    stallAfterMs: int("stallAfterMs", o.stallAfterMs, defaults.stallAfterMs, 1, 3_600_000),
    downForMs: int("downForMs", o.downForMs, defaults.downForMs, 1, 3_600_000),
    prefetch: int("prefetch", o.prefetch, 0, 0, 10_000_000),
    prefetchMaxAgeMs: int("prefetchMaxAgeMs", o.prefetchMaxAgeMs, defaults.prefetchMaxAgeMs, 1, 3_600_000),
    subset: int("subset", o.subset, defaults.subset, 1, 4096),
    apiToken: o.apiToken,
    tagTokens,
    log: o.log ?? (() => {}),
  };
}

function checkNodes(name: string, nodes: unknown): string[] {
  if (!Array.isArray(nodes) || nodes.length === 0) throw new ConfigError(`${name}: want a non-empty list of host:port`);
  for (const n of nodes) if (!isHostPort(n)) throw new ConfigError(`${name}: ${JSON.stringify(n)} is not host:port`);
  return [...new Set(nodes as string[])];
}

/**
 * The client of a snowflaked cluster. Calls that arrive while a request is
 * out share the next one (`GET /ids?count=N`, `GET /segment/{tag}?count=N`);
 * a call alone sends its own at once. Nodes that fail are routed around
 * (see the README's table of answers). Every ID is a `bigint`.
 *
 * ```ts
 * const c = new Client({ nodes: ["127.0.0.1:8081", "127.0.0.1:8082"] });
 * const id = await c.nextId({ signal: AbortSignal.timeout(500) });
 * c.close();
 * ```
 */
export class Client {
  private readonly cfg: Config;
  private readonly transport: Transport;
  private list: NodeState[] = [];
  private byAddr = new Map<string, NodeState>();
  private sub: NodeState[] = [];
  private spill: NodeState[] = [];
  private rr = 0;
  private nodeMax = 0;
  private closed = false;
  private readonly ids: Batcher;
  private readonly segs = new Map<string, Batcher>();
  private readonly pre: Prefetcher | undefined;
  private readonly idsEp: Endpoint;
  private poller: { timer: NodeJS.Timeout | undefined; seeds: string[]; intervalMs: number; polls: number; running: boolean } | undefined;

  /**
   * A client of a static list of nodes. Throws {@link ConfigError} for bad
   * options. For the nodes from a seed's `GET /cluster/nodes`, use
   * {@link Client.bootstrap}.
   */
  constructor(options: ClientOptions) {
    if (options && "bootstrap" in options) throw new ConfigError("bootstrap: use await Client.bootstrap({bootstrap: [...]})");
    this.cfg = config(options);
    const nodes = checkNodes("nodes", options.nodes);
    this.transport = new Transport(options.tls, Math.max(5, Math.min(50, Math.floor(this.cfg.timeoutMs / 8))));
    this.idsEp = { svc: SVC_IDS, path: "/ids?count=", what: "IDs", headers: this.bearer(this.cfg.apiToken), uuids: false, unordered: false };
    this.ids = new Batcher(this, this.idsEp);
    this.pre = this.cfg.prefetch > 0 ? new Prefetcher(this, this.idsEp) : undefined;
    this.setNodes(nodes);
  }

  /**
   * A client whose nodes come from `GET /cluster/nodes` of the first seed
   * that answers, polled every `bootstrapIntervalMs` (±20% at random),
   * asking the nodes it knows, then the seeds; while none answers, the last
   * list stays. Rejects with a {@link NoNodeError} when no seed answers at
   * the start. The poll's timer never holds the process.
   */
  static async bootstrap(options: BootstrapOptions): Promise<Client> {
    const seeds = checkNodes("bootstrap", options?.bootstrap);
    const intervalMs = int("bootstrapIntervalMs", options.bootstrapIntervalMs, defaults.bootstrapIntervalMs, 10, 3_600_000);
    const { bootstrap: _b, bootstrapIntervalMs: _i, ...rest } = options;
    // A client on the seeds: its transport asks the first list.
    const c = new Client({ ...rest, nodes: seeds });
    try {
      const nodes = await c.askNodes(seeds);
      c.setNodes(nodes);
    } catch (e) {
      c.close();
      throw e;
    }
    c.poller = { timer: undefined, seeds, intervalMs, polls: Math.floor(Math.random() * 1024), running: false };
    c.schedulePoll();
    return c;
  }

  /** The nodes the client knows now: the static list, or the last list bootstrap read. */
  nodes(): string[] {
    return this.list.map((n) => n.addr);
  }

  /** The nodes the client talks to: the first `subset` of its ranking of {@link Client.nodes}, in their order. */
  subset(): string[] {
    return this.sub.map((n) => n.addr);
  }

  /** One new snowflake ID (from the prefetch buffer when `prefetch` is on). */
  nextId(options?: CallOptions): Promise<bigint> {
    if (this.closed) return Promise.reject(new ClosedError());
    if (this.pre) {
      const id = this.pre.take();
      if (id !== undefined) return Promise.resolve(id);
      if (this.pre.refilling()) return this.pre.wait(options?.signal);
    }
    return this.ids.fetch(1, options?.signal).then((ids) => ids[0] as bigint);
  }

  /** n new snowflake IDs (1 ≤ n ≤ {@link MAX_COUNT}), increasing. */
  nextIds(n: number, options?: CallOptions): Promise<bigint[]> {
    return this.ids.get(n, options?.signal);
  }

  /**
   * One new snowflake ID that ends in the gene's low gene bits (`id % 2^K
   * === gene % 2^K` on a cluster run with `--gene-bits K`). Its own request,
   * never merged with others nor prefetched. A cluster without gene bits
   * answers `gene_off`: a {@link RejectedError}.
   */
  async nextGene(gene: bigint | number, options?: CallOptions): Promise<bigint> {
    return (await this.nextGenes(gene, 1, options))[0] as bigint;
  }

  /** n new snowflake IDs (1 ≤ n ≤ maxBatch), increasing, each with the gene (see {@link Client.nextGene}). */
  nextGenes(gene: bigint | number, n: number, options?: CallOptions): Promise<bigint[]> {
    let g: bigint | undefined;
    if (typeof gene === "bigint") g = gene;
    else if (typeof gene === "number" && Number.isSafeInteger(gene)) g = BigInt(gene);
    let bad: RejectedError | undefined;
    if (g === undefined || g < 0n || g > MAX_ID) bad = new RejectedError({ code: "invalid_gene", message: `gene ${String(gene)}: want a whole number from 0 to 2^63-1` });
    else if (!Number.isSafeInteger(n) || n < 1 || n > this.cfg.maxBatch) bad = new RejectedError({ code: "invalid_count", message: `next ${n} IDs with gene ${g}: want 1..${this.cfg.maxBatch} IDs` });
    const ep: Endpoint = { svc: SVC_IDS, path: `/ids?gene=${g}&count=`, what: `IDs with gene ${g}`, headers: this.idsEp.headers, uuids: false, unordered: false };
    return this.direct(ep, n, options?.signal, bad) as Promise<bigint[]>;
  }

  /** The next dense ID of a tag (segment mode; a tag made with `snowflakectl segment create`). An unknown tag is a {@link RejectedError} (`unknown_tag`). */
  async nextSegment(tag: string, options?: CallOptions): Promise<bigint> {
    return (await this.nextSegments(tag, 1, options))[0] as bigint;
  }

  /** n dense IDs of a tag (1 ≤ n ≤ {@link MAX_COUNT}): increasing for a plain tag; an opaque tag's are distinct, in no order. */
  nextSegments(tag: string, n: number, options?: CallOptions): Promise<bigint[]> {
    if (this.closed) return Promise.reject(new ClosedError());
    let b = this.segs.get(tag);
    if (!b) {
      const bad = checkTag(tag);
      if (bad) return Promise.reject(bad);
      b = new Batcher(this, {
        svc: SVC_SEGMENTS,
        path: `/segment/${pathTag(tag)}?count=`,
        what: `dense IDs of ${tag}`,
        headers: this.bearer(this.cfg.tagTokens[tag]),
        uuids: false,
        unordered: true,
        tag: { max: 0 },
      });
      this.segs.set(tag, b);
    }
    return b.get(n, options?.signal);
  }

  /**
   * The next n IDs of a tag as the node writes them, one string each: `GET
   * /segment/{tag}?count=n` as text. A reset tag's IDs (`20261207000123`,
   * `ORD-20261207-000123`) when they are not numbers; a plain tag's are
   * decimal. With `format` (`base62`, `base58`, `base36`, `base32`) the node
   * encodes each ID (a reset tag refuses it: `invalid_format`). Its own
   * request, never merged; the strings in the node's order.
   */
  nextSegmentText(tag: string, n = 1, options?: SegmentTextOptions): Promise<string[]> {
    const format = options?.format;
    let bad: RejectedError | undefined = checkTag(tag);
    if (!bad && format !== undefined && format !== "text" && !ENCODINGS.includes(format)) {
      bad = new RejectedError({ code: "invalid_format", message: `format ${JSON.stringify(format)}: want text or one of ${ENCODINGS.join(", ")}` });
    }
    if (!bad && (!Number.isSafeInteger(n) || n < 1 || n > MAX_COUNT)) bad = new RejectedError({ code: "invalid_count", message: `next ${n} IDs of ${tag} as text: want 1..${MAX_COUNT}` });
    const query = format !== undefined && format !== "text" ? `format=${format}&` : "";
    const ep: Endpoint = {
      svc: SVC_SEGMENTS,
      path: `/segment/${bad ? "" : pathTag(tag)}?${query}count=`,
      what: `IDs of ${tag} as text`,
      headers: this.bearer(this.cfg.tagTokens[tag]),
      uuids: false,
      unordered: true,
      tag: { max: 0 },
      text: true,
    };
    return this.direct(ep, n, bad === undefined ? options?.signal : undefined, bad) as Promise<string[]>;
  }

  /**
   * The smallest and largest ID (and UUID) a node of the cluster can have
   * issued in `[from, to)`: `GET /bounds`, arithmetic on the layout that any
   * node answers (one out of service too). `from` and `to` are Dates or Unix
   * milliseconds; the node truncates each to the start of its tick, and the
   * answer gives the range it used. A range the layout cannot hold
   * (reversed, empty, before the epoch, past the time field's end) is a
   * {@link RejectedError} `invalid_range`.
   */
  bounds(from: Date | number, to: Date | number, options?: CallOptions): Promise<Bounds> {
    const f = unixMs(from, "from");
    const t = unixMs(to, "to");
    const bad = typeof f === "string" ? f : typeof t === "string" ? t : undefined;
    const ep: Endpoint = { svc: SVC_IDS, path: `/bounds?from=${f}&to=${t}`, what: `the bounds of [${f}, ${t}) ms`, headers: undefined, uuids: false, unordered: false, bounds: true };
    const err = bad === undefined ? undefined : new RejectedError({ code: "invalid_range", message: bad });
    return this.direct(ep, 1, err === undefined ? options?.signal : undefined, err).then((v) => v[0] as Bounds);
  }

  /** One new UUIDv7 in canonical text (36 characters), from `GET /uuids`: its own request, never merged. */
  async nextUuid(options?: CallOptions): Promise<string> {
    return (await this.nextUuids(1, options))[0] as string;
  }

  /** n new UUIDv7s (1 ≤ n ≤ maxBatch), increasing. */
  nextUuids(n: number, options?: CallOptions): Promise<string[]> {
    const bad = !Number.isSafeInteger(n) || n < 1 || n > this.cfg.maxBatch ? new RejectedError({ code: "invalid_count", message: `next ${n} UUIDs: want 1..${this.cfg.maxBatch}` }) : undefined;
    return this.direct({ svc: SVC_IDS, path: "/uuids?count=", what: "UUIDs", headers: this.idsEp.headers, uuids: true, unordered: false }, n, bad === undefined ? options?.signal : undefined, bad) as Promise<string[]>;
  }

  /**
   * Stops the client: calls waiting or in flight reject with
   * {@link ClosedError}, every connection is closed and the poll stops.
   * Calling it again does nothing.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.poller?.timer) clearTimeout(this.poller.timer);
    this.ids.close();
    for (const b of this.segs.values()) b.close();
    this.pre?.close();
    this.transport.close();
  }

  // ---- internals, used by Batcher and Prefetcher ----

  /** @internal One snowflake ID through the batcher, past the prefetch buffer. */
  nextIdDirect(signal: AbortSignal | undefined): Promise<bigint> {
    return this.ids.fetch(1, signal).then((ids) => ids[0] as bigint);
  }

  /** @internal How many requests of one kind may be out at once. */
  get inFlightLimit(): number {
    return this.cfg.maxInFlight || Math.max(1, this.sub.length);
  }

  /** @internal */
  get isClosed(): boolean {
    return this.closed;
  }

  /** @internal */
  get config(): Config {
    return this.cfg;
  }

  private bearer(token: string | undefined): Record<string, string> | undefined {
    return token ? { authorization: `Bearer ${token}` } : undefined;
  }

  /** A call of its own, never merged: NextGene's and NextUUID's. */
  private direct(ep: Endpoint, n: number, signal: AbortSignal | undefined, bad: RejectedError | undefined): Promise<unknown[]> {
    if (this.closed) return Promise.reject(new ClosedError());
    if (bad) return Promise.reject(bad);
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const w = newWaiter(n, signal, resolve, reject);
      const f: Flight = { waiters: [w], abort: undefined, start: monoNow(), counted: false };
      w.flight = f;
      watch(w);
      this.serveClamped(ep, n, f, false).then(
        (v) => settle(w, v),
        (e) => settle(w, undefined, this.callerErr(w, e)),
      );
    });
  }

  /** @internal What a caller whose request ended with err gets. */
  callerErr(w: Waiter, err: unknown): unknown {
    if (err instanceof ClosedError || err instanceof RejectedError) return err;
    if (w.signal?.aborted) return w.signal.reason;
    if (this.closed) return new ClosedError();
    return err;
  }

  /** @internal n IDs of ep within the nodes' limits: a count above a node's `max` is asked again in requests of at most it, remembered. */
  serveClamped(ep: Endpoint, n: number, f: Flight, merged: boolean): Promise<unknown[]> {
    const limit = this.limitFor(ep);
    if (limit !== 0 && n > limit) return this.serveParts(ep, n, f, limit);
    return this.serve(ep, n, f).catch((e: unknown) => {
      const { nodeMax, tagMax } = refusedAbove(e, n);
      if (tagMax > 0 && ep.tag) {
        ep.tag.max = tagMax;
        if (!merged) throw e;
        return this.serveParts(ep, n, f, this.limitFor(ep));
      }
      if (nodeMax > 0) return this.serveParts(ep, n, f, Math.min(this.learnMax(nodeMax), this.limitFor(ep) || nodeMax));
      throw e;
    });
  }

  /** n IDs of ep in requests of at most limit, learning smaller limits on the way; sorted. */
  private async serveParts(ep: Endpoint, n: number, f: Flight, limit: number): Promise<unknown[]> {
    const out: unknown[] = [];
    let relearned = 0;
    for (let got = 0; got < n; ) {
      const size = Math.min(n - got, limit);
      let more: unknown[];
      try {
        more = await this.serve(ep, size, f);
      } catch (e) {
        const { nodeMax, tagMax } = refusedAbove(e, size);
        if (tagMax > 0 && ep.tag && relearned < MAX_RELEARN) {
          relearned++;
          ep.tag.max = tagMax;
          limit = this.limitFor(ep);
          continue;
        }
        if (nodeMax > 0 && relearned < MAX_RELEARN) {
          relearned++;
          limit = Math.min(this.learnMax(nodeMax), this.limitFor(ep) || nodeMax);
          continue;
        }
        throw e;
      }
      for (const x of more) out.push(x);
      got += size;
    }
    if (ep.uuids) (out as string[]).sort();
    else if (!ep.text) (out as bigint[]).sort(cmp);
    return out;
  }

  private limitFor(ep: Endpoint): number {
    let limit = this.nodeMax;
    const tm = ep.tag?.max ?? 0;
    if (tm > 0 && (limit === 0 || tm < limit)) limit = tm;
    return limit;
  }

  private learnMax(lim: number): number {
    if (this.nodeMax !== 0 && this.nodeMax <= lim) return this.nodeMax;
    this.nodeMax = lim;
    this.cfg.log(`snowflaked client: a node accepts at most ${lim} IDs a request, fewer than maxBatch ${this.cfg.maxBatch}; asking for at most its limit`);
    return lim;
  }

  /** n IDs of ep, failing over between nodes: at most `attempts` nodes, none once every caller of f left. */
  private serve(ep: Endpoint, n: number, f: Flight): Promise<unknown[]> {
    // A chain of promises, not an async function: a call alone pays for
    // no more hops than its one request.
    const tried: string[] = [];
    const failures: Error[] = [];
    const attempt = (): Promise<unknown[]> => {
      if (this.closed) return Promise.reject(new ClosedError());
      if (!wanted(f)) return Promise.reject(new GaveUp());
      const node = tried.length < this.cfg.attempts ? this.pick(ep.svc, tried) : undefined;
      if (node === undefined) return Promise.reject(this.noNode(ep, tried, failures));
      tried.push(node);
      return this.request(node, ep, n, f).catch((e: unknown) => {
        if (this.closed) throw new ClosedError();
        if (e instanceof RejectedError || e instanceof GaveUp) throw e;
        failures.push(e as Error);
        this.cfg.log(`snowflaked client: failing over from ${node}: ${(e as Error).message}`);
        return attempt();
      });
    };
    return attempt();
  }

  /** Asks addr for n IDs of ep once; a node that fails is marked down as the table of answers says. */
  private request(addr: string, ep: Endpoint, n: number, f: Flight): Promise<unknown[]> {
    const limit = ep.bounds ? MAX_BOUNDS_BODY : n * (ep.uuids ? MAX_UUID_LINE : ep.svc === SVC_SEGMENTS ? MAX_TEXT_LINE : MAX_ID_LINE);
    const node = this.byAddr.get(addr);
    if (node) node.busy++;
    return this.transport
      .get(addr, ep.bounds ? ep.path : ep.path + n, ep.headers, limit, this.cfg.timeoutMs, (abort) => {
        f.abort = abort;
      })
      .then(
        (a) => {
          f.abort = undefined;
          if (node) node.busy--;
          return this.answer(addr, ep, n, a);
        },
        (e: unknown) => {
          f.abort = undefined;
          if (node) node.busy--;
          if (e instanceof AbortedRequest) throw new GaveUp();
          if (this.closed) throw new ClosedError();
          const err = e instanceof TransportError ? e : new Error(`${addr}: ${(e as Error).message}`);
          this.markDown(addr, ep.svc, this.cfg.downForMs, err);
          throw err;
        },
      );
  }

  /** What a node's answer means (the README's table). */
  private answer(addr: string, ep: Endpoint, n: number, a: Answer): unknown[] {
    const s = a.status;
    if (s === 200) {
      try {
        if (ep.uuids) return parseUuids(a.body, n);
        if (ep.text) return textLines(a.body, n);
        if (ep.bounds) return [parseBounds(a.body)];
        return parseIds(a.body, n, !ep.unordered);
      } catch (e) {
        const word = ep.svc === SVC_SEGMENTS && !ep.text ? notANumber(a.body, n) : undefined;
        if (word !== undefined) {
          // A reset tag's IDs as text: every node answers so.
          throw new RejectedError({ node: addr, status: 200, message: `${ep.what}: the tag's IDs are not numbers (the node answered ${JSON.stringify(word)}); ask for them with nextSegmentText` });
        }
        const err = new Error(`${addr}: bad answer to ${n} ${ep.what}: ${(e as Error).message}`);
        this.markDown(addr, ep.svc, this.cfg.downForMs, err);
        throw err;
      }
    }
    const eb = errorBody(a.body);
    if (s === 503) {
      const err = new Error(`${addr}: 503 ${eb.text}`);
      // batch_timeout: the request's doing, not the node's; it stays up.
      if (eb.code !== "batch_timeout") this.markDown(addr, ep.svc, a.retryAfterMs || this.cfg.downForMs, err);
      throw err;
    }
    if (s >= 400 && s < 500 && (s !== 404 || eb.code === "unknown_tag")) {
      throw new RejectedError({ node: addr, status: s, code: eb.code, message: eb.message, max: eb.max, tagMax: eb.tagMax });
    }
    // A 404 other than unknown_tag (a stale address, segments_off), any other status.
    const err = new Error(`${addr}: ${s === 404 ? "404" : `status ${s}`} ${eb.text}`);
    this.markDown(addr, ep.svc, this.cfg.downForMs, err);
    throw err;
  }

  private setNodes(addrs: string[]): void {
    const old = new Map(this.list.map((n) => [n.addr, n]));
    const nodes: NodeState[] = [];
    const seen = new Set<string>();
    for (const a of addrs) {
      if (seen.has(a)) continue;
      seen.add(a);
      nodes.push(old.get(a) ?? { addr: a, busy: 0, downUntil: [0, 0], lastErr: [undefined, undefined], inSubset: false });
    }
    const ranked = rank(nodes.map((n) => n.addr));
    const k = Math.min(this.cfg.subset, ranked.length);
    ranked.forEach((r, i) => ((nodes[r] as NodeState).inSubset = i < k));
    this.list = nodes;
    this.byAddr = new Map(nodes.map((n) => [n.addr, n]));
    this.sub = nodes.filter((n) => n.inSubset);
    this.spill = ranked.slice(k).map((r) => nodes[r] as NodeState);
    this.transport.keepOnly(this.sub.map((n) => n.addr));
  }

  private pick(svc: number, tried: string[]): string | undefined {
    const now = monoNow();
    const usable = (n: NodeState) => now >= n.downUntil[svc]! && !tried.includes(n.addr);
    // Round-robin over the subset, to a node with no request out first.
    const k = this.sub.length;
    let busy: NodeState | undefined;
    for (let i = 0; i < k; i++) {
      const n = this.sub[(this.rr + i) % k] as NodeState;
      if (!usable(n)) continue;
      if (n.busy === 0) {
        this.rr = (this.rr + i + 1) % k;
        return n.addr;
      }
      busy ??= n;
    }
    if (busy) {
      this.rr = (this.sub.indexOf(busy) + 1) % k;
      return busy.addr;
    }
    for (const n of this.spill) if (usable(n)) return n.addr;
    return undefined;
  }

  private markDown(addr: string, svc: number, ms: number, err: Error): void {
    for (const n of this.list) {
      if (n.addr === addr) {
        n.downUntil[svc] = monoNow() + ms;
        n.lastErr[svc] = err;
      }
    }
  }

  private noNode(ep: Endpoint, tried: string[], failures: Error[]): NoNodeError {
    const causes = [...failures];
    const notTried: string[] = [];
    for (const n of this.list) {
      const last = n.lastErr[ep.svc];
      if (tried.includes(n.addr)) continue;
      if (last === undefined) {
        if (n.inSubset) notTried.push(n.addr);
      } else if (!causes.includes(last)) causes.push(last);
    }
    return new NoNodeError(ep.what, causes, notTried);
  }

  // ---- bootstrap ----

  private async askNodes(addrs: string[]): Promise<string[]> {
    const causes: Error[] = [];
    for (const addr of addrs) {
      if (this.closed) throw new ClosedError();
      try {
        return await this.fetchNodes(addr);
      } catch (e) {
        causes.push(e as Error);
      }
    }
    throw new NoNodeError("the cluster's node list", causes);
  }

  private async fetchNodes(addr: string): Promise<string[]> {
    const a = await this.transport.get(addr, "/cluster/nodes", undefined, BOOTSTRAP_MAX_BODY, this.cfg.timeoutMs);
    if (a.status !== 200) throw new Error(`${addr}: /cluster/nodes ${a.status} ${errorBody(a.body).text}`);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.from(a.body, "latin1").toString("utf8"));
    } catch (e) {
      throw new Error(`${addr}: the node list is not JSON: ${(e as Error).message}`);
    }
    const list = (body as { nodes?: unknown })?.nodes;
    if (!Array.isArray(list)) throw new Error(`${addr}: the node list has no "nodes"`);
    if (list.length === 0) throw new Error(`${addr}: answered no node in service`);
    const out: string[] = [];
    for (const n of list) {
      const ad = (n as { addr?: unknown })?.addr;
      if (!isHostPort(ad)) throw new Error(`${addr}: node list entry ${JSON.stringify(ad)} is not host:port`);
      if (!out.includes(ad)) out.push(ad);
    }
    return out;
  }

  private schedulePoll(): void {
    const p = this.poller;
    if (!p || this.closed) return;
    const spread = Math.floor(p.intervalMs / 5);
    const ms = p.intervalMs + Math.floor(Math.random() * (2 * spread + 1)) - spread;
    p.timer = setTimeout(() => void this.poll(), ms);
    p.timer.unref();
  }

  private async poll(): Promise<void> {
    const p = this.poller;
    if (!p || this.closed) return;
    const known = this.nodes();
    const k = known.length > 0 ? p.polls % known.length : 0;
    p.polls++;
    const cands = [...known.slice(k), ...known.slice(0, k)];
    for (const s of p.seeds) if (!cands.includes(s)) cands.push(s);
    try {
      const nodes = await this.askNodes(cands.slice(0, BOOTSTRAP_MAX_ASK));
      if (!this.closed) {
        const cur = this.nodes();
        if (nodes.length !== cur.length || nodes.some((n, i) => n !== cur[i])) {
          this.cfg.log(`snowflaked client: the cluster's nodes changed: ${nodes.join(",")} (before ${cur.join(",")})`);
          this.setNodes(nodes);
        }
      }
    } catch (e) {
      if (!this.closed) this.cfg.log(`snowflaked client: no node answered the cluster's node list; keeping the last list: ${(e as Error).message}`);
    }
    this.schedulePoll();
  }
}

function refusedAbove(e: unknown, n: number): { nodeMax: number; tagMax: number } {
  if (!(e instanceof RejectedError) || e.code !== "invalid_count") return { nodeMax: 0, tagMax: 0 };
  return {
    nodeMax: e.max !== undefined && e.max >= 1 && e.max < n ? e.max : 0,
    tagMax: e.tagMax !== undefined && e.tagMax >= 1 && e.tagMax < n ? e.tagMax : 0,
  };
}

/**
 * The batcher of one kind of ID (snowflake IDs, one tag's dense IDs): a
 * call alone makes its request at once; calls that arrive while
 * `maxInFlight` requests are out wait and go together in the next, up to
 * the most one request asks for.
 */
class Batcher {
  private queue: Waiter[] = [];
  private inFlight = 0;
  private readonly outs = new Set<Flight>();
  private stallTimer: NodeJS.Timeout | undefined;
  private pumpPending = false;
  private gathering = false;
  private closed = false;

  constructor(
    private readonly c: Client,
    private readonly ep: Endpoint,
  ) {}

  private most(): number {
    const tm = this.ep.tag?.max ?? 0;
    const mb = this.c.config.maxBatch;
    return tm > 0 && tm < mb ? tm : mb;
  }

  /** n IDs (1 ≤ n ≤ MAX_COUNT), increasing: in several batches, sorted, beyond the most one request asks for. */
  async get(n: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_COUNT) {
      throw new RejectedError({ code: "invalid_count", message: `next ${n} ${this.ep.what}: want 1..${MAX_COUNT}` });
    }
    const most = this.most();
    if (most < this.c.config.maxBatch && n > most) {
      throw new RejectedError({ code: "invalid_count", tagMax: most, message: `next ${n} ${this.ep.what}: the tag takes at most ${most} a request (--max-count)` });
    }
    if (n <= most) return this.fetch(n, signal);
    const out: bigint[] = [];
    while (out.length < n) {
      const ids = await this.fetch(Math.min(n - out.length, most), signal);
      for (const id of ids) out.push(id);
    }
    return out.sort(cmp); // batches from different nodes interleave
  }

  /** n ≤ most() IDs from one request. */
  fetch(n: number, signal: AbortSignal | undefined): Promise<bigint[]> {
    if (this.closed || this.c.isClosed) return Promise.reject(new ClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<bigint[]>((resolve, reject) => {
      const w = newWaiter(n, signal, resolve as (v: never[]) => void, reject);
      watch(w);
      if (this.inFlight < this.c.inFlightLimit && this.queue.length === 0 && !this.gathering) {
        this.dispatch([w], n);
      } else {
        this.queue.push(w);
        this.armStall();
      }
    });
  }

  private dispatch(waiters: Waiter[], total: number): void {
    const f: Flight = { waiters, abort: undefined, start: monoNow(), counted: true };
    for (const w of waiters) w.flight = f;
    this.inFlight++;
    this.outs.add(f);
    this.c.serveClamped(this.ep, total, f, waiters.length > 1).then(
      (ids) => {
        this.done(f);
        let off = 0;
        for (const w of waiters) {
          // IDs of a caller that left are dropped, never kept for another.
          settle(w, ids.slice(off, off + w.n));
          off += w.n;
        }
        this.afterServed(waiters.length > 1);
      },
      (e) => {
        this.done(f);
        for (const w of waiters) settle(w, undefined, this.c.callerErr(w, e));
        this.afterServed(false);
      },
    );
  }

  private done(f: Flight): void {
    this.outs.delete(f);
    if (f.counted) {
      f.counted = false;
      this.inFlight--;
    }
  }

  /**
   * After a request: the callers waiting go in the next batch, once the
   * callers just served (who may call again at once) have had their turn to
   * join it.
   */
  private afterServed(several: boolean): void {
    if (this.queue.length === 0 && !several) return;
    this.gathering = true;
    if (this.pumpPending) return;
    this.pumpPending = true;
    setImmediate(() => {
      this.pumpPending = false;
      this.gathering = false;
      this.pump();
    });
  }

  private pump(): void {
    if (this.closed) return;
    const max = this.c.inFlightLimit;
    while (this.inFlight < max) {
      let i = 0;
      while (i < this.queue.length && (this.queue[i] as Waiter).gone) i++;
      if (i === this.queue.length) {
        this.queue = [];
        break;
      }
      const most = this.most();
      const take: Waiter[] = [];
      let total = 0;
      for (; i < this.queue.length; i++) {
        const w = this.queue[i] as Waiter;
        if (w.gone) continue;
        // The first caller always goes, even above a ceiling learnt since
        // it queued (a node then refuses it alone); others wait their turn.
        if (take.length > 0 && total + w.n > most) break;
        take.push(w);
        total += w.n;
      }
      this.queue = this.queue.slice(i);
      this.dispatch(take, total);
    }
    if (this.queue.length > 0) this.armStall();
  }

  /** While calls wait, a request out longer than stallAfterMs gives its slot up. */
  private armStall(): void {
    if (this.stallTimer) return;
    let oldest = Infinity;
    for (const f of this.outs) if (f.counted && f.start < oldest) oldest = f.start;
    if (oldest === Infinity) return;
    const ms = Math.max(0, oldest + this.c.config.stallAfterMs - monoNow());
    this.stallTimer = setTimeout(() => this.onStall(), ms);
    this.stallTimer.unref();
  }

  private onStall(): void {
    this.stallTimer = undefined;
    if (this.closed || !this.queue.some((w) => !w.gone)) return;
    const now = monoNow();
    for (const f of this.outs) {
      if (f.counted && now - f.start >= this.c.config.stallAfterMs) {
        f.counted = false;
        this.inFlight--;
      }
    }
    this.pump();
  }

  close(): void {
    this.closed = true;
    if (this.stallTimer) clearTimeout(this.stallTimer);
    const q = this.queue;
    this.queue = [];
    for (const w of q) settle(w, undefined, new ClosedError());
    for (const f of this.outs) for (const w of f.waiters) settle(w, undefined, new ClosedError());
  }
}

/** Snowflake IDs fetched ahead for nextId: chunks of at most maxBatch (prefetch/4 when smaller), up to 4 refills at once, none older than prefetchMaxAgeMs. */
class Prefetcher {
  private chunks: { ids: bigint[]; i: number; at: number }[] = [];
  private held = 0;
  private onTheWay = 0;
  private refills = 0;
  private waiters: Waiter[] = [];
  private closed = false;
  private readonly flight: Flight;

  constructor(
    private readonly c: Client,
    private readonly ep: Endpoint,
  ) {
    // A refill is wanted while the client is open.
    const keeper = newWaiter(0, undefined, () => {}, () => {});
    this.flight = { waiters: [keeper], abort: undefined, start: 0, counted: false };
  }

  refilling(): boolean {
    return this.refills > 0;
  }

  take(): bigint | undefined {
    const now = monoNow();
    const maxAge = this.c.config.prefetchMaxAgeMs;
    let id: bigint | undefined;
    while (this.chunks.length > 0) {
      const ch = this.chunks[0] as { ids: bigint[]; i: number; at: number };
      if (now - ch.at > maxAge || ch.i >= ch.ids.length) {
        this.held -= ch.ids.length - ch.i;
        this.chunks.shift();
        continue;
      }
      id = ch.ids[ch.i++] as bigint;
      this.held--;
      break;
    }
    this.refill();
    return id;
  }

  wait(signal: AbortSignal | undefined): Promise<bigint> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<bigint>((resolve, reject) => {
      const w = newWaiter(1, signal, ((v: bigint[]) => resolve(v[0] as bigint)) as (v: never[]) => void, reject);
      watch(w);
      this.waiters.push(w);
    });
  }

  private refill(): void {
    const k = this.c.config.prefetch;
    const size = Math.max(1, Math.min(this.c.config.maxBatch, Math.floor(k / 4) || 1));
    while (!this.closed && this.refills < 4 && this.held + this.onTheWay < k) {
      this.refills++;
      this.onTheWay += size;
      this.c.serveClamped(this.ep, size, this.flight, false).then(
        (ids) => {
          this.refills--;
          this.onTheWay -= size;
          if (this.closed) return;
          const chunk = { ids: ids as bigint[], i: 0, at: monoNow() };
          for (const w of this.waiters) {
            if (w.gone) continue;
            if (chunk.i >= chunk.ids.length) break;
            settle(w, [chunk.ids[chunk.i++]]);
          }
          this.waiters = this.waiters.filter((w) => !w.gone);
          this.held += chunk.ids.length - chunk.i;
          if (chunk.i < chunk.ids.length) this.chunks.push(chunk);
          this.refill();
        },
        (e) => {
          this.refills--;
          this.onTheWay -= size;
          if (this.closed) return;
          this.c.config.log(`snowflaked client: prefetch failed: ${(e as Error).message}`);
          if (this.refills === 0) {
            // Nothing on its way: the callers waiting ask for themselves.
            const ws = this.waiters;
            this.waiters = [];
            for (const w of ws) {
              if (w.gone) continue;
              if (w.onAbort) w.signal?.removeEventListener("abort", w.onAbort);
              w.gone = true;
              this.c.nextIdDirect(w.signal).then((id) => w.resolve([id] as never[]), w.reject);
            }
          }
        },
      );
    }
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiters) settle(w, undefined, new ClosedError());
    this.waiters = [];
    this.chunks = [];
  }
}
