/**
 * String IDs: the fixed-width radix encodings of a node's `format=base62`
 * (`base58`, `base36`, `base32`), for snowflake IDs, dense IDs and UUIDs.
 *
 * Each alphabet is in ASCII order and every string of one kind of value has
 * the same width, so strings sort as their numbers do. The width is the
 * fewest digits d with base^d ≥ 2^bits: `bits` is the layout's time + worker +
 * sequence bits for a snowflake ID (63 by default, 53 for `js53`), 63 for a
 * dense ID, 128 for a UUID.
 *
 * ```ts
 * encodeId(2n ** 63n - 1n, "base62"); // "AzL8n0Y58m7"
 * decodeId("AzL8n0Y58m7", "base62"); // 9223372036854775807n
 * ```
 *
 * @module
 */
import { SnowflakedError } from "./errors.js";

/** The encodings, as a node's `format` names them. */
export type IdEncoding = "base62" | "base58" | "base36" | "base32";

/** The alphabets, index 0 first, each in ASCII order. */
export const ALPHABETS: Readonly<Record<IdEncoding, string>> = {
  base62: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
  base58: "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
  base36: "0123456789abcdefghijklmnopqrstuvwxyz",
  base32: "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
};

/** The encodings' names. */
export const ENCODINGS: readonly IdEncoding[] = ["base62", "base58", "base36", "base32"];

/** What is wrong: the width, a character, a value beyond the bits, or no such encoding. */
export type EncodingErrorKind = "width" | "character" | "range" | "encoding";

/**
 * A string that is not a value of the encoding, or a value that does not fit
 * the bits. A string with a bad character is `"character"` whatever its
 * width: characters are checked first, as a node does.
 */
export class EncodingError extends SnowflakedError {
  /** What is wrong. */
  readonly kind: EncodingErrorKind;
  /** The encoding's name. */
  readonly encoding: string;
  /** With `"character"`: the index (from 0) of the first bad character; else undefined. */
  readonly index: number | undefined;

  /** @param message for people; @param f the fields. */
  constructor(message: string, f: { kind: EncodingErrorKind; encoding: string; index?: number }) {
    super(message);
    this.kind = f.kind;
    this.encoding = f.encoding;
    this.index = f.index;
  }
}

/** Per encoding: char code → digit, -1 outside the alphabet (with the case rules). */
const DIGITS: Record<IdEncoding, Int8Array> = (() => {
  const out = {} as Record<IdEncoding, Int8Array>;
  for (const e of ENCODINGS) {
    const t = new Int8Array(128).fill(-1);
    const a = ALPHABETS[e];
    for (let i = 0; i < a.length; i++) {
      const c = a.charCodeAt(i);
      t[c] = i;
      if (e === "base36" || e === "base32") {
        t[a.charAt(i).toUpperCase().charCodeAt(0)] = i;
        t[a.charAt(i).toLowerCase().charCodeAt(0)] = i;
      }
    }
    if (e === "base32") {
      for (const ch of "IiLl") t[ch.charCodeAt(0)] = 1; // Crockford: I and L read as 1, O as 0
      for (const ch of "Oo") t[ch.charCodeAt(0)] = 0;
    }
    out[e] = t;
  }
  return out;
})();

function alphabet(e: unknown): string {
  if (typeof e === "string" && Object.prototype.hasOwnProperty.call(ALPHABETS, e)) return ALPHABETS[e as IdEncoding];
  throw new EncodingError(`encoding ${JSON.stringify(e)}: want one of ${ENCODINGS.join(", ")}`, { kind: "encoding", encoding: String(e) });
}

function checkBits(bits: number): void {
  if (!Number.isSafeInteger(bits) || bits < 1 || bits > 128) throw new RangeError(`bits ${bits}: want 1..128`);
}

/**
 * The width of the encoding's strings for values of `bits` bits (63: 11, 11,
 * 13, 13 for base62, base58, base36, base32; 128: 22, 22, 25, 26).
 */
export function encodedWidth(encoding: IdEncoding, bits = 63): number {
  const base = BigInt(alphabet(encoding).length);
  checkBits(bits);
  const top = 1n << BigInt(bits);
  let d = 0;
  for (let p = 1n; p < top; p *= base) d++;
  return d;
}

function quote(s: string): string {
  return JSON.stringify(s.length > 40 ? s.slice(0, 40) : s) + (s.length > 40 ? "…" : "");
}

function encode(v: bigint, e: IdEncoding, bits: number, what: string): string {
  const a = alphabet(e);
  checkBits(bits);
  if (v < 0n || v >> BigInt(bits) !== 0n) {
    throw new EncodingError(`${e}: ${what} ${v} does not fit ${bits} bits (0 to 2^${bits}-1)`, { kind: "range", encoding: e });
  }
  const base = BigInt(a.length);
  const w = encodedWidth(e, bits);
  const out = new Array<string>(w);
  for (let i = w - 1; i >= 0; i--) {
    out[i] = a.charAt(Number(v % base));
    v /= base;
  }
  return out.join("");
}

function decode(s: string, e: IdEncoding, bits: number, what: string): bigint {
  const a = alphabet(e);
  checkBits(bits);
  if (typeof s !== "string") throw new TypeError(`decode: want a string, got ${typeof s}`);
  const d = DIGITS[e];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || (d[c] as number) < 0) {
      const ch = String.fromCodePoint(s.codePointAt(i) as number);
      throw new EncodingError(`${e} ${quote(s)}: ${JSON.stringify(ch)} at position ${i + 1} is not a ${e} digit`, { kind: "character", encoding: e, index: i });
    }
  }
  const w = encodedWidth(e, bits);
  if (s.length !== w) throw new EncodingError(`${e} ${quote(s)} has ${s.length} characters, want ${w} for ${what}`, { kind: "width", encoding: e });
  const base = BigInt(a.length);
  let v = 0n;
  for (let i = 0; i < s.length; i++) v = v * base + BigInt(d[s.charCodeAt(i)] as number);
  if (v >> BigInt(bits) !== 0n) throw new EncodingError(`${e} ${quote(s)} is 2^${bits} or more: not ${what}`, { kind: "range", encoding: e });
  return v;
}

/**
 * An ID (snowflake or dense) in the encoding, in the width for `bits` bits
 * (the layout's time + worker + sequence bits; 63 by default). A negative ID
 * or one of more than `bits` bits is an {@link EncodingError} (`range`).
 */
export function encodeId(id: bigint, encoding: IdEncoding, bits = 63): string {
  if (typeof id !== "bigint") throw new TypeError(`encodeId: want a bigint, got ${typeof id}`);
  return encode(id, encoding, bits, "ID");
}

/**
 * The ID that `s` encodes: exactly the width for `bits` bits; base36 and
 * base32 in either case, base32 also reading I and L as 1 and O as 0. An
 * {@link EncodingError}: `character`, `width` or `range`.
 */
export function decodeId(s: string, encoding: IdEncoding, bits = 63): bigint {
  return decode(s, encoding, bits, `an ID of ${bits} bits`);
}

const UUID_TEXT = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A UUID (canonical text; its 16 bytes as a big-endian number) in the encoding: 22, 22, 25, 26 characters. */
export function encodeUuid(uuid: string, encoding: IdEncoding): string {
  if (typeof uuid !== "string" || !UUID_TEXT.test(uuid)) throw new TypeError(`encodeUuid: ${JSON.stringify(uuid)} is not a UUID in canonical text`);
  return encode(BigInt(`0x${uuid.replace(/-/g, "")}`), encoding, 128, "UUID");
}

/** The UUID that `s` encodes, in canonical text (lower case). An {@link EncodingError} as {@link decodeId}'s. */
export function decodeUuid(s: string, encoding: IdEncoding): string {
  const h = decode(s, encoding, 128, "a UUID").toString(16).padStart(32, "0");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
