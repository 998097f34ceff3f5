// One benchmark server process: a fresh database with a store, the Stripe-style plugin and N pending
// invoices, serving the real app. `--mode ts` swaps the sandbox for the plain-TypeScript plugin.
//   (forked by run.ts) node bench/webhook/server.ts --dialect sqlite|postgres --mode lua|ts --invoices N
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { createWebhookService } from "../../src/payments/webhook.service.ts";
import { createServices } from "../../src/services.ts";
import { benchDatabase } from "../lib/bench-database.ts";
import { seedPendingInvoices } from "../lib/pending-invoices.ts";
import { LUA_PLUGIN, SECRET, plainTypeScriptSandbox } from "./plugin.ts";

const { values: args } = parseArgs({ options: { dialect: { type: "string", default: "sqlite" }, mode: { type: "string", default: "lua" }, invoices: { type: "string", default: "0" } } });

export interface WebhookServerReady {
  port: number;
  storeId: string;
  invoiceIds: string[];
}

const database = await benchDatabase(args.dialect!, "wh");
const databaseUrl = database.url;
process.on("disconnect", () => {
  void (async () => {
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
});
const services = await createServices(config, { warmSandbox: args.mode === "lua" });
if (args.mode === "ts") {
  services.webhooks = createWebhookService({
    db: services.db.kysely,
    committer: services.committer,
    plugins: services.plugins,
    invoices: services.invoices,
    deliveries: services.deliveries,
    sandbox: plainTypeScriptSandbox(),
    retentionDays: 30,
    now: Date.now,
  });
}

const store = await services.stores.createStore("bench");
await services.plugins.install(store.id, "stripe", { source: LUA_PLUGIN, secrets: { signingSecret: SECRET } });
const invoiceIds = await seedPendingInvoices(services, store.id, Number(args.invoices));

const app = await buildApp(services, { logger: false });
await app.listen({ port: 0, host: "127.0.0.1" });
const address = app.server.address();
const ready: WebhookServerReady = { port: typeof address === "object" && address ? address.port : 0, storeId: store.id, invoiceIds };
process.send!(ready);
