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
      const services = await createServices(config);
      const app = await buildApp(services);
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        app.log.info({ signal }, "shutting down: finishing requests in flight");
        const force = setTimeout(() => process.exit(1), 30_000);
        force.unref();
        app
          .close()
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
      app.log.info(`storefront serving on http://${config.host}:${config.port} (${where}); API docs at /docs`);
    });
}
