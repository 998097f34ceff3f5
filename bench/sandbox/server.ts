// The benchmark's HTTP server (run as its own process so the load generator does not share its event
// loop): one Fastify instance on 127.0.0.1 with the plugin in plain TypeScript and in the sandbox,
// for sha256 and sha1. Prints "ready <port>" when listening; stops on SIGTERM.
import Fastify from "fastify";
import { createSandbox, type SandboxHost } from "../../src/sandbox/index.ts";
import { SECRET, luaPlugin, tsPlugin, type Hash } from "./plugins.ts";

const poolSize = Number(process.env.POOL_SIZE ?? 0) || undefined;
// Every request here comes from one store: by default it may use all workers but one.
const perStore = Number(process.env.PLUGIN_MAX_CONCURRENT_PER_STORE ?? 0) || undefined;
const sandbox = createSandbox({ ...(poolSize ? { poolSize } : {}), ...(perStore ? { maxConcurrentPerStore: perStore } : {}) });
const host: SandboxHost = { getInvoice: () => Promise.resolve(null) };
const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

for (const hash of ["sha256", "sha1"] as Hash[]) {
  const source = luaPlugin(hash);

  app.post(`/ts/${hash}`, async (req, reply) => {
    const result = tsPlugin(hash, req.headers, req.body as Buffer, SECRET);
    if (!result.ok) return reply.code(401).send({ error: result.message });
    return { status: result.status, invoiceId: result.invoiceId };
  });

  app.post(`/lua/${hash}`, async (req, reply) => {
    const outcome = await sandbox.run(
      {
        source,
        request: { method: req.method, body: req.body as Buffer, headers: req.headers as Record<string, string>, query: req.query as Record<string, string> },
        store: { id: "st_bench" },
        plugin: { name: "stripe-bench", version: 1 },
        secrets: { signingSecret: SECRET },
      },
      host,
    );
    if (!outcome.ok) return reply.code(outcome.error.kind === "rejected" ? 401 : 500).send({ error: outcome.error.message });
    return outcome.result;
  });
}

const address = await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT ?? 0) });
process.stdout.write(`ready ${new URL(address).port}\n`);
process.on("SIGTERM", () => {
  void app.close().then(() => sandbox.close()).then(() => process.exit(0));
});
