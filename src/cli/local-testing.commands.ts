// Testing on a developer's machine, as the Stripe CLI's `trigger` and Svix's "send example" allow:
// `storefront endpoints test` sends an example event to an endpoint now, signed like real ones, and
// `storefront plugins trigger` posts a catalogue fixture, signed with the store's real secret, to a
// running service's payment webhook. Nobody writes a signing script.
import { InvalidArgumentError, type Command } from "commander";
import type { ExampleSent } from "../events/endpoint-example.ts";
import { EVENT_TYPES, isEventType } from "../events/events.types.ts";
import { listCatalogFixtures } from "../plugins/catalog.ts";
import { FixtureSigningError, SIGNABLE_CATALOG, signFixtureRequest } from "../plugins/fixture-signing.ts";
import { CliError, cliConfig, emit, type JsonOption, withServices } from "./context.ts";
import { SERVICE_HELP, type ServerOption, serviceAnswers, serviceUrl, viaServiceOrDatabase } from "./service-client.ts";

/** The invoice id the catalogue's fixtures use, replaced by --invoice. */
const FIXTURE_INVOICE = "inv_catalog_0001";

const eventType = (v: string) => {
  if (!isEventType(v)) throw new InvalidArgumentError(`must be one of ${EVENT_TYPES.join(", ")}`);
  return v;
};

export function registerLocalTestingCommands(program: Command): void {
  const endpoints = program.commands.find((c) => c.name() === "endpoints") ?? program.command("endpoints");
  endpoints
    .command("test <endpointId>")
    .description("send an example event to an endpoint now, signed like real ones, and show its answer (not recorded, not retried)")
    .requiredOption("--store <storeId>", "store id")
    .option("--type <type>", "the event type", eventType, "invoice.completed")
    .option("--server <url>", "the running service to send it (default: http://HOST:PORT of this configuration)")
    .addHelpText("after", SERVICE_HELP.replace("the command asks the service", "the service sends it").replace("works on the\ndatabase", "sends it itself"))
    .action(async (endpointId: string, opts: JsonOption & ServerOption & { store: string; type: string }) => {
      const sent = await viaServiceOrDatabase<ExampleSent & { sentBy?: string }>(
        opts.server,
        async (c) => ({ ...(await c.request<ExampleSent>("POST", `/stores/${encodeURIComponent(opts.store)}/endpoints/${encodeURIComponent(endpointId)}/test`, { type: opts.type })), sentBy: c.url }),
        async (s) => ({ ...(await s.events.sendExample(opts.store, endpointId, opts.type)), sentBy: "this command" }),
      );
      emit(opts, sent, (r) => {
        const answer = r.responseStatus !== null ? `answered ${r.responseStatus} in ${Math.round(r.durationMs)} ms` : `did not answer: ${r.error ?? "?"}`;
        process.stdout.write(`${r.type} ${r.eventId} → ${r.endpointId} ${answer} (sent by ${r.sentBy ?? "?"})\n`);
        if (r.responseExcerpt !== "") process.stdout.write(`${r.responseExcerpt}\n`);
      });
      if (!sent.ok) process.exitCode = 1;
    });

  const plugins = program.commands.find((c) => c.name() === "plugins") ?? program.command("plugins");
  plugins
    .command("trigger <plugin> <fixture>")
    .description("post a catalogue fixture, signed with the store's secret for the plugin, to the running service's payment webhook")
    .requiredOption("--store <storeId>", "store id")
    .option("--invoice <invoiceId>", `put this invoice in the fixture instead of ${FIXTURE_INVOICE}`)
    .option("--catalog <name>", "the catalogue plugin whose fixture and signing scheme to use (default: the one the plugin was installed from)")
    .option("--server <url>", "the running service (default: http://HOST:PORT of this configuration)")
    .addHelpText(
      "after",
      `\nFixtures: plugins-catalog/fixtures/<catalog>/ (their names without .json). Signable: ${SIGNABLE_CATALOG.join(", ")}.\n` +
        "Example:\n  storefront plugins trigger stripe checkout-session-completed --store st_… --invoice inv_…\n",
    )
    .action(async (plugin: string, fixture: string, opts: JsonOption & ServerOption & { store: string; invoice?: string; catalog?: string }) => {
      const config = cliConfig();
      const url = serviceUrl(config, opts.server);
      const { catalog, secrets } = await withServices(async (s) => {
        const info = await s.plugins.get(opts.store, plugin);
        return { catalog: opts.catalog ?? info.catalog, secrets: (await s.plugins.loadForRun(opts.store, plugin)).secrets };
      });
      if (catalog === null) throw new CliError(`plugin ${plugin} was not installed from the catalogue: name the scheme and fixtures to use with --catalog (${SIGNABLE_CATALOG.join(", ")})`);
      const fixtures = listCatalogFixtures(catalog);
      const chosen = fixtures?.find((f) => f.name === fixture.replace(/\.json$/, ""));
      if (!chosen) throw new CliError(`no fixture ${fixture} for ${catalog}; there are: ${(fixtures ?? []).map((f) => f.name).join(", ")}`);
      if (chosen.request.bodyBase64 !== null) throw new CliError(`fixture ${fixture} has a binary body; only text bodies can be triggered`);
      const body = opts.invoice === undefined ? chosen.request.body : chosen.request.body.split(FIXTURE_INVOICE).join(opts.invoice);
      let headers: Record<string, string>;
      try {
        headers = signFixtureRequest(catalog, { headers: chosen.request.headers, body }, secrets, Math.floor(Date.now() / 1000));
      } catch (err) {
        if (err instanceof FixtureSigningError) throw new CliError(err.message);
        throw err;
      }
      if (!(await serviceAnswers(url))) throw new CliError(`no storefront service answers at ${url}: start it (npm start), or name it with --server`);
      const query = new URLSearchParams({ ...chosen.request.query, pluginName: plugin, storeId: opts.store });
      const r = await fetch(`${url}/api/paymentPlugins?${query}`, { method: chosen.request.method || "POST", headers, body });
      const text = await r.text();
      const answer = { status: r.status, deliveryId: r.headers.get("x-delivery-id"), body: parseJson(text) };
      emit(opts, answer, (a) => process.stdout.write(`${catalog} ${chosen.name} → ${plugin}: HTTP ${a.status} ${text}${a.deliveryId ? ` (delivery ${a.deliveryId})` : ""}\n`));
      if (!r.ok) process.exitCode = 1;
    });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
