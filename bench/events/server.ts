// One events-benchmark server process: a fresh database with a store, the webhook benchmark's Stripe-style
// plugin and N pending invoices, serving the real app with its event dispatcher running, as `serve` does.
// With --endpoint URL the store has one endpoint subscribed to invoice.completed; with --endpoint none, none.
//   (forked by run.ts) node bench/events/server.ts --dialect sqlite|postgres --endpoint URL|none --invoices N
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { benchDatabase } from "../lib/bench-database.ts";
import { seedPendingInvoices } from "../lib/pending-invoices.ts";
import { createServices } from "../../src/services.ts";
import { LUA_PLUGIN, SECRET } from "../webhook/plugin.ts";

const { values: args } = parseArgs({ options: { dialect: { type: "string", default: "sqlite" }, endpoint: { type: "string", default: "none" }, invoices: { type: "string", default: "0" } } });

export interface EventsServerReady {
  port: number;
  storeId: string;
  invoiceIds: string[];
  secret: string | null;
}

const database = await benchDatabase(args.dialect!, "ev");
const databaseUrl = database.url;
process.on("disconnect", () => {
  void (async () => {
    await services.close();
    await database.drop();
    process.exit(0);
  })();
});

const config = loadConfig({
  DATABASE_URL: databaseUrl,
  SECRETS_KEY: randomBytes(32).toString("hex"),
  LOG_LEVEL: "silent",
  WEBHOOK_RATE_LIMIT_MAX: "1000000000",
  RATE_LIMIT_MAX: "1000000000",
  ENDPOINT_ALLOW: "127.0.0.1",
});
const services = await createServices(config, { warmSandbox: true });

const store = await services.stores.createStore("bench");
await services.plugins.install(store.id, "stripe", { source: LUA_PLUGIN, secrets: { signingSecret: SECRET } });
const secret = args.endpoint === "none" ? null : (await services.events.createEndpoint(store.id, { url: args.endpoint!, types: ["invoice.completed"] })).secret;
const invoiceIds = await seedPendingInvoices(services, store.id, Number(args.invoices));

const app = await buildApp(services, { logger: false });
await app.listen({ port: 0, host: "127.0.0.1" });
services.dispatcher.start((err) => process.stderr.write(`dispatch error: ${String(err)}\n`));
const address = app.server.address();
const ready: EventsServerReady = { port: typeof address === "object" && address ? address.port : 0, storeId: store.id, invoiceIds, secret };
process.send!(ready);
// CPU time of this process on request: per-request CPU is the cost measure least moved by other load.
process.on("message", (m: { kind?: string }) => {
  if (m.kind === "cpu") {
    const u = process.cpuUsage();
    process.send!({ kind: "cpu", ms: (u.user + u.system) / 1000 });
  }
});
