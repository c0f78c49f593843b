import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, NoNodeError } from "../src/index.js";
import { FakeNode, serveIds } from "./fake.js";

/** Every test ends within this, whatever the client does. */
const T = { timeout: 20_000 };

let dir = "";
let ok = true;
function openssl(...args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
}
function cert(name: string, cn: string, ext: string, ca: string): void {
  openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${name}-key.pem`, "-subj", `/CN=${cn}`, "-out", `${name}.csr`);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.pem`, "-CAkey", `${ca}-key.pem`, "-CAcreateserial", "-days", "2", "-extfile", `${name}.ext`, "-out", `${name}.pem`);
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), "snowflaked-ts-tls-"));
  try {
    for (const ca of ["ca", "other-ca"]) {
      openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${ca}-key.pem`, "-subj", `/CN=${ca}`, "-days", "2", "-out", `${ca}.pem`);
    }
    cert("node", "node", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n", "ca");
    cert("client", "app", "extendedKeyUsage=clientAuth\n", "ca");
  } catch {
    ok = false; // no openssl: the tests below skip
  }
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const p = (f: string) => join(dir, f);

test("TLS: a CA and a client certificate from PEM files or PEM text", T, async (t) => {
  if (!ok) return t.skip("openssl is not installed");
  const node = await new FakeNode(serveIds, {
    cert: readFileSync(p("node.pem")),
    key: readFileSync(p("node-key.pem")),
    ca: readFileSync(p("ca.pem")),
    requestCert: true,
    rejectUnauthorized: true,
  }).start();
  try {
    const byPath = new Client({ nodes: [node.addr], tls: { ca: p("ca.pem"), cert: p("client.pem"), key: p("client-key.pem") } });
    const byText = new Client({
      nodes: [node.addr],
      tls: { ca: readFileSync(p("ca.pem"), "utf8"), cert: readFileSync(p("client.pem"), "utf8"), key: readFileSync(p("client-key.pem"), "utf8") },
    });
    try {
      assert.equal(typeof (await byPath.nextId()), "bigint");
      assert.equal((await byText.nextIds(3)).length, 3);
    } finally {
      byPath.close();
      byText.close();
    }
    for (const tls of [{ ca: p("ca.pem") }, { ca: p("other-ca.pem"), cert: p("client.pem"), key: p("client-key.pem") }]) {
      const c = new Client({ nodes: [node.addr], tls });
      try {
        await assert.rejects(c.nextId(), NoNodeError);
      } finally {
        c.close();
      }
    }
  } finally {
    await node.stop();
  }
});
