// The console's one way to the server: api<T>(method, path, body?) sends JSON with the session's CSRF
// token, and turns the error envelope into an ApiError. A 401 (the session ended) goes to sign-in.

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
let onUnauthorized: () => void = () => location.assign(`/console/signin?next=${encodeURIComponent(location.pathname)}`);

export const session = () => current;
export function setSession(s: Session | null): void {
  current = s;
}
/** What a 401 does (main.ts: go to the sign-in page inside the app). */
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

export async function api<T>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET" && current !== null) headers["x-csrf-token"] = current.csrfToken;
  const response = await fetch(path, { method, headers, credentials: "same-origin", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let json: unknown;
  try {
    json = text === "" ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  if (!response.ok) {
    const err = (json as { error?: { code?: string; message?: string } & Record<string, unknown> } | null)?.error;
    const failure = new ApiError(response.status, err?.code ?? "http_error", err?.message ?? `HTTP ${response.status}`, err ?? {});
    if (response.status === 401 && !path.startsWith("/console/api/session")) {
      current = null;
      onUnauthorized();
    }
    throw failure;
  }
  return json as T;
}

/** A store-scoped admin API path: adminPath(storeId, "plugins", name) → /api/admin/stores/<id>/plugins/<name>. */
export function adminPath(storeId: string, ...segments: string[]): string {
  return `/api/admin/stores/${encodeURIComponent(storeId)}${segments.map((s) => "/" + encodeURIComponent(s)).join("")}`;
}
