/**
 * The errors of the snowflaked client. Every error the client throws for a
 * node's answer, a missing node, a closed client or a bad argument is a
 * {@link SnowflakedError}; a call whose `signal` aborted first rejects with
 * the signal's own reason instead (a `TimeoutError` `DOMException` for
 * `AbortSignal.timeout(ms)`).
 *
 * @module
 */

/** The base class of the client's errors. */
export class SnowflakedError extends Error {
  /** @param message what went wrong, for people. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * No node could serve the call: every node tried failed (at most
 * `attempts` a batch), or none was left to try. {@link NoNodeError.causes}
 * holds each node's failure, naming it.
 */
export class NoNodeError extends SnowflakedError {
  /** What the call asked for ("IDs", "dense IDs of orders", "the cluster's node list"). */
  readonly what: string;
  /** Each node's failure (this call's, then the last failure of each other node known to be down). */
  readonly causes: readonly Error[];
  /** The nodes of the client's subset that were neither asked nor down. */
  readonly notTried: readonly string[];

  /**
   * @param what what the call asked for.
   * @param causes each node's failure.
   * @param notTried the nodes neither asked nor down.
   */
  constructor(what: string, causes: readonly Error[], notTried: readonly string[] = []) {
    const parts = causes.map((c) => c.message).concat(notTried.map((n) => `${n}: not tried`));
    if (parts.length === 0) parts.push("no node is known (the node list is empty)");
    super(`no snowflaked node available${what ? ` for ${what}` : ""}: ${parts.join("; ")}`, {
      cause: causes[causes.length - 1],
    });
    this.what = what;
    this.causes = causes;
    this.notTried = notTried;
  }
}

/**
 * A request refused whichever node gets it: a node's 4xx other than a stale
 * address's 404 (`unknown_tag`, `gene_off`, `invalid_count`,
 * `token_required`, `token_invalid`, …), or the client's own refusal of a
 * bad argument before asking any node (then `status` is 0 and `node` is
 * empty). Never retried on another node.
 */
export class RejectedError extends SnowflakedError {
  /** The node that answered; "" when the client refused the call itself. */
  readonly node: string;
  /** The node's HTTP status; 0 when the client refused the call itself. */
  readonly status: number;
  /** The API's error code (e.g. `unknown_tag`); "" when the answer had none. */
  readonly code: string;
  /** With `invalid_count`: the largest count the node accepts (its `--max-batch`), when it names one; else undefined. */
  readonly max: number | undefined;
  /** With `invalid_count` from a tag's `--max-count`: the tag's per-request ceiling; else undefined. */
  readonly tagMax: number | undefined;
  /** The node's (or the client's) message, for people. */
  readonly detail: string;

  /** @param f the refusal's fields. */
  constructor(f: { node?: string; status?: number; code?: string; message: string; max?: number; tagMax?: number }) {
    const node = f.node ?? "";
    const status = f.status ?? 0;
    const code = f.code ?? "";
    super(
      `request rejected by snowflaked: ${node ? `${node}: ${status} ` : ""}${code ? `${code}: ` : ""}${f.message}`,
    );
    this.node = node;
    this.status = status;
    this.code = code;
    this.max = f.max;
    this.tagMax = f.tagMax;
    this.detail = f.message;
  }
}

/** The client was closed: by {@link Client.close} before or during the call. */
export class ClosedError extends SnowflakedError {
  /** The one message of a closed client. */
  constructor() {
    super("snowflaked client closed");
  }
}

/** The client's options are wrong (thrown by the constructor and {@link Client.bootstrap}). */
export class ConfigError extends SnowflakedError {}
