// The benchmark's server process: the real app (buildApp) on a seeded database, plus one route per case
// that sends that case's page from memory through the same response schema — the serialization limit.
// Started by run.ts with fork(); it answers on the IPC channel with its port and a fresh API key.
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { ListCustomersSchema } from "../../src/schemas/customers.schemas.ts";
import { ListInvoicesSchema } from "../../src/schemas/invoices.schemas.ts";
import { INVOICE_STATUSES } from "../../src/schemas/invoice-statuses.ts";
import { encodeCursor, parseListQuery, type ListQueryInput } from "../../src/lib/list-query.ts";
import { createServices } from "../../src/services.ts";
import { requireApiKey } from "../../src/auth/api-key.hook.ts";

export interface BenchCase {
  name: string;
  list: "customers" | "invoices";
  query: Record<string, string>;
}

export interface ServerRequest {
  storeId: string;
  cases: BenchCase[];
  /** Also serve each page from memory behind the list route's own hooks (key, rate limit, query schema). */
  pipeline?: boolean;
}

export interface ServerReady {
  port: number;
  key: string;
  /** Elements on each case's page, by case name. */
  pageSizes: Record<string, number>;
}

export const memoryPath = (c: BenchCase): string => `/bench/memory/${c.name}`;
export const pipelinePath = (c: BenchCase): string => `/bench/pipeline/${c.name}?${new URLSearchParams(c.query).toString()}`;

async function start(request: ServerRequest): Promise<FastifyInstance> {
  const config = loadConfig(process.env);
  const services = await createServices(config);
  // What-if runs only (run.ts --sqlite-cache-kib): the service as shipped keeps SQLite's default page cache.
  const cacheKiB = Number(process.env.BENCH_SQLITE_CACHE_KIB ?? "");
  if (cacheKiB > 0) services.db.sqlite?.pragma(`cache_size = -${cacheKiB}`);
  const { key } = await services.stores.createKey(request.storeId, { name: "read-api benchmark" });
  const app = await buildApp(services);

  // Each page exactly as the list route builds it (see customers.routes.ts / invoices.routes.ts).
  const pageSizes: Record<string, number> = {};
  for (const c of request.cases) {
    const q = parseListQuery(c.query as ListQueryInput, INVOICE_STATUSES);
    const pagination = (next: Parameters<typeof encodeCursor>[0] | null) => ({ limit: q.limit, nextCursor: next === null ? null : encodeCursor(next) });
    const schema = c.list === "customers" ? ListCustomersSchema : ListInvoicesSchema;
    let page: unknown;
    if (c.list === "customers") {
      const { customers, next } = await services.customers.list(request.storeId, q);
      page = { data: { customers }, pagination: pagination(next) };
      pageSizes[c.name] = customers.length;
    } else {
      const { invoices, next } = await services.invoices.list(request.storeId, q);
      page = { data: { invoices }, pagination: pagination(next) };
      pageSizes[c.name] = invoices.length;
    }
    app.get(memoryPath(c), { schema: { response: schema.response } }, async () => page);
    if (request.pipeline) {
      // Everything the list route does except reading the database: what the queries and assembly cost is
      // the difference between this route and the list route.
      app.get(
        memoryPath(c).replace("/memory/", "/pipeline/"),
        { schema, onRequest: requireApiKey(services.stores, `${c.list}:read`, services.signIn), config: { rateLimit: services.readRateLimit } },
        async (req) => {
          parseListQuery(req.query as ListQueryInput, INVOICE_STATUSES);
          return page;
        },
      );
    }
  }

  app.addHook("onClose", async () => services.close());
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  process.send!({ port, key, pageSizes } satisfies ServerReady);
  return app;
}

process.once("message", (request: ServerRequest) => {
  start(request)
    .then((app) => {
      process.once("SIGTERM", () => {
        app
          .close()
          .then(() => process.exit(0))
          .catch(() => process.exit(1));
      });
    })
    .catch((err: unknown) => {
      process.stderr.write(`benchmark server failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    });
});
