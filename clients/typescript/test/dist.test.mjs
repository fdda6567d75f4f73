// The committed dist/ is what src/ compiles to: recompiled into a temporary directory with the
// installed TypeScript and compared file by file. Skipped without `npm ci` (the other tests
// run the committed JavaScript and need nothing installed).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const missing = ["typescript", "@openai/agents"].filter(
  (name) => !existsSync(join(root, "node_modules", name, "package.json")));

test("dist/ is src/ compiled", { skip: missing.length > 0 && `not installed: ${missing.join(
  ", ")} (npm ci)` }, (t) => {
  const out = mkdtempSync(join(tmpdir(), "callwarden-dist-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  try {
    execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json"), "--outDir", out],
      { cwd: root, encoding: "utf8", stdio: "pipe", timeout: 300_000 });
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`);
  }
  const dist = join(root, "dist");
  assert.deepEqual(readdirSync(dist).sort(), readdirSync(out).sort(), "the files of dist/");
  for (const name of readdirSync(out)) {
    assert.equal(readFileSync(join(dist, name), "utf8"), readFileSync(join(out, name), "utf8"),
      `dist/${name} is out of date: run \`npm run build\` in clients/typescript`);
  }
});
