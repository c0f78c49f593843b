import { ConfigError } from "./errors.js";

/** The fields of an ID, as a node's `GET /decode/{id}` reports them. */
export interface Decoded {
  /** The start of the ID's tick, in Unix milliseconds. */
  timestampMs: number;
  /** The worker ID of the node that issued it. */
  workerId: number;
  /** The per-tick counter (without the gene bits when the layout has some). */
  sequence: number;
  /** The gene (the low `geneBits` bits); undefined when the layout has no gene bits. */
  gene?: number;
}

/** The options of a {@link Layout}; each absent field is the default layout's. */
export interface LayoutOptions {
  /** Bits of the tick count (default 41). */
  timeBits?: number;
  /** Bits of the worker ID (default 10). */
  workerBits?: number;
  /** Bits of the sequence field, gene bits included (default 12). */
  sequenceBits?: number;
  /** The low bits of the sequence field that carry a gene (`--gene-bits`, default 0). */
  geneBits?: number;
  /** The epoch in Unix milliseconds (default 1704067200000: 2024-01-01T00:00:00Z). */
  epoch?: number;
  /** The length of a tick in milliseconds (`--time-unit`, default 1). */
  unit?: number;
}

/**
 * The bit layout of a cluster's IDs (a node's `/clock` reports its
 * `layout`, `epoch` and `time_unit`), to decode IDs without asking a node,
 * as `GET /decode/{id}` does.
 */
export class Layout {
  /** Bits of the tick count. */
  readonly timeBits: number;
  /** Bits of the worker ID. */
  readonly workerBits: number;
  /** Bits of the sequence field, gene bits included. */
  readonly sequenceBits: number;
  /** Gene bits (the low bits of the sequence field). */
  readonly geneBits: number;
  /** The epoch, Unix milliseconds. */
  readonly epoch: number;
  /** Milliseconds per tick. */
  readonly unit: number;

  /** The default layout: 41/10/12, no gene bits, epoch 2024-01-01T00:00:00Z, 1 ms ticks. */
  static readonly DEFAULT = new Layout();

  /** @param o the layout's fields; absent ones are the default's. Throws {@link ConfigError} when they do not make a 63-bit layout. */
  constructor(o: LayoutOptions = {}) {
    this.timeBits = o.timeBits ?? 41;
    this.workerBits = o.workerBits ?? 10;
    this.sequenceBits = o.sequenceBits ?? 12;
    this.geneBits = o.geneBits ?? 0;
    this.epoch = o.epoch ?? 1704067200000;
    this.unit = o.unit ?? 1;
    for (const [k, v] of Object.entries(this)) {
      if (!Number.isSafeInteger(v) || v < 0) throw new ConfigError(`layout ${k} ${v}: want a whole number ≥ 0`);
    }
    if (this.timeBits + this.workerBits + this.sequenceBits !== 63) {
      throw new ConfigError(
        `layout ${this.timeBits}/${this.workerBits}/${this.sequenceBits}: the three fields must take 63 bits`,
      );
    }
    if (this.geneBits > this.sequenceBits) throw new ConfigError(`layout: ${this.geneBits} gene bits exceed the sequence's ${this.sequenceBits}`);
    if (this.unit < 1) throw new ConfigError(`layout unit ${this.unit}: want at least 1 ms`);
  }

  /** Decodes an ID: its tick's time, worker ID, counter and gene. Throws a RangeError for a negative ID or one past 2^63−1. */
  decode(id: bigint): Decoded {
    if (typeof id !== "bigint" || id < 0n || id > 0x7fffffffffffffffn) {
      throw new RangeError(`decode ${String(id)}: want a bigint from 0 to 2^63-1`);
    }
    const seq = BigInt(this.sequenceBits);
    const gene = BigInt(this.geneBits);
    const tick = id >> BigInt(this.workerBits + this.sequenceBits);
    const out: Decoded = {
      timestampMs: Number(BigInt(this.epoch) + tick * BigInt(this.unit)),
      workerId: Number((id >> seq) & ((1n << BigInt(this.workerBits)) - 1n)),
      sequence: Number((id >> gene) & ((1n << (seq - gene)) - 1n)),
    };
    if (this.geneBits > 0) out.gene = Number(id & ((1n << gene) - 1n));
    return out;
  }
}

/** Decodes an ID with the default layout (see {@link Layout.decode}). */
export function decode(id: bigint, layout: Layout = Layout.DEFAULT): Decoded {
  return layout.decode(id);
}
