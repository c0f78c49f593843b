/**
 * snowflaked: the TypeScript client of the snowflaked ID service.
 *
 * ```ts
 * import { Client } from "snowflaked";
 * const c = new Client({ nodes: ["127.0.0.1:8081"] });
 * const id: bigint = await c.nextId();
 * c.close();
 * ```
 *
 * @module
 */
export { Client, defaults, MAX_COUNT, MAX_TAG_LEN } from "./client.js";
export type { ClientOptions, BootstrapOptions, CallOptions, Bounds, SegmentTextOptions } from "./client.js";
export { SnowflakedError, NoNodeError, RejectedError, ClosedError, ConfigError } from "./errors.js";
export { Layout, decode } from "./layout.js";
export { ENCODINGS, EncodingError, encodedWidth, encodeId, decodeId, encodeUuid, decodeUuid } from "./encoding.js";
export type { IdEncoding, EncodingErrorKind } from "./encoding.js";
export type { Decoded, LayoutOptions } from "./layout.js";
export type { TlsOptions } from "./transport.js";
