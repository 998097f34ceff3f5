// Database errors the services react to, recognised the same way on both dialects.

// Connection exception, insufficient resources, operator intervention, and what a server says when a
// connection cannot be opened: the database dropped or not created yet (3D000 invalid_catalog_name), the
// role or its password changed (28xxx). None is the request's fault, and each heals without a restart.
const PG_UNAVAILABLE_CLASSES = ["08", "53", "57P", "3D000", "28"];
const NET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);
// postgres.js (the reader threads' statements): its connection lost, ended or never made.
const POSTGRES_JS_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "CONNECT_TIMEOUT"]);
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|PROTOCOL|NOMEM)/;

/**
 * The database cannot serve right now (connection lost or refused, server shutting down or out of
 * connections, SQLite busy past its timeout or out of disk): the request is answered 503 and retried,
 * never 500. Errors of the request itself (a constraint, bad SQL) are not this.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err === null || typeof err !== "object") return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") {
    if (NET_CODES.has(code) || POSTGRES_JS_CODES.has(code) || SQLITE_UNAVAILABLE.test(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code) && PG_UNAVAILABLE_CLASSES.some((c) => code.startsWith(c))) return true;
  }
  const message = (err as { message?: unknown }).message;
  // pg's own client errors carry no code. "Client was closed": a statement (a transaction's ROLLBACK, say)
  // sent on a connection pg has already closed after a fault.
  return typeof message === "string" && /^(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout exceeded when trying to connect)/.test(message);
}

/** A unique or primary key constraint refused the write (SQLite or PostgreSQL 23505). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "23505";
}
