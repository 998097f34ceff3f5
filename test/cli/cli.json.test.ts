// Every command of the command line run with --json, as a script runs it (a child process on a fresh
// SQLite database): its standard output parses as JSON. The steps build on each other (a store, a plugin,
// a delivery, an endpoint…), and a command added without a step here fails the test.
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Command } from "commander";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { buildProgram } from "../../src/main.ts";
import { createServices } from "../../src/services.ts";
import { REPO, runCli, runCliUntil, type CliRun } from "../helpers/cli.ts";
import { ADMIN_TOKEN, freshDatabase } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

type Json = Record<string, unknown>;

/** What the steps learn from each other's output. */
interface Ctx {
  store: string;
  key: string;
  customer: string;
  cancelInvoice: string;
  paidInvoice: string;
  delivery: string;
  endpoint: string;
  event: string;
  dir: string;
  secretsKey: string;
  /** The service's address, for commands that talk to a running service. */
  server: string;
  /** A webhook receiver the service may send to. */
  receiver: string;
}

interface Step {
  command: string;
  args: (c: Ctx) => string[];
  input?: (c: Ctx) => string;
  /** Runs until its output satisfies this, then is stopped (a command that follows). */
  until?: (stdout: string) => boolean;
  save?: (json: Json, c: Ctx) => void;
  /** Before the command runs (in this process). */
  prepare?: (c: Ctx) => Promise<void>;
}

const SIGNING_SECRET = "s3cret-for-json";
const signed = (body: string) => ({ "content-type": "application/json", "x-signature": createHmac("sha256", SIGNING_SECRET).update(body).digest("hex") });

/** Leaf commands of the program (those that run something), as typed: `plugins install`. */
function leafCommands(program: Command, prefix: string[] = []): string[] {
  return program.commands.flatMap((c) => (c.commands.length === 0 ? [[...prefix, c.name()].join(" ")] : leafCommands(c, [...prefix, c.name()])));
}

/** Every line of a stream of JSON values (tail), or the whole output as one value. */
function parseOutput(command: string, run: CliRun, lines: boolean): unknown[] {
  assert.equal(run.code === 0 || (lines && run.code === 130), true, `${command} --json exits 0: ${run.code} ${run.stderr}`);
  const texts = lines ? run.stdout.split("\n").filter((l) => l !== "") : [run.stdout];
  assert.ok(texts.length > 0, `${command} --json printed something`);
  return texts.map((text) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      assert.fail(`${command} --json printed something that is not JSON:\n${run.stdout}`);
    }
  });
}

const STEPS: Step[] = [
  { command: "migrate", args: () => [] },
  { command: "versions", args: () => [] },
  { command: "stores create", args: () => ["Scripts"], save: (j, c) => (c.store = String(j.id)) },
  { command: "stores list", args: () => [] },
  { command: "keys create", args: (c) => ["--store", c.store], save: (j, c) => (c.key = String(j.id)) },
  { command: "keys list", args: (c) => ["--store", c.store] },
  { command: "keys set-version", args: (c) => ["--store", c.store, "--key", c.key, "--api-version", "2026-11-23"] },
  { command: "customers create", args: (c) => ["--store", c.store, "--email", "script@example.com"], save: (j, c) => (c.customer = String(j.id)) },
  { command: "checkout", args: (c) => ["--store", c.store, "--customer", c.customer, "--item", "v:1:5"], save: (j, c) => (c.cancelInvoice = String(j.id)) },
  { command: "plugins catalog", args: () => [] },
  { command: "plugins install", args: (c) => ["pay", "--store", c.store, "--catalog", "generic-hmac", "--secret", `signingSecret=${SIGNING_SECRET}`] },
  {
    command: "plugins test",
    args: () => [path.join(REPO, "plugins-catalog/generic-hmac.lua"), "--fixtures", path.join(REPO, "plugins-catalog/fixtures/generic-hmac")],
  },
  { command: "plugins list", args: (c) => ["--store", c.store] },
  { command: "plugins show", args: (c) => ["pay", "--store", c.store] },
  { command: "plugins secrets", args: (c) => ["pay", "--store", c.store, "--secret", `signingSecret=${SIGNING_SECRET}`] },
  { command: "plugins versions", args: (c) => ["pay", "--store", c.store] },
  { command: "plugins diff", args: (c) => ["pay", "--store", c.store, "--from", "1", "--to", "1"] },
  { command: "plugins rollback", args: (c) => ["pay", "--store", c.store, "--version", "1"] },
  { command: "plugins disable", args: (c) => ["pay", "--store", c.store] },
  { command: "plugins enable", args: (c) => ["pay", "--store", c.store] },
  {
    command: "simulate",
    prepare: async (c) => writeFileSync(path.join(c.dir, "body.json"), '{"invoiceId":"inv_x","status":"other"}'),
    args: (c) => ["--store", c.store, "--plugin", "pay", "--body", path.join(c.dir, "body.json"), "--header", `x-signature: ${signed('{"invoiceId":"inv_x","status":"other"}')["x-signature"]}`],
  },
  {
    command: "endpoints add",
    args: (c) => ["--store", c.store, "--url", c.receiver],
    save: (j, c) => (c.endpoint = String(j.id)),
  },
  { command: "endpoints test", args: (c) => [c.endpoint, "--store", c.store, "--type", "invoice.created"] },
  { command: "endpoints list", args: (c) => ["--store", c.store] },
  { command: "endpoints update", args: (c) => [c.endpoint, "--store", c.store, "--description", "scripted"] },
  { command: "endpoints rotate-secret", args: (c) => [c.endpoint, "--store", c.store] },
  {
    // A paid invoice, through the running service's webhook: a delivery, and events for the endpoint.
    command: "checkout",
    args: (c) => ["--store", c.store, "--customer", c.customer, "--item", "v:1:7"],
    save: (j, c) => (c.paidInvoice = String(j.id)),
  },
  {
    command: "plugins trigger",
    args: (c) => ["pay", "paid", "--store", c.store, "--invoice", c.paidInvoice],
    save: (j, c) => (c.delivery = String(j.deliveryId)),
  },
  { command: "deliveries list", args: (c) => ["--store", c.store] },
  { command: "deliveries show", args: (c) => [c.delivery, "--store", c.store] },
  { command: "deliveries replay", args: (c) => [c.delivery, "--store", c.store] },
  { command: "deliveries tail", args: (c) => ["--store", c.store, "--lines", "1"], until: (out) => out.includes("\n") },
  { command: "deliveries prune", args: () => [] },
  { command: "invoices cancel", args: (c) => [c.cancelInvoice, "--store", c.store] },
  { command: "invoices refund", args: (c) => [c.paidInvoice, "--store", c.store] },
  { command: "invoices expire", args: () => [] },
  { command: "events list", args: (c) => ["--store", c.store, "--types", "invoice.created,invoice.completed"], save: (j, c) => (c.event = String((j.data as Json[])[0]!.id)) },
  { command: "events show", args: (c) => [c.event, "--store", c.store] },
  { command: "events resend", args: (c) => [c.event, "--store", c.store] },
  { command: "endpoints attempts", args: (c) => [c.endpoint, "--store", c.store] },
  { command: "endpoints remove", args: (c) => [c.endpoint, "--store", c.store] },
  { command: "plugins delete", args: (c) => ["pay", "--store", c.store] },
  { command: "console users add", args: (c) => ["ann@example.com", "--store", c.store], input: () => "a-long-enough-password\n" },
  { command: "console users list", args: () => [] },
  { command: "console users remove", args: () => ["ann@example.com"] },
  { command: "keys revoke", args: (c) => ["--store", c.store, "--key", c.key] },
  { command: "seed", args: () => ["--customers", "1", "--seed", "1"] },
  { command: "backup", args: (c) => [path.join(c.dir, "copy.db")] },
  // A check only: the running server holds the database.
  { command: "restore", args: (c) => [path.join(c.dir, "copy.db"), "--check"] },
  {
    command: "secrets rekey",
    prepare: async (c) => writeFileSync(path.join(c.dir, "old.key"), c.secretsKey),
    args: (c) => ["--from-file", path.join(c.dir, "old.key")],
  },
];

describe("storefront --json on every command", () => {
  let env: Record<string, string>;
  let ctx: Ctx;
  let drop: () => Promise<void>;
  let stopServer: () => Promise<void>;
  let receiver: Receiver;
  before(async () => {
    const db = await freshDatabase("sqlite");
    drop = db.drop;
    const secretsKey = randomBytes(32).toString("hex");
    env = { DATABASE_URL: db.url, SECRETS_KEY: secretsKey, ADMIN_TOKEN };
    // The service on the same database, listening: what a developer has running beside the command line.
    receiver = await startReceiver();
    const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1", READ_THREADS: "0", ENDPOINT_ALLOW: "127.0.0.1" }));
    const app = await buildApp(services, { logger: false });
    const server = await app.listen({ port: 0, host: "127.0.0.1" });
    stopServer = async () => {
      await app.close();
      await services.close();
    };
    ctx = { dir: path.dirname(db.url.slice("sqlite:".length)), secretsKey, server, receiver: receiver.url } as Ctx;
    env.PORT = new URL(server).port;
  });
  after(async () => {
    await stopServer?.();
    await receiver?.close();
    await drop?.();
  });

  test("every command but serve has a step here", () => {
    const covered = new Set(STEPS.map((s) => s.command));
    const missing = leafCommands(buildProgram()).filter((c) => c !== "serve" && !covered.has(c));
    assert.deepEqual(missing, [], "commands run by no step of this test");
  });

  test("every command but serve prints JSON that parses when given --json", async () => {
    for (const step of STEPS) {
      await step.prepare?.(ctx);
      const args = [...step.command.split(" "), ...step.args(ctx), "--json"];
      const run = step.until
        ? await runCliUntil(args, step.until, { env })
        : await runCli(args, { env, ...(step.input ? { input: step.input(ctx) } : {}) });
      const [value] = parseOutput(step.command, run, step.until !== undefined);
      assert.equal(typeof value, "object", `${step.command} --json prints an object or an array`);
      step.save?.(value as Json, ctx);
    }
  });
});
