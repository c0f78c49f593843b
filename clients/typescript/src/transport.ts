import * as http from "node:http";
import * as https from "node:https";
import { readFileSync } from "node:fs";
import { ConfigError } from "./errors.js";

/**
 * TLS to the nodes: each field a path to a PEM file or the PEM text itself
 * (text starting with `-----BEGIN`).
 */
export interface TlsOptions {
  /** The CA that signed the nodes' certificates; absent: the system's CAs. */
  ca?: string;
  /** The client certificate, for nodes that require one (`--tls-client-ca`). */
  cert?: string;
  /** The client certificate's private key (with `cert`). */
  key?: string;
  /** The name to verify each node under; absent: each node's host. */
  serverName?: string;
}

/** An answer of a node: status, body (bounded), Retry-After in ms (0: none). */
export interface Answer {
  /** The HTTP status. */
  status: number;
  /** The body: latin1 for a 200 (IDs are ASCII), UTF-8 otherwise. */
  body: string;
  /** The Retry-After header in ms, at most an hour; 0 when absent or not whole seconds. */
  retryAfterMs: number;
}

/** A failure to get an answer: no connection, a reset, a timeout, a malformed answer. */
export class TransportError extends Error {
  /** Whether the failure is the client's own per-request timeout. */
  readonly timeout: boolean;
  /** @param message names the node and the failure. */
  constructor(message: string, timeout = false, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "TransportError";
    this.timeout = timeout;
  }
}

/** The request was given up by the client (its callers left, or the client closed). */
export class AbortedRequest extends Error {
  /** The request was abandoned on purpose. */
  constructor() {
    super("request given up");
    this.name = "AbortedRequest";
  }
}

/**
 * Milliseconds on the monotonic clock: deadlines, stalls, down times and
 * prefetch ages must not move when the wall clock is stepped (NTP), or a
 * clock stepped back an hour would leave a hung request out for an hour.
 */
export function monoNow(): number {
  return performance.now();
}

/** The most bytes of an answer that is not a 200 (a JSON error). */
export const MAX_ERROR_BODY = 64 << 10;

/** A PEM given as text, or read from the path given. */
function pem(what: string, v: string): string {
  if (v.trimStart().startsWith("-----BEGIN")) return v;
  try {
    return readFileSync(v, "utf8");
  } catch (e) {
    throw new ConfigError(`tls ${what}: cannot read ${v}: ${(e as Error).message}`);
  }
}

/** Splits "host:port" (an IPv6 host in brackets). */
export function splitHostPort(addr: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(addr);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535 || String(port) !== m[3]) return undefined;
  return { host: (m[1] ?? m[2]) as string, port };
}

/**
 * HTTP/1.1 to the nodes over keep-alive connections (node:http, or
 * node:https with TLS options). Every answer must carry a Content-Length,
 * checked before the body is read.
 */
export class Transport {
  private readonly agent: http.Agent;
  private readonly mod: typeof http | typeof https;
  private readonly hosts = new Map<string, { host: string; port: number }>();
  /** The requests out, each with its deadline (ms since the epoch) and what ends it then. */
  private readonly live = new Map<http.ClientRequest, { at: number; expire: () => void }>();
  private sweeper: NodeJS.Timeout | undefined;
  private readonly sweepMs: number;
  private closed = false;
  /** "http" or "https". */
  readonly scheme: string;

  /**
   * @param tls HTTPS with these PEMs; undefined: plain HTTP.
   * @param sweepMs how often requests past their deadline are ended: one
   * timer for them all (a timer armed per request cost about 10 µs of
   * latency a call), so a timeout ends up to sweepMs late.
   */
  constructor(tls: TlsOptions | undefined, sweepMs = 50) {
    this.sweepMs = sweepMs;
    if (tls) {
      if ((tls.cert === undefined) !== (tls.key === undefined)) {
        throw new ConfigError("tls: cert and key go together");
      }
      this.agent = new https.Agent({
        keepAlive: true,
        maxSockets: Infinity,
        scheduling: "lifo",
        ca: tls.ca !== undefined ? pem("ca", tls.ca) : undefined,
        cert: tls.cert !== undefined ? pem("cert", tls.cert) : undefined,
        key: tls.key !== undefined ? pem("key", tls.key) : undefined,
        servername: tls.serverName,
      });
      this.mod = https;
      this.scheme = "https";
    } else {
      this.agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: "lifo" });
      this.mod = http;
      this.scheme = "http";
    }
  }

  /**
   * GET path from addr. limit bounds a 200's body (MAX_ERROR_BODY
   * otherwise). Rejects with a TransportError (the node's failure) or
   * AbortedRequest (abort() was called: the client's doing).
   */
  get(addr: string, path: string, headers: Record<string, string> | undefined, limit: number, timeoutMs: number, onAbort?: (abort: () => void) => void): Promise<Answer> {
    return this.attempt(addr, path, headers, limit, timeoutMs, onAbort, true);
  }

  private attempt(addr: string, path: string, headers: Record<string, string> | undefined, limit: number, timeoutMs: number, onAbort: ((abort: () => void) => void) | undefined, retryStale: boolean): Promise<Answer> {
    let hp = this.hosts.get(addr);
    if (!hp) {
      hp = splitHostPort(addr);
      if (!hp) return Promise.reject(new TransportError(`${addr}: not host:port`));
      this.hosts.set(addr, hp);
    }
    const target = hp;
    if (this.closed) return Promise.reject(new AbortedRequest());
    return new Promise<Answer>((resolve, reject) => {
      let settled = false;
      let aborted = false;
      let timedOut = false;
      const req = this.mod.request({
        agent: this.agent as https.Agent,
        host: target.host,
        port: target.port,
        path,
        method: "GET",
        headers,
      });
      this.live.set(req, {
        at: monoNow() + timeoutMs,
        expire: () => {
          timedOut = true;
          req.destroy();
        },
      });
      this.sweeper ??= setInterval(() => this.sweep(), this.sweepMs).unref();
      const finish = (err: Error | undefined, a?: Answer) => {
        if (settled) return;
        settled = true;
        this.live.delete(req);
        if (err) reject(err);
        else resolve(a as Answer);
      };
      onAbort?.(() => {
        aborted = true;
        req.destroy();
      });
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (settled) return;
        // close() ended it: the request is given up, never sent again.
        if (aborted || this.closed) return finish(new AbortedRequest());
        if (timedOut) return finish(new TransportError(`${addr}: timeout after ${timeoutMs} ms`, true));
        // A keep-alive connection the node closed while idle: dialled
        // again once (the request never reached a handler).
        if (retryStale && req.reusedSocket && (e.code === "ECONNRESET" || e.code === "EPIPE")) {
          settled = true;
          this.live.delete(req);
          this.closeIdle((name) => name.startsWith(`${target.host}:${target.port}:`)); // a restart closed them all
          this.attempt(addr, path, headers, limit, timeoutMs, onAbort, false).then(resolve, reject);
          return;
        }
        finish(new TransportError(`${addr}: ${e.code ?? e.message}${e.code && e.message ? ` (${e.message})` : ""}`, false, e));
      });
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        const clHeader = res.headers["content-length"];
        const max = status === 200 ? limit : MAX_ERROR_BODY;
        const cl = clHeader === undefined ? NaN : Number(clHeader);
        if (!Number.isSafeInteger(cl) || cl < 0) {
          req.destroy();
          return finish(new TransportError(`${addr}: bad answer: ${clHeader === undefined ? "no Content-Length" : `Content-Length ${JSON.stringify(clHeader)}`} (status ${status})`));
        }
        if (cl > max) {
          req.destroy();
          return finish(new TransportError(`${addr}: bad answer: status ${status} with ${cl} bytes, more than the ${max} expected`));
        }
        const chunks: Buffer[] = [];
        let got = 0;
        res.on("data", (c: Buffer) => {
          got += c.length;
          if (got > cl) {
            req.destroy();
            return finish(new TransportError(`${addr}: bad answer: more than its Content-Length`));
          }
          chunks.push(c);
        });
        res.on("end", () => {
          if (got !== cl) return finish(new TransportError(`${addr}: bad answer: ${got} of ${cl} bytes`));
          const ra = res.headers["retry-after"];
          const secs = ra === undefined ? NaN : Number(ra);
          const enc = status === 200 ? "latin1" : "utf8";
          const body = chunks.length === 1 ? (chunks[0] as Buffer).toString(enc) : Buffer.concat(chunks).toString(enc);
          finish(undefined, { status, body, retryAfterMs: Number.isFinite(secs) && secs > 0 ? Math.min(secs, 3600) * 1000 : 0 });
        });
        res.on("error", (e) => {
          if (aborted || this.closed) return finish(new AbortedRequest());
          if (timedOut) return finish(new TransportError(`${addr}: timeout after ${timeoutMs} ms`, true));
          finish(new TransportError(`${addr}: ${e.message}`, false, e));
        });
        res.on("aborted", () => {
          if (aborted || this.closed) return finish(new AbortedRequest());
          if (timedOut) return finish(new TransportError(`${addr}: timeout after ${timeoutMs} ms`, true));
          finish(new TransportError(`${addr}: connection closed mid-answer`));
        });
      });
      req.end();
    });
  }

  /** Closes the idle connections to the nodes not in addrs (a node that left the list or the subset). */
  keepOnly(addrs: readonly string[]): void {
    const keep: string[] = [];
    for (const a of addrs) {
      const hp = splitHostPort(a);
      if (hp) keep.push(`${hp.host}:${hp.port}:`);
    }
    this.closeIdle((name) => !keep.some((k) => name.startsWith(k)));
  }

  /** Closes the idle connections of the agent's pools whose name ("host:port:…") matches. */
  private closeIdle(match: (name: string) => boolean): void {
    const free = this.agent.freeSockets as Record<string, import("node:net").Socket[] | undefined>;
    for (const name of Object.keys(free)) {
      if (match(name)) for (const sock of free[name] ?? []) sock.destroy();
    }
  }

  private sweep(): void {
    const now = monoNow();
    for (const [req, d] of this.live) {
      if (now >= d.at) {
        this.live.delete(req);
        d.expire();
      }
    }
  }

  /** Closes every connection, idle or in flight. */
  close(): void {
    this.closed = true;
    if (this.sweeper) clearInterval(this.sweeper);
    for (const r of this.live.keys()) r.destroy();
    this.live.clear();
    this.agent.destroy();
  }
}
