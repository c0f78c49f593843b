// A quick start against `make run`'s cluster (127.0.0.1:8081-8083):
//   make -C clients/typescript build && node clients/typescript/example.mjs
// SNOWFLAKED_NODES=host:port,… points it elsewhere.
import { Client, Layout, NoNodeError, RejectedError } from "./dist/src/index.js";

const nodes = (process.env.SNOWFLAKED_NODES ?? "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083").split(",");
const client = new Client({ nodes });
try {
  const id = await client.nextId({ signal: AbortSignal.timeout(1000) }); // a bigint
  console.log("id      ", id, Layout.DEFAULT.decode(id));
  console.log("ids     ", await client.nextIds(3));
  console.log("uuid    ", await client.nextUuid());
  console.log("segment ", await client.nextSegments("demo", 3)); // make run creates the tag "demo"
  // 64 concurrent callers share a few /ids requests.
  const many = await Promise.all(Array.from({ length: 64 }, () => client.nextId()));
  console.log("64 ids  ", new Set(many).size, "distinct");
  try {
    await client.nextSegment("no-such-tag");
  } catch (e) {
    if (e instanceof RejectedError) console.log("rejected", e.status, e.code);
    else throw e;
  }
} catch (e) {
  if (e instanceof NoNodeError) for (const cause of e.causes) console.error("node failed:", cause.message);
  throw e;
} finally {
  client.close();
}
