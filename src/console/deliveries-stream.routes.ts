// GET /console/api/stores/:storeId/deliveries/stream: the deliveries page's live view, as Server-Sent
// Events (see deliveries.stream.ts). Signed-in console sessions only, and a console login only for its
// own stores (any other is answered 404, as if it did not exist).
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { FastifyReply } from "fastify";
import { AppError } from "../errors.ts";
import { errorResponses } from "../schemas/common.schemas.ts";
import { parseDeliveryFilters } from "../payments/deliveries.filters.ts";
import { DeliveryListQuerySchema } from "../payments/deliveries.routes.ts";
import type { Config } from "../config.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { SESSION_COOKIE, canSeeStore, readCookie, requireConsoleSession } from "./console.auth.ts";
import { createDeliveryStreams, type DeliveryStreamsDeps, type StreamOptions, type StreamRoom } from "./deliveries.stream.ts";
import type { ConsoleService } from "./console.service.ts";

const { pluginName, outcome, invoiceId } = DeliveryListQuerySchema.properties;

/** The streams' own needs, the caps on open streams, the store check and the console's sessions. */
export interface DeliveriesStreamRoutesDeps extends DeliveryStreamsDeps {
  config: DeliveryStreamsDeps["config"] & Pick<Config, "consoleStreams">;
  stores: StoresService;
  console: ConsoleService;
}

export function deliveriesStreamRoutes(deps: DeliveriesStreamRoutesDeps, options: Partial<StreamOptions> = {}): FastifyPluginAsyncTypebox {
  return async (app) => {
    const { perSession, max } = deps.config.consoleStreams;
    const streams = createDeliveryStreams(deps, { perOwner: perSession, max, ...options });
    // An open stream never ends by itself: shutdown ends them, or it would wait for every browser to leave.
    app.addHook("preClose", async () => streams.closeAll());

    app.get(
      "/api/stores/:storeId/deliveries/stream",
      {
        onRequest: requireConsoleSession(deps.console),
        schema: {
          operationId: "streamDeliveries",
          tags: ["console"],
          summary: "New deliveries of a store as they arrive (Server-Sent Events)",
          description:
            "For the console's signed-in session (cookie). One `delivery` event per new delivery (its summary as the delivery log lists it, its id as the event id), " +
            "narrowed by the same filters as the log; a comment every 15 s keeps the connection, and the stream ends when the session does. Deliveries already in the log are not sent: list them first. " +
            "Each stream holds a connection: a session may hold CONSOLE_STREAMS_PER_SESSION at once (429 rate_limited beyond, with Retry-After), the process CONSOLE_STREAMS_MAX (503 service_unavailable beyond), so that webhooks always find a connection.",
          security: [{ consoleSession: [] }],
          params: Type.Object({ storeId: Type.String() }),
          querystring: Type.Object({ pluginName, outcome, invoiceId }, { additionalProperties: false }),
          response: {
            200: { description: "An endless text/event-stream.", content: { "text/event-stream": { schema: Type.String() } } },
            ...errorResponses(400, 401, 404, 429, 503),
          },
        },
      },
      async (request, reply) => {
        const { storeId } = request.params;
        await deps.stores.requireStore(storeId);
        const filters = parseDeliveryFilters(request.query, deps.now());

        const gone = new AbortController();
        reply.raw.once("close", () => gone.abort());
        // A stream: Fastify pipes it (the schema's string type describes what the client reads).
        // The session is looked at again with each heartbeat: signing out (or the login's removal) ends the
        // stream within 15 s. An open live view counts as use of the session, like any page that polls.
        const cookie = readCookie(request, SESSION_COOKIE) ?? "";
        const stillAllowed = async () => {
          const session = await deps.console.authenticate(cookie);
          return session !== null && canSeeStore(session, storeId);
        };
        const owner = request.consoleSession?.idHash ?? cookie;
        refuseWithoutRoom(streams.room(owner), reply); // nothing awaited between this check and open()
        const body = streams.open(storeId, filters, gone.signal, request.log, stillAllowed, owner) as unknown as string;
        return reply.header("cache-control", "no-store").header("x-accel-buffering", "no").type("text/event-stream; charset=utf-8").send(body);
      },
    );
  };
}

/** The browser's EventSource gives up on an error answer (the page then says to reload); a client that retries waits this long. */
const STREAM_RETRY_AFTER_SECONDS = 30;

function refuseWithoutRoom(room: StreamRoom, reply: FastifyReply): void {
  if (room === "ok") return;
  reply.header("retry-after", String(STREAM_RETRY_AFTER_SECONDS));
  if (room === "owner_full") throw new AppError("rate_limited", "This session has as many live streams open as it may (CONSOLE_STREAMS_PER_SESSION): close one first");
  throw new AppError("service_unavailable", "The server has as many live streams open as it keeps room for (CONSOLE_STREAMS_MAX); retry later");
}
