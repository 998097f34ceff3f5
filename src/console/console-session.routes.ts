// The console's session under /console/api/session: who is signed in on this browser, signing in (with the
// admin token or a console login, counted against the per-address sign-in limit), signing out.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import type { SignInGuard } from "../auth/sign-in-guard.ts";
import { AppError } from "../errors.ts";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import { SESSION_COOKIE, checkCsrf, checkOrigin, clearSessionCookie, readCookie, setSessionCookie } from "./console.auth.ts";
import type { ConsoleService, ConsoleSession } from "./console.service.ts";

const SessionSchema = Type.Object({
  kind: Type.String({ enum: ["admin", "user"], description: "Signed in with the admin token (every store) or a console login." }),
  email: Nullable(Type.String()),
  stores: Nullable(Type.Array(Type.String(), { description: "The stores this session may see; null: every store." })),
  csrfToken: Type.String({ description: "Send as x-csrf-token on every request that changes something." }),
  expiresAt: Type.String({ format: "date-time", description: "When the session ends unless used before (idle timeout, 12 h at most)." }),
});

const sessionView = (s: ConsoleSession) => ({ kind: s.kind, email: s.email, stores: s.stores, csrfToken: s.csrfToken, expiresAt: new Date(s.expiresAt).toISOString() });

/** The console's logins and sessions, and the per-address sign-in limit. */
export interface ConsoleSessionRoutesDeps {
  console: ConsoleService;
  signIn: SignInGuard;
}

const tags = ["console"];

export function consoleSessionRoutes(deps: ConsoleSessionRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const currentSession = async (request: FastifyRequest) => {
      const cookie = readCookie(request, SESSION_COOKIE);
      return cookie === null ? null : deps.console.authenticate(cookie);
    };

    app.get(
      "/api/session",
      { schema: { tags, summary: "The console session of this browser", security: [{ consoleSession: [] }], response: { 200: SessionSchema, ...errorResponses(401) } } },
      async (request) => {
        const session = await currentSession(request);
        if (session === null) throw new AppError("unauthorized", "Not signed in");
        return sessionView(session);
      },
    );

    app.post(
      "/api/session",
      {
        schema: {
          tags,
          summary: "Sign in to the console",
          description: "With the admin token (`{token}`: every store) or a console login (`{email, password}`, created by `storefront console users add`: its stores). Sets the `storefront_session` cookie. Failed attempts count against the per-address sign-in limit.",
          security: [],
          body: Type.Union([
            Type.Object({ token: Type.String({ minLength: 1, maxLength: 1000 }) }, { additionalProperties: false }),
            Type.Object({ email: Type.String({ minLength: 1, maxLength: 254 }), password: Type.String({ minLength: 1, maxLength: 1000 }) }, { additionalProperties: false }),
          ]),
          response: { 200: SessionSchema, ...errorResponses(400, 401, 403, 429) },
        },
      },
      async (request, reply) => {
        checkOrigin(request);
        // Counted before the (scrypt) check, so parallel attempts cannot outrun the limit; given back on success.
        const settle = deps.signIn.attempt("console", request.ip, reply);
        const body = request.body;
        let opened: Awaited<ReturnType<typeof deps.console.signInWithToken>>;
        try {
          opened = "token" in body ? await deps.console.signInWithToken(body.token) : await deps.console.signInWithPassword(body.email, body.password);
        } catch (err) {
          settle(true); // not checked (the database): not a failed attempt
          throw err;
        }
        settle(opened !== null);
        if (opened === null) throw new AppError("unauthorized", "token" in body ? "Wrong admin token" : "Wrong e-mail or password");
        setSessionCookie(request, reply, opened.cookie);
        return sessionView(opened.session);
      },
    );

    app.delete(
      "/api/session",
      { schema: { tags, summary: "Sign out of the console", security: [{ consoleSession: [] }], response: { 204: Type.Null({ description: "Signed out." }), ...errorResponses(401, 403) } } },
      async (request, reply) => {
        const cookie = readCookie(request, SESSION_COOKIE);
        const session = cookie === null ? null : await deps.console.authenticate(cookie);
        if (cookie === null || session === null) throw new AppError("unauthorized", "Not signed in");
        checkCsrf(request, session);
        await deps.console.signOut(cookie);
        clearSessionCookie(request, reply);
        return reply.code(204).send(null);
      },
    );
  };
}
