// The command line as a user runs it (a child process on a fresh database): one line and a non-zero exit
// for ordinary mistakes, lists in the admin API's shapes with --json, tables for people, secrets
// from a file or standard input, the plugin lifecycle, --version and --help.
import assert from "node:assert/strict";
import { createHmac, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { CommanderError, type Command } from "commander";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { buildProgram } from "../../src/main.ts";
import { createServices } from "../../src/services.ts";
import { jsonOf, REPO, runCli, type CliRun } from "../helpers/cli.ts";
import { ADMIN_TOKEN, DIALECTS, PG_ADMIN_URL, freshDatabase, pgSkip } from "../helpers/harness.ts";

type Json = Record<string, unknown>;

/** One line on stderr, no stack, nothing on stdout, a non-zero exit code. */
function assertOneLineFailure(run: CliRun, pattern: RegExp): void {
  assert.notEqual(run.code, 0, "exits non-zero");
  assert.equal(run.stdout, "");
  assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one line, got:\n${run.stderr}`);
  assert.doesNotMatch(run.stderr, /\n\s+at |Error:|node:internal/, "no stack trace");
  assert.match(run.stderr, pattern);
}

/** Every command of the program tree with its path (`plugins install`). */
function commandsOf(program: Command, prefix: string[] = []): { path: string[]; command: Command }[] {
  return program.commands.flatMap((c) => [{ path: [...prefix, c.name()], command: c }, ...commandsOf(c, [...prefix, c.name()])]);
}

describe("storefront command line on SQLite: mistakes, output, version, help", () => {
  let env: Record<string, string>;
  let drop: () => Promise<void>;
  let dir: string;
  before(async () => {
    const db = await freshDatabase("sqlite");
    drop = db.drop;
    dir = path.dirname(db.url.slice("sqlite:".length));
    env = { DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex"), ADMIN_TOKEN };
  });
  after(async () => {
    await drop?.();
  });
  const cli = (args: string[], input?: string) => runCli(args, { env, ...(input === undefined ? {} : { input }) });

  test("--version prints the package's version and the schema version", async () => {
    const run = await cli(["--version"]);
    assert.equal(run.code, 0);
    const { version } = JSON.parse(readFileSync(path.join(REPO, "package.json"), "utf8")) as { version: string };
    assert.match(run.stdout.trim(), new RegExp(`^storefront ${version.replace(/\./g, "\\.")} \\(schema \\d{4}_\\w+\\)$`));
  });

  test("ordinary mistakes print one line saying what to do and exit non-zero", async () => {
    const store = jsonOf(await cli(["stores", "create", "Mistakes"]));
    assertOneLineFailure(await cli(["seed"]), /give --demo .* or --customers <n>/);
    assertOneLineFailure(await cli(["checkout", "--store", String(store.id), "--customer", "c", "--item", "bad"]), /item "bad" is not variant:quantity:price/);
    assertOneLineFailure(await cli(["checkout", "--store", String(store.id), "--customer", "c", "--item", "x:two:1"]), /quantity "two" must be a whole number/);
    assertOneLineFailure(await cli(["simulate", "--store", String(store.id), "--plugin", "p", "--body", "missing.json"]), /cannot read --body missing\.json: no such file/);
    assertOneLineFailure(await cli(["plugins", "install", "p", "--store", String(store.id), "--file", "missing.lua"]), /cannot read --file missing\.lua/);
    assertOneLineFailure(await cli(["plugins", "test", "missing.lua", "--fixtures", "."]), /cannot read plugin file missing\.lua/);
    assertOneLineFailure(await cli(["keys", "list", "--store", "st_nope"]), /store_not_found/);
    assertOneLineFailure(await cli(["plugins", "rollback", "p", "--store", String(store.id), "--version", "x"]), /positive whole number \(see --help\)\n$/);
    assertOneLineFailure(await cli(["keys", "list"]), /required option '--store <storeId>' not specified/);
  });

  test("a port already in use is one line naming PORT", async () => {
    const blocker = net.createServer();
    blocker.listen(0, "127.0.0.1");
    await once(blocker, "listening");
    try {
      const port = (blocker.address() as net.AddressInfo).port;
      const run = await runCli(["serve"], { env: { ...env, PORT: String(port), HOST: "127.0.0.1" } });
      assertOneLineFailure(run, new RegExp(`port ${port} is in use on 127\\.0\\.0\\.1: .*PORT=`));
    } finally {
      blocker.close();
    }
  });

  test("a PostgreSQL database that does not exist is one line saying to create it", { skip: pgSkip }, async () => {
    const url = new URL(PG_ADMIN_URL);
    url.pathname = "/storefront_no_such_db";
    for (const command of [["stores", "list"], ["serve"]]) {
      const run = await runCli(command, { env: { ...env, DATABASE_URL: url.toString() } });
      assertOneLineFailure(run, /PostgreSQL database "storefront_no_such_db" does not exist .*create it first \(createdb/);
    }
  });

  // --json is proved by running every command with it: test/cli.json.test.ts.
  test("--help of every command works", async () => {
    const program = buildProgram();
    const all = commandsOf(program);
    assert.ok(all.length >= 25, `found ${all.length} commands`);
    for (const { path: p } of all) {
      // --help as the user types it, parsed by the real program (in process, output captured).
      const fresh = buildProgram();
      let out = "";
      for (const c of [fresh, ...commandsOf(fresh).map((x) => x.command)]) c.exitOverride().configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s) });
      await assert.rejects(fresh.parseAsync(["node", "storefront", ...p, "--help"]), (err: unknown) => err instanceof CommanderError && err.code === "commander.helpDisplayed");
      assert.match(out, new RegExp(`^Usage: storefront ${p.join(" ")}`), `${p.join(" ")} --help`);
    }
  });

  test("lists print a table for people and {data} with --json", async () => {
    const store = jsonOf(await cli(["stores", "create", "Tables"]));
    const table = await cli(["stores", "list"]);
    assert.equal(table.code, 0);
    assert.match(table.stdout.split("\n")[0]!, /^id\s+name\s+createdAt$/);
    assert.ok(table.stdout.includes(String(store.id)));
    const json = jsonOf<{ data: Json[] }>(await cli(["stores", "list", "--json"]));
    assert.ok(json.data.some((s) => s.id === store.id && s.name === "Tables"));
    const keys = jsonOf<{ data: Json[] }>(await cli(["keys", "list", "--store", String(store.id), "--json"]));
    assert.deepEqual(keys.data, []);
    const revoke = jsonOf(await cli(["keys", "revoke", "--store", String(store.id), "--key", String(jsonOf(await cli(["keys", "create", "--store", String(store.id)])).id), "--json"]));
    assert.equal(revoke.revoked, true);
    assert.deepEqual(jsonOf(await cli(["migrate", "--json"])).applied, [], "nothing left to apply");
    assert.deepEqual(Object.keys(jsonOf(await cli(["deliveries", "list", "--store", String(store.id), "--json"]))), ["data", "pagination"]);
  });

  test("seed prints curl lines for the configured PORT and namespace", async () => {
    const run = await runCli(["seed", "--customers", "2", "--seed", "1"], { env: { ...env, PORT: "4711", API_NAMESPACE: "shop" } });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /curl -H "Authorization: sk_[^"]+" "http:\/\/127\.0\.0\.1:4711\/api\/shop\/customers\?limit=2"/);
    const json = jsonOf<{ key: string; curl: string[] }>(await runCli(["seed", "--customers", "1", "--json"], { env: { ...env, PORT: "4712" } }));
    assert.match(json.curl[1]!, /^curl -H "Authorization: sk_.*" "http:\/\/127\.0\.0\.1:4712\/api\/service\/invoices\?limit=2"$/);
  });

  test("CLI replay and simulate answer in the API's shapes, with durations rounded", async () => {
    // The API on the same SQLite file, beside the command line.
    const services = await createServices(loadConfig({ ...env, LOG_LEVEL: "silent", PLUGIN_POOL_SIZE: "1" }));
    const app = await buildApp(services, { logger: false });
    try {
      const store = await services.stores.createStore("Replay");
      await services.plugins.install(store.id, "pay", { source: 'log("hello") return { status = "ignore" }' });
      const hook = await app.inject({ method: "POST", url: `/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, payload: "{}", headers: { "content-type": "application/json" } });
      const deliveryId = String(hook.headers["x-delivery-id"]);
      const viaApi = (await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/deliveries/${deliveryId}/replay`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json<Json>();
      const viaCli = jsonOf(await cli(["deliveries", "replay", deliveryId, "--store", store.id, "--json"]));
      assert.deepEqual(Object.keys(viaCli), Object.keys(viaApi));
      assert.deepEqual({ ...viaCli, deliveryId: null }, { ...viaApi, deliveryId: null });
      assert.equal(viaCli.replayOf, deliveryId);

      writeFileSync(path.join(dir, "body.json"), "{}");
      const sim = jsonOf(await cli(["simulate", "--store", store.id, "--plugin", "pay", "--body", path.join(dir, "body.json")]));
      const apiSim = (await app.inject({ method: "POST", url: `/api/admin/stores/${store.id}/plugins/pay/simulate`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { body: "{}" } })).json<Json>();
      assert.deepEqual(Object.keys(sim), Object.keys(apiSim));
      for (const d of [sim.durationMs, apiSim.durationMs] as number[]) assert.equal(Math.round(d * 1000) / 1000, d, `rounded to the microsecond: ${d}`);
      const simStdin = jsonOf(await cli(["simulate", "--store", store.id, "--plugin", "pay", "--body", "-"], "{}"));
      assert.deepEqual(simStdin.result, { status: "ignore" });
    } finally {
      await app.close();
      await services.close();
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`storefront plugins on the command line on ${dialect.name}`, { skip: dialect.skip }, () => {
    let env: Record<string, string>;
    let drop: () => Promise<void>;
    let dir: string;
    before(async () => {
      const db = await freshDatabase(dialect.name);
      drop = db.drop;
      dir = mkdtempSync(path.join(os.tmpdir(), "storefront-cli-"));
      env = { DATABASE_URL: db.url, SECRETS_KEY: randomBytes(32).toString("hex") };
    });
    after(async () => {
      await drop?.();
      rmSync(dir, { recursive: true, force: true });
    });
    const cli = (args: string[], input?: string) => runCli(args, { env, ...(input === undefined ? {} : { input }) });

    /** A generic-hmac delivery signed with `secret`, simulated: accepted only if the stored secret is `secret`. */
    async function acceptsSignatureOf(storeId: string, secret: string): Promise<boolean> {
      const body = '{"invoiceId":"inv_x","status":"other"}';
      writeFileSync(path.join(dir, "event.json"), body);
      const sig = createHmac("sha256", secret).update(body).digest("hex");
      const run = await cli(["simulate", "--store", storeId, "--plugin", "pay", "--body", path.join(dir, "event.json"), "--header", `x-signature: ${sig}`, "--json"]);
      const out = JSON.parse(run.stdout) as { error: { kind: string } | null };
      return out.error === null || out.error.kind !== "rejected";
    }

    test("secrets from a file (NAME=value lines or JSON) and from standard input are stored and used", async () => {
      const store = jsonOf(await cli(["stores", "create", "Secrets"]));
      const id = String(store.id);
      writeFileSync(path.join(dir, "secrets.env"), "# the provider's signing secret\nsigningSecret=from-file=with-equals\n\n");
      jsonOf(await cli(["plugins", "install", "pay", "--store", id, "--catalog", "generic-hmac", "--secrets-file", path.join(dir, "secrets.env")]));
      assert.equal(await acceptsSignatureOf(id, "from-file=with-equals"), true);
      assert.equal(await acceptsSignatureOf(id, "something-else"), false, "the check can fail");
      jsonOf(await cli(["plugins", "install", "pay", "--store", id, "--secrets-file", "-"], "signingSecret=from-stdin\n"));
      assert.equal(await acceptsSignatureOf(id, "from-stdin"), true);
      writeFileSync(path.join(dir, "secrets.json"), JSON.stringify({ signingSecret: "from-json", extra: "x" }));
      jsonOf(await cli(["plugins", "install", "pay", "--store", id, "--secrets-file", path.join(dir, "secrets.json")]));
      assert.equal(await acceptsSignatureOf(id, "from-json"), true);
      const listed = jsonOf<{ data: Json[] }>(await cli(["plugins", "list", "--store", id, "--json"]));
      assert.deepEqual(listed.data[0]!.secretNames, ["extra", "signingSecret"]);
      assert.doesNotMatch(JSON.stringify(listed), /from-json/, "values are never shown");
      writeFileSync(path.join(dir, "bad.env"), "just-a-value\n");
      assertOneLineFailure(await cli(["plugins", "install", "pay", "--store", id, "--secrets-file", path.join(dir, "bad.env")]), /line 1 is not NAME=value/);
    });

    test("diff, rollback and delete on the command line", async () => {
      const id = String(jsonOf(await cli(["stores", "create", "Lifecycle"])).id);
      for (const [n, text] of ["one", "two"].entries()) {
        writeFileSync(path.join(dir, `v${n + 1}.lua`), `log("${text}")\nreturn { status = "ignore" }\n`);
        assert.equal(jsonOf(await cli(["plugins", "install", "p", "--store", id, "--file", path.join(dir, `v${n + 1}.lua`)])).version, n + 1);
      }
      const diff = await cli(["plugins", "diff", "p", "--store", id]);
      assert.equal(diff.stdout, ["--- p v1", "+++ p v2", "@@ -1,2 +1,2 @@", '-log("one")', '+log("two")', ' return { status = "ignore" }', ""].join("\n"));
      assert.equal(jsonOf(await cli(["plugins", "diff", "p", "--store", id, "--from", "2", "--to", "2", "--json"])).identical, true);
      const rolled = jsonOf(await cli(["plugins", "rollback", "p", "--store", id, "--version", "1"]));
      assert.equal(rolled.version, 1);
      const versions = jsonOf<{ data: Json[] }>(await cli(["plugins", "versions", "p", "--store", id, "--json"]));
      assert.deepEqual(versions.data.map((v) => [v.version, v.current]), [[2, false], [1, true]]);
      assert.equal(jsonOf(await cli(["plugins", "install", "p", "--store", id, "--file", path.join(dir, "v1.lua")])).version, 1, "identical re-upload");
      assertOneLineFailure(await cli(["plugins", "rollback", "p", "--store", id, "--version", "5"]), /plugin_not_found: Plugin p has no version 5/);
      const deleted = await cli(["plugins", "delete", "p", "--store", id]);
      assert.match(deleted.stdout, /^deleted plugin p from store st_\w+ \(its deliveries stay\)\n$/);
      assert.deepEqual(jsonOf<{ data: Json[] }>(await cli(["plugins", "list", "--store", id, "--json"])).data, []);
      assertOneLineFailure(await cli(["plugins", "delete", "p", "--store", id, "--json"]), /plugin_not_found/);
    });
  });
}
