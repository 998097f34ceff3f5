// `npm start`, the README's start command, as Docker and systemd run it: a signal sent to the npm process
// alone must reach the server, which finishes the requests in flight and exits; nothing is left running.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import net from "node:net";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createServices } from "../../src/services.ts";
import { REPO } from "../helpers/cli.ts";
import { arrivedAtGate, gate, shuttingDown } from "../helpers/gate.ts";
import { freePort } from "../helpers/server.ts";

/** Every process below `pid`, from /proc (Linux). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent is the fourth field, after the command name in parentheses (which may hold spaces).
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitReady(url: string, child: { exitCode: number | null }, output: () => string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}: ${output()}`);
    if (await fetch(`${url}/readyz`).then((r) => r.ok, () => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`npm start did not become ready: ${output()}`);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`${signal} to the npm process of \`npm start\` drains the server and leaves no process behind`, { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-npm-start-"));
    const held = await gate();
    const env = { DATABASE_URL: `sqlite:${path.join(dir, "sf.db")}`, SECRETS_KEY: randomBytes(32).toString("hex"), PLUGIN_POOL_SIZE: "4", PLUGIN_FETCH_ALLOW: "127.0.0.1" };
    // A plugin whose deliveries wait on the gate, installed before the server opens the same file.
    const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent" }));
    const store = await services.stores.createStore("slow");
    await services.plugins.install(store.id, "slow", { source: `local r = fetch(${JSON.stringify(held.url)}) return { status = "ignore" }` });
    await services.close();
    const port = await freePort();
    const npm = spawn("npm", ["start"], { cwd: REPO, env: { ...process.env, ...env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn" }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    npm.stdout.on("data", (d: Buffer) => (output += d.toString()));
    npm.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const url = `http://127.0.0.1:${port}`;
    let tree: number[] = [];
    try {
      await waitReady(url, npm, () => output);
      tree = descendants(npm.pid!);
      assert.ok(tree.length > 0, "npm runs the server below it");
      const inFlight = Array.from({ length: 4 }, () =>
        fetch(`${url}/api/paymentPlugins?pluginName=slow&storeId=${store.id}`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } }).then(
          async (r) => ({ status: r.status, body: await r.text() }),
          (err: unknown) => ({ status: 0, body: String(err) }),
        ),
      );
      // Every delivery is in the sandbox, waiting on the gate.
      await arrivedAtGate(held, 4, () => output);
      const exited = once(npm, "exit");
      npm.kill(signal); // the npm process only, as `docker stop` does
      // The server stops taking new requests once the signal arrived; then the plugins get their answers.
      await shuttingDown(url);
      held.release();
      const answers = await Promise.all(inFlight);
      // A bound on a hang, not a measurement: a server that never got the signal keeps npm waiting forever.
      const code = await Promise.race([exited.then(([c]) => c as number | null), new Promise<string>((r) => setTimeout(() => r("npm did not exit within 30 s"), 30_000).unref())]);
      for (const a of answers) assert.deepEqual(a, { status: 200, body: '{"status":"ignore"}' }, "every request in flight was answered");
      assert.deepEqual(tree.filter(alive), [], `once npm has exited, nothing it started is running\n${output}`);
      assert.equal(code, 0, output);
      await assert.rejects(fetch(`${url}/healthz`), "nothing listens any more");
    } finally {
      for (const pid of [npm.pid!, ...tree]) if (alive(pid)) process.kill(pid, "SIGKILL");
      await held.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("a shutdown that cannot drain exits after SHUTDOWN_TIMEOUT_MS with code 1, naming what it waited for", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "storefront-stuck-"));
  const port = await freePort();
  const env = { ...process.env, DATABASE_URL: `sqlite:${path.join(dir, "sf.db")}`, SECRETS_KEY: randomBytes(32).toString("hex"), PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "info", LOG_FORMAT: "json", SHUTDOWN_TIMEOUT_MS: "500" };
  const server = spawn(process.execPath, ["bin/storefront.js", "serve"], { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  server.stdout.on("data", (d: Buffer) => (output += d.toString()));
  server.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const socket = new net.Socket();
  try {
    await waitReady(`http://127.0.0.1:${port}`, server, () => output);
    // A request whose body never finishes arriving: it stays in flight, so the server cannot drain.
    await new Promise<void>((resolve, reject) => socket.connect(port, "127.0.0.1", resolve).once("error", reject));
    socket.write("POST /api/paymentPlugins?pluginName=p&storeId=s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    await new Promise((r) => setTimeout(r, 100));
    const exited = once(server, "exit");
    server.kill("SIGTERM");
    const [code] = (await exited) as [number | null];
    assert.equal(code, 1, output);
    const stuck = output.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { msg: string; step?: string }).find((l) => l.msg.startsWith("shutdown did not finish"));
    assert.equal(stuck?.step, "finishing requests in flight", output);
  } finally {
    socket.destroy();
    if (server.exitCode === null) server.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
