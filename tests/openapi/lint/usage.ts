// A tiny user of the types openapi-typescript generates from
// docs/openapi.yaml: run.sh compiles it with them under tsc --strict, so
// the generated types compile and say what the document says (a typo in a
// path, status or field, or a type that widened to any, fails the build).
import type { components, operations, paths } from "./schema";

// GET /ids?count=N&format=json: a JSON array of decimal strings.
type IDsQuery = paths["/ids"]["get"]["parameters"]["query"];
const query: IDsQuery = { count: 3, format: "json" };
// @ts-expect-error: format is text or json
const badFormat: IDsQuery = { count: 3, format: "xml" };
// @ts-expect-error: count is required
const noCount: IDsQuery = {};

type IDs200 = paths["/ids"]["get"]["responses"]["200"];
const ids: IDs200["content"]["application/json"] = ["1", "2"];
// @ts-expect-error: the IDs are strings, not numbers (doubles lose 64-bit IDs)
const idsAsNumbers: IDs200["content"]["application/json"] = [1, 2];

// GET /id?format=json: {"id": …, "id_str": "…"}; read id_str.
type OneID = paths["/id"]["get"]["responses"]["200"]["content"]["application/json"];
const one: OneID = { id: 1, id_str: "1" };
const idStr: string = one.id_str;

// A 503's Retry-After header and body.
type IDs503 = paths["/ids"]["get"]["responses"]["503"];
const retryAfter: IDs503["headers"]["Retry-After"] = 1;
const unavailable: IDs503["content"]["application/json"] = {
  error: { code: "batch_timeout", message: "m", reason: "r", state: "in_service" },
};

// Error codes are the document's enum.
const code: components["schemas"]["ErrorCode"] = "token_required";
// @ts-expect-error: not an error code of the API
const noCode: components["schemas"]["ErrorCode"] = "no_such_code";

// A segment tag is a path parameter; the Leaf path takes ?token=.
const seg: paths["/segment/{tag}"]["get"]["parameters"]["path"] = { tag: "orders" };
const leaf: operations["leafSegment"]["parameters"]["query"] = { token: "t" };

export const used = [query, badFormat, noCount, ids, idsAsNumbers, idStr, retryAfter, unavailable, code, noCode, seg, leaf];
