// The console's HTTP side under /console: the HTML shell for every client route, the bundled assets, the
// editor's globals, and mounted from their own modules /console/api/session (console-session.routes.ts) and
// the live delivery view (deliveries-stream.routes.ts). Every response on a console path carries a
// strict Content Security Policy (the app sets it); the pages call the admin API with the session cookie
// (see admin.auth.ts).
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import { errorResponses } from "../schemas/common.schemas.ts";
import { type ConsoleAsset, consoleBundle } from "./console.assets.ts";
import { requireConsoleSession } from "./console.auth.ts";
import { type ConsoleSessionRoutesDeps, consoleSessionRoutes } from "./console-session.routes.ts";
import { type DeliveriesStreamRoutesDeps, deliveriesStreamRoutes } from "./deliveries-stream.routes.ts";
import { luaGlobals } from "./lua-globals.ts";

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** /console and everything under it, whichever route (or none) answers. */
export const isConsolePath = (url: string): boolean => url === "/console" || url.startsWith("/console/") || url.startsWith("/console?");

/**
 * The console's security headers. Set by the app for every answer on a console path, not by the console's
 * routes: a URL the router cannot decode (/console/%) or a method without a route (PUT /console) is
 * answered outside them, and a browser renders those answers on the console's origin too.
 */
export function setConsoleSecurityHeaders(reply: FastifyReply): void {
  reply.header("content-security-policy", CONSOLE_CSP);
  reply.header("x-content-type-options", "nosniff");
  reply.header("referrer-policy", "no-referrer");
  reply.header("cross-origin-opener-policy", "same-origin");
}

/** The console's sessions, the per-address sign-in limit, and what the live delivery view needs. */
export interface ConsoleRoutesDeps extends ConsoleSessionRoutesDeps, DeliveriesStreamRoutesDeps {}

export function consoleRoutes(deps: ConsoleRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const tags = ["console"];
    // In this order: the OpenAPI document lists paths as they were registered.
    await app.register(consoleSessionRoutes(deps));

    app.get(
      "/api/globals",
      {
        onRequest: requireConsoleSession(deps.console),
        schema: {
          tags,
          summary: "The plugin sandbox's globals, for the editor's completion",
          description: "Read from plugins-catalog/types/storefront.lua, the LuaLS definitions.",
          security: [{ consoleSession: [] }],
          response: {
            200: Type.Object({
              data: Type.Array(Type.Object({ label: Type.String(), type: Type.String({ enum: ["function", "variable", "namespace", "property"] }), detail: Type.String(), info: Type.String() })),
            }),
            ...errorResponses(401),
          },
        },
      },
      async () => ({ data: luaGlobals() }),
    );

    await app.register(deliveriesStreamRoutes(deps));

    app.get("/assets/:file", { schema: { hide: true } }, async (request, reply) => {
      const { file } = request.params as { file: string };
      const bundle = await consoleBundle();
      const found = bundle.byName.get(file);
      if (!found) throw new AppError("not_found", `No console asset ${file}`);
      return sendAsset(request, reply, found);
    });

    const shell = async (request: FastifyRequest, reply: FastifyReply) => {
      const path = request.url.split("?")[0]!;
      if (path.startsWith("/console/api/") || path.startsWith("/console/assets/")) throw new AppError("not_found", `No route ${request.method} ${path}`);
      const bundle = await consoleBundle();
      return reply.header("cache-control", "no-store").type("text/html; charset=utf-8").send(shellHtml(bundle.script, bundle.style));
    };
    app.get("/", { schema: { hide: true } }, shell);
    app.get("/*", { schema: { hide: true } }, shell);
  };
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: ConsoleAsset) {
  reply
    .header("cache-control", "public, max-age=31536000, immutable")
    .header("vary", "Accept-Encoding")
    .header("etag", asset.etag)
    .type(asset.contentType);
  if (request.headers["if-none-match"] === asset.etag) return reply.code(304).send();
  const accepted = String(request.headers["accept-encoding"] ?? "");
  if (accepts(accepted, "br")) return reply.header("content-encoding", "br").send(asset.br);
  if (accepts(accepted, "gzip")) return reply.header("content-encoding", "gzip").send(asset.gzip);
  return reply.send(asset.identity);
}

function accepts(header: string, coding: string): boolean {
  return header
    .split(",")
    .map((p) => p.trim().split(";"))
    .some(([name, ...params]) => name?.trim().toLowerCase() === coding && !params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p)));
}

const shellHtml = (script: string, style: string) =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>storefront console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/assets/${style}">
<script type="module" src="/console/assets/${script}"></script>
</head>
<body>
<div id="app"></div>
</body>
</html>
`;
