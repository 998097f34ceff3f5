// `storefront endpoints …` and `storefront events …`: outbound webhooks on the local database, through
// the same service as the admin API (add an endpoint, list attempts, re-send an event). Adding or changing
// an endpoint asks the running service when it can (its ENDPOINT_ALLOW decides): src/cli/service-client.ts.
import { InvalidArgumentError, type Command } from "commander";
import { emit, emitList, type JsonOption, printJson, printTable, withServices } from "./context.ts";
import { SERVICE_HELP, type ServerOption, viaServiceOrDatabase } from "./service-client.ts";
import type { AttemptView } from "../events/events.service.ts";

const types = (v: string) =>
  v
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

const positive = (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1 || n > 500) throw new InvalidArgumentError("must be a whole number from 1 to 500");
  return n;
};

export function registerEventCommands(program: Command): void {
  registerEndpointCommands(program);
  registerEventsGroupCommands(program);
}

type StoreOption = JsonOption & { store: string };

/** `endpoints add|list|update|remove|rotate-secret|attempts`. */
function registerEndpointCommands(program: Command): void {
  const endpoints = program.command("endpoints").description("a store's outbound webhook endpoints (events out)");
  registerEndpointAdd(endpoints);

  endpoints
    .command("list")
    .description("list a store's endpoints")
    .requiredOption("--store <storeId>", "store id")
    .action(async (opts: StoreOption) => {
      await withServices(async (s) =>
        emitList(opts, await s.events.listEndpoints(opts.store), ["id", "url", "types", "enabled", "apiVersion", "disabledReason", "createdAt"], (e) => ({
          ...e,
          types: e.types.length === 0 ? "(all)" : e.types.join(","),
        })),
      );
    });

  registerEndpointUpdate(endpoints);

  endpoints
    .command("remove <endpointId>")
    .description("remove an endpoint (what was still queued for it is cancelled)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (endpointId: string, opts: StoreOption) => {
      await withServices(async (s) => {
        await s.events.removeEndpoint(opts.store, endpointId);
        emit(opts, { id: endpointId, removed: true }, () => process.stdout.write(`removed ${endpointId}\n`));
      });
    });

  endpoints
    .command("rotate-secret <endpointId>")
    .description("new signing secret, printed once; the old one keeps signing for 24 hours")
    .requiredOption("--store <storeId>", "store id")
    .action(async (endpointId: string, opts: { store: string }) => {
      await withServices(async (s) => printJson(await s.events.rotateSecret(opts.store, endpointId)));
    });

  registerEndpointAttempts(endpoints);
}

function registerEndpointAdd(endpoints: Command): void {
  endpoints
    .command("add")
    .description("add an endpoint; its signing secret (whsec_…) is printed once")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--url <url>", "http(s) URL receiving the events")
    .option("--types <types>", "comma-separated event types (default: all)", types)
    .option("--description <text>", "a label")
    .option("--disabled", "add it disabled")
    .option("--api-version <version>", "the API version its events are rendered in (default: the current one)")
    .option("--server <url>", "the running service to ask (default: http://HOST:PORT of this configuration)")
    .addHelpText("after", SERVICE_HELP)
    .action(async (opts: ServerOption & { store: string; url: string; types?: string[]; description?: string; disabled?: boolean; apiVersion?: string }) => {
      const input = {
        url: opts.url,
        ...(opts.types ? { types: opts.types } : {}),
        ...(opts.description !== undefined ? { description: opts.description } : {}),
        ...(opts.disabled ? { enabled: false } : {}),
        ...(opts.apiVersion !== undefined ? { version: opts.apiVersion } : {}),
      };
      printJson(
        await viaServiceOrDatabase(
          opts.server,
          (c) => c.request("POST", `/stores/${encodeURIComponent(opts.store)}/endpoints`, input),
          (s) => s.events.createEndpoint(opts.store, input),
        ),
      );
    });
}

function registerEndpointUpdate(endpoints: Command): void {
  endpoints
    .command("update <endpointId>")
    .description("change an endpoint; --enable turns a disabled one back on")
    .requiredOption("--store <storeId>", "store id")
    .option("--url <url>", "new URL")
    .option("--types <types>", "comma-separated event types; an empty string means all", types)
    .option("--description <text>", "a label")
    .option("--enable", "enable it")
    .option("--disable", "disable it")
    .option("--api-version <version>", "render its events in this API version from now on")
    .option("--server <url>", "the running service to ask (default: http://HOST:PORT of this configuration)")
    .addHelpText("after", SERVICE_HELP)
    .action(async (endpointId: string, opts: ServerOption & { store: string; url?: string; types?: string[]; description?: string; enable?: boolean; disable?: boolean; apiVersion?: string }) => {
      if (opts.enable && opts.disable) throw new InvalidArgumentError("give --enable or --disable, not both");
      const input = {
        ...(opts.url !== undefined ? { url: opts.url } : {}),
        ...(opts.types !== undefined ? { types: opts.types } : {}),
        ...(opts.description !== undefined ? { description: opts.description } : {}),
        ...(opts.enable ? { enabled: true } : opts.disable ? { enabled: false } : {}),
        ...(opts.apiVersion !== undefined ? { version: opts.apiVersion } : {}),
      };
      printJson(
        await viaServiceOrDatabase(
          opts.server,
          (c) => c.request("PATCH", `/stores/${encodeURIComponent(opts.store)}/endpoints/${encodeURIComponent(endpointId)}`, input),
          (s) => s.events.updateEndpoint(opts.store, endpointId, input),
        ),
      );
    });
}

function registerEndpointAttempts(endpoints: Command): void {
  endpoints
    .command("attempts <endpointId>")
    .description("attempts made to an endpoint, newest first")
    .requiredOption("--store <storeId>", "store id")
    .option("--event <eventId>", "only this event's attempts")
    .option("--limit <n>", "how many", positive, 50)
    .action(async (endpointId: string, opts: StoreOption & { event?: string; limit: number }) => {
      await withServices(async (s) => {
        const { attempts, nextCursor } = await s.events.attempts(opts.store, endpointId, { limit: opts.limit, ...(opts.event ? { eventId: opts.event } : {}) });
        // --json: the admin API's page shape.
        emit(opts, { data: attempts, pagination: { limit: opts.limit, nextCursor } }, () =>
          printTable(
            attempts.map((a) => ({ ...a, durationMs: Math.round(a.durationMs), detail: attemptDetail(a) })),
            ["createdAt", "eventId", "attempt", "outcome", "responseStatus", "durationMs", "detail"],
          ),
        );
      });
    });
}

/** `events list|show|resend`. */
function registerEventsGroupCommands(program: Command): void {
  const events = program.command("events").description("a store's events: list them, show one, send one again");

  events
    .command("list")
    .description("the store's events, oldest first (as the feed shows them)")
    .requiredOption("--store <storeId>", "store id")
    .option("--types <types>", "comma-separated event types", types)
    .option("--cursor <cursor>", "continue after this position (printed at the end)")
    .option("--limit <n>", "how many", positive, 100)
    .action(async (opts: StoreOption & { types?: string[]; cursor?: string; limit: number }) => {
      await withServices(async (s) => {
        const page = await s.events.feed(opts.store, { limit: opts.limit, ...(opts.types ? { types: opts.types.join(",") } : {}), ...(opts.cursor ? { cursor: opts.cursor } : {}) });
        // --json: a list in the admin API's page shape; `nextCursor` continues as --cursor.
        emit(opts, { data: page.events, pagination: { limit: opts.limit, nextCursor: page.nextCursor } }, () => {
          printTable(
            page.events.map((e) => ({ id: e.id, type: e.type, createdAt: e.createdAt, subject: subject(e.data) })),
            ["id", "type", "createdAt", "subject"],
          );
          process.stdout.write(`next cursor: ${page.nextCursor}\n`);
        });
      });
    });

  events
    .command("show <eventId>")
    .description("one event as endpoints receive it")
    .requiredOption("--store <storeId>", "store id")
    .action(async (eventId: string, opts: { store: string }) => {
      await withServices(async (s) => printJson(await s.events.getEvent(opts.store, eventId)));
    });

  events
    .command("resend <eventId>")
    .description("send an event again (same webhook-id) to one endpoint or every subscribed one; `serve` sends it")
    .requiredOption("--store <storeId>", "store id")
    .option("--endpoint <endpointId>", "only this endpoint")
    .action(async (eventId: string, opts: { store: string; endpoint?: string }) => {
      await withServices(async (s) => printJson(await s.events.resend(opts.store, eventId, opts.endpoint)));
    });
}

/**
 * The table's last column: why no answer came, in full (it names the fix), else the start of the answer,
 * cut at a word with an ellipsis.
 */
function attemptDetail(a: AttemptView): string {
  if (a.error !== null) return a.error.replace(/\s+/g, " ");
  const text = a.responseExcerpt.replace(/\s+/g, " ").trim();
  if (text.length <= 60) return text;
  const cut = text.slice(0, 60);
  const space = cut.lastIndexOf(" ");
  return `${space > 30 ? cut.slice(0, space) : cut}…`;
}

function subject(data: Record<string, unknown>): string {
  const invoice = data.invoice as { id?: string; status?: string } | undefined;
  if (invoice?.id) return `${invoice.id} (${invoice.status})`;
  const delivery = data.delivery as { id?: string; pluginName?: string } | undefined;
  return delivery?.id ? `${delivery.id} (${delivery.pluginName})` : "";
}
