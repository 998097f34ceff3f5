// `storefront serve`: migrate, listen, and on SIGTERM/SIGINT finish the requests in flight, then exit.
import type { Command } from "commander";
import { buildApp } from "../app.ts";
import { createServices } from "../services.ts";
import { cliConfig } from "./context.ts";

export function registerServeCommand(program: Command): void {
  program
    .command("serve")
    .description("migrate the database and serve the HTTP API")
    .action(async () => {
      const config = cliConfig();
      const services = await createServices(config, { warmSandbox: true });
      const app = await buildApp(services);
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
      await app.listen({ port: config.port, host: config.host });
      const where = config.database.kind === "sqlite" ? `SQLite ${config.database.file}` : "PostgreSQL";
      prune();
      // Outbound webhooks: this process claims its share of the queued events.
      services.dispatcher.start((err) => app.log.error({ err }, "event dispatch failed"));
      app.log.info(`storefront serving on http://${config.host}:${config.port} (${where}); API docs at /docs`);
    });
}
