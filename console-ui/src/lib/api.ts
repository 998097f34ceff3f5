// The console's one way to the server: api<T>(method, path, body?) sends JSON with the session's CSRF
// token, and turns the error envelope into an ApiError. A 401 while signed in (the session ended) asks the
// reauthenticate handler to sign in again in place (a dialog), then sends the request again: nothing typed
// is lost. Without a handler, or when signing in again is abandoned, the 401 is thrown as usual.

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;
  constructor(status: number, code: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export interface Session {
  kind: "admin" | "user";
  email: string | null;
  stores: string[] | null;
  csrfToken: string;
  expiresAt: string;
}

let current: Session | null = null;
/** Signs in again; resolves true when a new session is open. */
let reauthenticate: (() => Promise<boolean>) | null = null;

export const session = () => current;
export function setSession(s: Session | null): void {
  current = s;
}
/** What a 401 does while signed in (main.ts: the sign-in dialog over the page). */
export function setReauthenticate(fn: () => Promise<boolean>): void {
  reauthenticate = fn;
}

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

async function send(method: Method, path: string, body: unknown): Promise<{ response: Response; json: unknown }> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && current !== null) headers["x-csrf-token"] = current.csrfToken;
  const response = await fetch(path, { method, headers, credentials: "same-origin", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  if (response.status === 204) return { response, json: undefined };
  const text = await response.text();
  try {
    return { response, json: text === "" ? null : JSON.parse(text) };
  } catch {
    return { response, json: null };
  }
}

export async function api<T>(method: Method, path: string, body?: unknown): Promise<T> {
  let { response, json } = await send(method, path, body);
  const isSessionCall = path.startsWith("/console/api/session");
  if (response.status === 401 && !isSessionCall && current !== null && reauthenticate !== null) {
    current = null;
    if (await reauthenticate()) ({ response, json } = await send(method, path, body));
  }
  if (!response.ok) {
    const err = (json as { error?: { code?: string; message?: string } & Record<string, unknown> } | null)?.error;
    throw new ApiError(response.status, err?.code ?? "http_error", err?.message ?? `HTTP ${response.status}`, err ?? {});
  }
  return json as T;
}

/** A store-scoped admin API path: adminPath(storeId, "plugins", name) → /api/admin/stores/<id>/plugins/<name>. */
export function adminPath(storeId: string, ...segments: string[]): string {
  return `/api/admin/stores/${encodeURIComponent(storeId)}${segments.map((s) => "/" + encodeURIComponent(s)).join("")}`;
}
