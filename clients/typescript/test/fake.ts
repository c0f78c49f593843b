// A fake snowflaked node on 127.0.0.1 for the tests: it answers as a
// handler says and records every request.
import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo } from "node:net";

export interface Seen {
  url: string;
  auth: string | undefined;
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, node: FakeNode) => void | Promise<void>;

let next = 1n << 60n; // IDs beyond 2^53: a number would lose them

/** n increasing IDs, one a line, as a node answers /ids. */
export function idsBody(n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(String(next++));
  return out.join("\n") + "\n";
}

/** The count asked for by a request's URL. */
export function countOf(url: string | undefined): number {
  return Number(new URL(url ?? "/", "http://x").searchParams.get("count"));
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

export function apiError(res: http.ServerResponse, status: number, code: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): void {
  json(res, status, { error: { code, message: `${code} from the fake`, ...extra } }, headers);
}

/** Answers /ids and /segment/… with the count asked, /uuids with UUIDs. */
export const serveIds: Handler = (req, res) => {
  const n = countOf(req.url);
  if (req.url?.startsWith("/uuids")) {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const h = (next++).toString(16).padStart(20, "0");
      out.push(`01900000-0000-7${h.slice(0, 3)}-8${h.slice(3, 6)}-${h.slice(8, 20)}`);
    }
    res.end(out.join("\n") + "\n");
    return;
  }
  res.end(idsBody(n));
};

export class FakeNode {
  readonly seen: Seen[] = [];
  handler: Handler;
  private readonly server: http.Server;
  private readonly sockets = new Set<import("node:net").Socket>();
  addr = "";

  constructor(handler: Handler = serveIds, tls?: https.ServerOptions) {
    this.handler = handler;
    const listener = (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.seen.push({ url: req.url ?? "", auth: req.headers.authorization });
      void this.handler(req, res, this);
    };
    this.server = tls ? https.createServer(tls, listener) : http.createServer(listener);
    this.server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
    this.server.on("secureConnection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The connections open to this node now. */
  connections(): number {
    return this.sockets.size;
  }

  /** The requests whose path starts with prefix. */
  count(prefix: string): number {
    return this.seen.filter((s) => s.url.startsWith(prefix)).length;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Starts k fake nodes with the handler. */
export async function nodes(k: number, handler: Handler = serveIds): Promise<FakeNode[]> {
  return Promise.all(Array.from({ length: k }, () => new FakeNode(handler).start()));
}

/** A port nothing listens on (bound, then closed). */
export async function deadAddr(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

/** Waits until cond holds, checking every 5 ms, at most ms; false when it never did. */
export async function until(cond: () => boolean, ms = 2000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}
