// The README is true: its command table names exactly the commands the program has (with options they
// take), and its shell blocks run as written, in order, in bash, on a temporary database, each against
// the server the README starts. The test changes only what a shared test machine needs: the port (a free
// one for 3000), the PostgreSQL database name (a fresh one for `storefront`), and no `npm ci` (node_modules
// is installed; .ci/run does the fresh install). Blocks that run the test suite itself are not run.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import type { Command } from "commander";
import { buildProgram } from "../src/main.ts";
import { REPO } from "./helpers/cli.ts";
import { PG_ADMIN_URL, pgSkip } from "./helpers/harness.ts";
import { freePort } from "./helpers/server.ts";

const README = readFileSync(path.join(REPO, "README.md"), "utf8");

interface Block {
  heading: string;
  text: string;
}

/** The ```sh blocks with the `## ` section each is in. */
function shellBlocks(md: string): Block[] {
  const blocks: Block[] = [];
  let heading = "";
  const lines = md.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.startsWith("## ")) heading = lines[i]!.slice(3).trim();
    if (lines[i] === "```sh") {
      const body: string[] = [];
      for (i++; lines[i] !== "```"; i++) body.push(lines[i]!);
      blocks.push({ heading, text: body.join("\n") });
    }
  }
  return blocks;
}

function leafCommands(program: Command, prefix: string[] = []): Map<string, Command> {
  const out = new Map<string, Command>();
  for (const c of program.commands) {
    const p = [...prefix, c.name()];
    if (c.commands.length === 0) out.set(p.join(" "), c);
    for (const [k, v] of leafCommands(c, p)) out.set(k, v);
  }
  return out;
}

/** `plugins show\|versions NAME --store ID` → ["plugins show", "plugins versions"] and its options. */
function parseUsage(code: string): { commands: string[]; options: string[] } {
  const words = code.replace(/\\\|/g, "|").split(/\s+/);
  const path: string[] = [];
  for (const w of words) {
    if (!/^[a-z][a-z|-]*$/.test(w)) break;
    path.push(w);
  }
  const last = path.pop() ?? "";
  const commands = last.split("|").map((alt) => [...path, alt].join(" "));
  const options = [...code.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0]);
  return { commands, options };
}

test("the README's command table names every command the program has, each with options it takes", () => {
  const section = README.slice(README.indexOf("## Command line"), README.indexOf("\n## ", README.indexOf("## Command line") + 5));
  const lines = section.split("\n");
  const rows = lines.filter((l) => l.startsWith("| `"));
  // One table: a blank line between two rows ends it there, and Markdown shows the rest as a paragraph.
  const first = lines.findIndex((l) => l.startsWith("|"));
  const last = lines.findLastIndex((l) => l.startsWith("|"));
  const breaks = lines.slice(first, last + 1).filter((l) => !l.startsWith("|"));
  assert.deepEqual(breaks, [], "the command table is one table, with no line between its rows");
  const leaves = leafCommands(buildProgram());
  const documented = new Set<string>();
  for (const row of rows) {
    const firstCell = row.slice(1).split(/ (?<!\\)\| /)[0]!;
    for (const [, code] of firstCell.matchAll(/`([^`]+)`/g)) {
      const { commands, options } = parseUsage(code!);
      for (const name of commands) {
        const command = leaves.get(name);
        assert.ok(command, `README names "${name}", which is not a command`);
        documented.add(name);
        for (const option of options) assert.ok(command.options.some((o) => o.long === option), `README gives "${name}" the option ${option}, which it does not take`);
      }
    }
  }
  const missing = [...leaves.keys()].filter((name) => !documented.has(name));
  assert.deepEqual(missing, [], "commands missing from the README's table");
});

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The README blocks as one bash script: servers started in the background and waited for. */
function scriptOf(blocks: Block[], port: number, pgDatabase: string | null): { script: string; ran: string[]; skipped: string[] } {
  const ran: string[] = [];
  const skipped: string[] = [];
  const out = [
    "set -euo pipefail",
    "servers=()",
    'stop_servers() { for p in "${servers[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; servers=(); }',
    'wait_ready() { servers+=("$!"); for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return 0; sleep 0.1; done; echo "the server did not start:" >&2; cat "$SF_LOG" >&2; return 1; }',
    "trap stop_servers EXIT",
  ];
  for (const block of blocks) {
    const name = `${block.heading}: ${block.text.split("\n")[0]}`;
    if (/\bnpm (test|run check)\b/.test(block.text)) {
      skipped.push(`${name} (the test suite itself)`);
      continue;
    }
    let text = block.text.replaceAll("127.0.0.1:3000", `127.0.0.1:${port}`);
    if (block.heading === "PostgreSQL") {
      if (pgDatabase === null) {
        skipped.push(`${name} (no PostgreSQL)`);
        continue;
      }
      text = text.replace(/\bstorefront\b/g, pgDatabase);
    }
    text = text.replace(/\bnpm ci && /g, "");
    const lines = text.split("\n").map((line) => {
      const command = line.replace(/\s+#.*$/, "").trim();
      if (!/\bnpm start( &)?$/.test(command)) return line;
      // A server: in the background, in its own process group, after the previous one stopped.
      return `stop_servers; setsid bash -c ${shellQuote(command.replace(/ &$/, ""))} >>"$SF_LOG" 2>&1 & wait_ready`;
    });
    out.push(`echo "### ${name.replace(/["$`\\]/g, "")}"`, ...lines);
    ran.push(name);
  }
  return { script: out.join("\n") + "\n", ran, skipped };
}

test("every shell block of the README runs as written, in order, on a temporary database", { timeout: 600_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-readme-"));
  const port = await freePort();
  // The README's PostgreSQL block names 127.0.0.1:5432 and the user postgres: run it when that is the server the tests use.
  const pg = new URL(PG_ADMIN_URL);
  const readmeServer = pg.hostname === "127.0.0.1" && (pg.port === "" || pg.port === "5432") && pg.username === "postgres";
  const pgDatabase = pgSkip || !readmeServer ? null : `sf_readme_${randomBytes(4).toString("hex")}`;
  const blocks = shellBlocks(README);
  const known = new Set(["Quick start", "Try it", "Payment plugins", "PostgreSQL", "Development"]);
  for (const b of blocks) assert.ok(known.has(b.heading), `a shell block under "${b.heading}": decide here how this test runs it`);
  const { script, ran, skipped } = scriptOf(blocks, port, pgDatabase);
  try {
    const env: Record<string, string | undefined> = {
      ...process.env,
      DATABASE_URL: `sqlite:${path.join(dir, "storefront.db")}`,
      SECRETS_KEY: randomBytes(32).toString("hex"),
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      SF_LOG: path.join(dir, "server.log"),
    };
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn("bash", ["-c", script], { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
    const shown = `ran: ${ran.join(" | ")}\nskipped: ${skipped.join(" | ")}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
    assert.equal(run.code, 0, shown);
    if (process.env.README_TEST_VERBOSE) process.stdout.write(shown + "\n");
    assert.equal(ran.length, pgDatabase === null ? 4 : 5, shown);
    assert.match(run.stdout, /"invoices": ?\[/, `Try it: the invoice list answered\n${shown}`);
    assert.match(run.stdout, /\{"status":"pushInvoice","invoiceId":"inv_\w+"\}/, `Payment plugins: the webhook completed the invoice\n${shown}`);
    assert.match(run.stdout, /\{"status":"completed","invoiceLogs":\[/, `Payment plugins: the list shows it completed\n${shown}`);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), "every server the README started has stopped");
  } finally {
    if (pgDatabase !== null) await new Promise((resolve) => spawn("dropdb", ["--if-exists", "-h", "127.0.0.1", "-U", "postgres", pgDatabase]).on("close", resolve));
    rmSync(dir, { recursive: true, force: true });
  }
});
