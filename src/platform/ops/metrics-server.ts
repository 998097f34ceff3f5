// /metrics for Prometheus, on the main port or on its own (METRICS_PORT: a port the firewall keeps
// private while the API is public), and behind `Authorization: Bearer <METRICS_TOKEN>` when that is set.
// The separate port is a bare HTTP server that answers GET /metrics and nothing else; it opens when the
// application listens and closes with it.
import { createHash, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import type * as Http from "node:http";
import { createRequire } from "node:module";
import type { FastifyInstance } from "fastify";
import type { Metrics } from "./metrics.ts";

// node:http by require, not by import: importing it as an ES module builds its namespace, which reads every
// export, WebSocket's lazy getter among them, and so loads Node's bundled undici: ~25 ms of every start.
const require = createRequire(import.meta.url);

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Whether an Authorization header carries the metrics token (always, when there is none). */
export function metricsAuthorized(authorization: string | undefined, token: string | null): boolean {
  if (token === null) return true;
  const m = /^Bearer\s+(.+)$/i.exec(authorization ?? "");
  return m !== null && timingSafeEqual(digest(m[1]!.trim()), digest(token));
}

/** Starts the metrics port when the application listens, and closes it with the application. */
export function serveMetricsOnOwnPort(app: FastifyInstance, config: { readonly host: string; readonly metrics: { port: number | null; token: string | null } }, metrics: Metrics): void {
  const { port, token } = config.metrics;
  if (port === null) return;
  const http = require("node:http") as typeof Http;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("only GET /metrics here\n");
      return;
    }
    if (!metricsAuthorized(req.headers.authorization, token)) {
      res.writeHead(401, { "content-type": "text/plain", "www-authenticate": "Bearer" }).end("METRICS_TOKEN required\n");
      return;
    }
    metrics.registry.metrics().then(
      (body) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(body),
      (err: unknown) => {
        app.log.error({ err }, "metrics failed");
        res.writeHead(500).end();
      },
    );
  });
  app.addHook("onListen", async () => {
    server.listen(port, config.host);
    await once(server, "listening");
    app.log.info(`metrics on http://${config.host}:${port}/metrics${token === null ? "" : " (METRICS_TOKEN)"}`);
  });
  app.addHook("onClose", async () => {
    if (!server.listening) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
}
