import { test } from "node:test";
import assert from "node:assert/strict";
import { ENCODINGS, EncodingError, decodeId, decodeUuid, encodeId, encodeUuid, encodedWidth, type IdEncoding } from "../src/index.js";

const ALPHABETS: Record<IdEncoding, string> = {
  base62: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
  base58: "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
  base36: "0123456789abcdefghijklmnopqrstuvwxyz",
  base32: "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
};

const U = "019abc12-3456-7def-8123-456789abcdef";
const MAX63 = (1n << 63n) - 1n;
const MAX53 = (1n << 53n) - 1n;

// Computed once with Python's int arithmetic (the same literals are in the
// Java and Python clients' tests): value, bits, encoding, string.
const VECTORS: [bigint, number, IdEncoding, string][] = [
  [0n, 63, "base62", "00000000000"],
  [1n, 63, "base62", "00000000001"],
  [MAX63, 63, "base62", "AzL8n0Y58m7"],
  [MAX53, 63, "base62", "00fFgnDxSe7"],
  [MAX53, 53, "base62", "fFgnDxSe7"],
  [0n, 63, "base58", "11111111111"],
  [1n, 63, "base58", "11111111112"],
  [MAX63, 63, "base58", "NQm6nKp8qFC"],
  [MAX53, 63, "base58", "12DLNrMSKug"],
  [MAX53, 53, "base58", "2DLNrMSKug"],
  [0n, 63, "base36", "0000000000000"],
  [1n, 63, "base36", "0000000000001"],
  [MAX63, 63, "base36", "1y2p0ij32e8e7"],
  [MAX53, 63, "base36", "002gosa7pa2gv"],
  [MAX53, 53, "base36", "2gosa7pa2gv"],
  [0n, 63, "base32", "0000000000000"],
  [1n, 63, "base32", "0000000000001"],
  [MAX63, 63, "base32", "7ZZZZZZZZZZZZ"],
  [MAX53, 63, "base32", "007ZZZZZZZZZZ"],
  [MAX53, 53, "base32", "7ZZZZZZZZZZ"],
];
const UUID_VECTORS: Record<IdEncoding, string> = {
  base62: "031hmrl3sC1oTeZjz9D9EV",
  base58: "1CVV1KiMCivT7E6Ego3omp",
  base36: "03f3ogm1xwf5ylz1jz1p0clwv",
  base32: "01KAY14D2PFQQR28T5CY4TQKFF",
};

/** The encoding from first principles with BigInt: big-endian digits, padded to the fewest that hold 2^bits. */
function reference(v: bigint, e: IdEncoding, bits: number): string {
  const a = ALPHABETS[e];
  const base = BigInt(a.length);
  let w = 0;
  for (let p = 1n; p < 1n << BigInt(bits); p *= base) w++;
  let out = "";
  for (let i = 0; i < w; i++) {
    out = a[Number(v % base)] + out;
    v /= base;
  }
  return out;
}

function uuidOf(v: bigint): string {
  const h = v.toString(16).padStart(32, "0");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function throwsKind(f: () => unknown, kind: string): EncodingError {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof EncodingError, String(e));
    assert.equal(e.kind, kind, e.message);
    return e;
  }
  assert.fail(`no ${kind} error`);
}

test("widths", () => {
  const want: Record<number, number[]> = { 63: [11, 11, 13, 13], 53: [9, 10, 11, 11], 128: [22, 22, 25, 26] };
  for (const [bits, ws] of Object.entries(want)) {
    assert.deepEqual(["base62", "base58", "base36", "base32"].map((e) => encodedWidth(e as IdEncoding, Number(bits))), ws);
  }
  assert.equal(encodedWidth("base62"), 11);
});

test("ID vectors", () => {
  for (const [v, bits, e, s] of VECTORS) {
    assert.equal(reference(v, e, bits), s, `${v} ${bits} ${e}`);
    assert.equal(encodeId(v, e, bits), s);
    assert.equal(decodeId(s, e, bits), v);
  }
});

test("UUID vectors", () => {
  for (const e of ENCODINGS) {
    const s = UUID_VECTORS[e];
    assert.equal(reference(BigInt(`0x${U.replace(/-/g, "")}`), e, 128), s);
    assert.equal(encodeUuid(U, e), s);
    assert.equal(encodeUuid(U.toUpperCase(), e), s);
    assert.equal(decodeUuid(s, e), U);
    assert.equal(decodeUuid(reference(0n, e, 128), e), "00000000-0000-0000-0000-000000000000");
    assert.equal(decodeUuid(reference((1n << 128n) - 1n, e, 128), e), "ffffffff-ffff-ffff-ffff-ffffffffffff");
  }
});

test("case rules", () => {
  assert.equal(decodeId("1Y2P0IJ32E8E7", "base36"), MAX63);
  assert.equal(decodeId("7zzzzzzzzzzzz", "base32"), MAX63);
  assert.equal(decodeId("OoOoOoOoOoOoI", "base32"), 1n); // Crockford: O as 0, I as 1
  for (const one of ["l", "L", "i"]) assert.equal(decodeId(`000000000000${one}`, "base32"), 1n);
  assert.equal(decodeId("0000000000a", "base62"), 36n);
  assert.equal(decodeId("0000000000A", "base62"), 10n);
});

test("errors: width, character (first), range, encoding", () => {
  for (const e of ENCODINGS) {
    const w = encodedWidth(e);
    throwsKind(() => decodeId("1".repeat(w - 1), e), "width");
    throwsKind(() => decodeId("1".repeat(w + 1), e), "width");
    throwsKind(() => decodeId("", e), "width");
    throwsKind(() => decodeUuid("1".repeat(w), e), "width");
  }
  assert.match(throwsKind(() => decodeId("0000000000", "base62"), "width").message, /11/);
  for (const [e, bad] of [["base62", "-"], ["base58", "0"], ["base58", "O"], ["base58", "I"], ["base58", "l"], ["base36", "_"], ["base32", "U"], ["base32", "u"]] as [IdEncoding, string][]) {
    const s = "1".repeat(encodedWidth(e) - 2) + bad + "1";
    const err = throwsKind(() => decodeId(s, e), "character");
    assert.equal(err.index, s.length - 2);
    assert.ok(err.message.includes(JSON.stringify(bad)), err.message);
  }
  throwsKind(() => decodeId("0000000000é", "base62"), "character");
  throwsKind(() => decodeId("-", "base62"), "character");
  throwsKind(() => decodeUuid("0".repeat(30) + "!", "base36"), "character");
  throwsKind(() => decodeId("zzzzzzzzzzz", "base62"), "range");
  throwsKind(() => decodeId("8000000000000", "base32"), "range");
  throwsKind(() => decodeId("1y2p0ij32e8e8", "base36"), "range");
  throwsKind(() => decodeId("NQm6nKp8qFD", "base58"), "range");
  throwsKind(() => decodeId("80000000000", "base32", 53), "range");
  throwsKind(() => decodeUuid("zzzzzzzzzzzzzzzzzzzzzz", "base62"), "range");
  throwsKind(() => encodeId(1n << 63n, "base62"), "range");
  throwsKind(() => encodeId(-1n, "base62"), "range");
  throwsKind(() => encodeId(1n << 53n, "base36", 53), "range");
  throwsKind(() => encodeId(1n, "base64" as IdEncoding), "encoding");
  throwsKind(() => decodeId("1", "BASE62" as IdEncoding), "encoding");
  assert.throws(() => encodeId(1 as unknown as bigint, "base62"), TypeError);
  assert.throws(() => encodeId(1n, "base62", 0), RangeError);
});

test("10,000 random values a size round-trip and sort as the numbers", () => {
  let seed = 46n;
  const rand = (bits: number): bigint => {
    let v = 0n;
    for (let got = 0; got < bits; got += 32) {
      seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
      v = (v << 32n) | (seed >> 32n);
    }
    return v & ((1n << BigInt(bits)) - 1n);
  };
  for (const bits of [63, 53, 128]) {
    for (const e of ENCODINGS) {
      const vals: bigint[] = [0n, (1n << BigInt(bits)) - 1n];
      for (let i = 0; i < 10_000; i++) vals.push(rand([bits, bits, 8, 32][i % 4] as number));
      const enc = bits === 128 ? (v: bigint) => encodeUuid(uuidOf(v), e) : (v: bigint) => encodeId(v, e, bits);
      const dec = bits === 128 ? (s: string) => BigInt(`0x${decodeUuid(s, e).replace(/-/g, "")}`) : (s: string) => decodeId(s, e, bits);
      const w = encodedWidth(e, bits);
      const strs = vals.map(enc);
      strs.forEach((s, i) => {
        assert.equal(s.length, w);
        assert.equal(dec(s), vals[i]);
      });
      const byString = [...strs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const byNumber = [...vals].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(enc);
      assert.deepEqual(byString, byNumber, `${bits} ${e}`);
    }
  }
});
