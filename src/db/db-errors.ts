// Database errors the services react to, recognised the same way on both dialects.

/** A unique or primary key constraint refused the write (SQLite or PostgreSQL 23505). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "23505";
}
