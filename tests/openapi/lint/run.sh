#!/usr/bin/env bash
# Checks docs/openapi.yaml with the tools other ecosystems use (make test):
#  1. redocly lint with the recommended rules (redocly.yaml): no error, and
#     no warning but those accepted-warnings.txt lists (with why);
#  2. openapi-typescript generates its types, and tsc --strict compiles
#     them with usage.ts, a small user of them.
# The tools are pinned in package.json and package-lock.json; npm ci runs
# when node_modules is missing or older than the lockfile. Needs Node
# 18.17 or later and npm. OPENAPI_DOC=file checks another document.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
doc=${OPENAPI_DOC:-$(cd "$here/../../.." && pwd)/docs/openapi.yaml}
cd "$here"

command -v node >/dev/null && command -v npm >/dev/null || { echo "$0: needs node (18.17 or later) and npm" >&2; exit 1; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>18||(a==18&&b>=17)?0:1)' ||
	{ echo "$0: node $(node --version): needs 18.17 or later" >&2; exit 1; }
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
bin=$here/node_modules/.bin
# No telemetry, no update check: make test must not call out.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. Lint.
"$bin/redocly" lint --config redocly.yaml --format=json "$doc" >"$tmp/lint.json" 2>"$tmp/lint.err" || true
node - "$tmp/lint.json" accepted-warnings.txt <<'JS' || { cat "$tmp/lint.err" >&2; exit 1; }
const fs = require("fs");
const [report, acceptedFile] = process.argv.slice(2);
let r;
try { r = JSON.parse(fs.readFileSync(report, "utf8")); } catch (e) { console.error("redocly lint gave no report: " + e.message); process.exit(1); }
const accepted = new Set(fs.readFileSync(acceptedFile, "utf8").split("\n").map(l => l.trim()).filter(l => l && !l.startsWith("#")));
const seen = new Set();
let bad = 0;
for (const p of r.problems) {
  const key = p.ruleId + " " + ((p.location && p.location[0] && p.location[0].pointer) || "");
  if (p.severity === "warn" && accepted.has(key)) { seen.add(key); continue; }
  bad++;
  console.error(`${p.severity} ${key}: ${p.message}`);
}
for (const k of accepted) if (!seen.has(k)) { bad++; console.error(`accepted-warnings.txt lists "${k}", which redocly no longer reports: drop the line`); }
console.log(`redocly lint ${r.version} (recommended): ${r.totals.errors} errors, ${r.totals.warnings} warnings (${seen.size} accepted, accepted-warnings.txt)`);
process.exit(bad ? 1 : 0);
JS

# 2. Types.
"$bin/openapi-typescript" "$doc" -o "$tmp/schema.ts" >"$tmp/gen.log" 2>&1 || { cat "$tmp/gen.log" >&2; exit 1; }
cp usage.ts "$tmp/usage.ts"
"$bin/tsc" --strict --noEmit --noUnusedLocals --exactOptionalPropertyTypes --noUncheckedIndexedAccess \
	--target ES2020 --module commonjs --moduleResolution node10 "$tmp/schema.ts" "$tmp/usage.ts"
echo "openapi-typescript $(node -p 'require("openapi-typescript/package.json").version'), tsc $(node -p 'require("typescript/package.json").version') --strict: the types compile"
