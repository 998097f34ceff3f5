// `storefront serve`: migrate, listen, and on SIGTERM/SIGINT finish the requests in flight, then exit.
import type { Command } from "commander";
import { type Config, describeDatabase } from "../config.ts";
import { CliError, cliConfig, openServices } from "./context.ts";
import { type BackgroundLoop, startBackgroundLoop } from "../ops/background-loop.ts";
import { startFollowers } from "../ops/followers.ts";

/** How often `serve` looks for pending invoices past their payment window. */
const EXPIRY_INTERVAL_MS = 30_000;


export function registerServeCommand(program: Command): void {
  program
    .command("serve")
    .description("migrate the database and serve the HTTP API")
    .action(async () => {
      const config = cliConfig();
      const { createLogger } = await import("../ops/logger.ts");
      const logger = createLogger({ level: config.logLevel, format: config.logFormat });
      const services = await openServices(config, { warmSandbox: true, checkSecretsKey: true, log: logger });
      const { buildApp } = await import("../app.ts");
      const app = await buildApp(services, { loggerInstance: logger });
      // The console's bundle is built now, not on its first visitor's request.
      const { consoleBundle } = await import("../console/console.assets.ts");
      await consoleBundle();
      // Delivery and event retention: once at start, then hourly.
      const prune = () => {
        services.webhooks
          .pruneDeliveries()
          .then((n) => n > 0 && app.log.info({ deleted: n }, "pruned old deliveries"))
          .catch((err: unknown) => app.log.error({ err }, "pruning deliveries failed"));
        services.events
          .pruneEvents()
          .then((n) => n > 0 && app.log.info({ deleted: n }, "pruned old events"))
          .catch((err: unknown) => app.log.error({ err }, "pruning events failed"));
      };
      const pruneTimer = setInterval(prune, 3_600_000);
      pruneTimer.unref();
      let expiry: BackgroundLoop | null = null;
      let followers: BackgroundLoop[] = [];
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        clearInterval(pruneTimer);
        app.log.info({ signal }, "shutting down: finishing requests in flight");
        const force = setTimeout(() => process.exit(1), 30_000);
        force.unref();
        app
          .close()
          .then(() => expiry?.stop())
          .then(() => Promise.all(followers.map((f) => f.stop())))
          .then(() => services.dispatcher.stop())
          .then(() => services.close())
          .then(() => process.exit(0))
          .catch((err: unknown) => {
            app.log.error({ err }, "shutdown failed");
            process.exit(1);
          });
      };
      process.on("SIGTERM", () => stop("SIGTERM"));
      process.on("SIGINT", () => stop("SIGINT"));
      try {
        await app.listen({ port: config.port, host: config.host });
      } catch (err) {
        const problem = listenProblem(err, config);
        if (problem === null) throw err;
        await app.close().catch(() => {});
        await services.close().catch(() => {});
        throw problem;
      }
      const where = describeDatabase(config.database);
      const admin = config.adminToken === null ? "admin API off (no ADMIN_TOKEN)" : "admin API on";
      prune();
      // Pending invoices past INVOICE_PAYMENT_WINDOW_MINUTES: claimed in batches, so every process may run it.
      if (!stopping) expiry = startBackgroundLoop(
        "invoice expiry",
        EXPIRY_INTERVAL_MS,
        async () => {
          const { expired } = await services.invoiceLifecycle.expireDue();
          if (expired > 0) app.log.info({ expired }, "expired pending invoices past their payment window");
        },
        app.log,
      );
      if (expiry !== null) services.metrics.trackLoop("invoice_expiry", expiry.lastSuccessAt);
      // What follows a commit: the read model's documents and the events' numbers (kicked by this process's
      // payments, and looking for other processes' work every FOLLOW_INTERVAL_MS).
      if (!stopping) {
        followers = startFollowers(services, app.log);
      }
      // Outbound webhooks: this process claims its share of the queued events.
      services.dispatcher.start((err) => app.log.error({ err }, "event dispatch failed"));
      app.log.info({ database: where, adminApi: config.adminToken !== null }, `storefront serving on http://${config.host}:${config.port} (${where}); ${admin}; API docs at /docs`);
    });
}

/** The address cannot be used: say which and what to change. */
function listenProblem(err: unknown, config: Readonly<Config>): CliError | null {
  const code = (err as { code?: unknown } | null)?.code;
  const where = `${config.host}:${config.port}`;
  if (code === "EADDRINUSE") return new CliError(`port ${config.port} is in use on ${config.host}: stop the other server, or choose another port (PORT=3001 storefront serve)`);
  if (code === "EACCES") return new CliError(`not allowed to listen on ${where}: use a port above 1023 (PORT=3000)`);
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND") return new CliError(`HOST ${config.host} is not an address of this machine: use 127.0.0.1, 0.0.0.0 or one of its addresses`);
  return null;
}

