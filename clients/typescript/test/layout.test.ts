import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, Layout, decode } from "../src/index.js";

test("decode with the default layout, as GET /decode/{id} answers", () => {
  // docs/api.md's examples.
  assert.deepEqual(decode(382690140893499392n), { timestampMs: 1795307639628, workerId: 5, sequence: 0 });
  assert.deepEqual(Layout.DEFAULT.decode(251761843565476882n), { timestampMs: 1764091901014, workerId: 891, sequence: 3090 });
});

test("decode with gene bits: the counter without them, and the gene", () => {
  const l = new Layout({ geneBits: 4 });
  const id = (5n << 22n) | (3n << 12n) | (9n << 4n) | 6n;
  assert.deepEqual(l.decode(id), { timestampMs: 1704067200000 + 5, workerId: 3, sequence: 9, gene: 6 });
});

test("decode with a coarse unit and another split", () => {
  const l = new Layout({ timeBits: 39, workerBits: 8, sequenceBits: 16, epoch: 1_000, unit: 10 });
  const id = (7n << 24n) | (255n << 16n) | 65535n;
  assert.deepEqual(l.decode(id), { timestampMs: 1_070, workerId: 255, sequence: 65535 });
  assert.equal(l.decode(0x7fffffffffffffffn).timestampMs, 1_000 + (2 ** 39 - 1) * 10);
});

test("a bad layout or ID is refused", () => {
  assert.throws(() => new Layout({ timeBits: 40 }), ConfigError);
  assert.throws(() => new Layout({ geneBits: 13 }), ConfigError);
  assert.throws(() => Layout.DEFAULT.decode(-1n), RangeError);
  assert.throws(() => Layout.DEFAULT.decode(1n << 63n), RangeError);
});
