// The closed list of error codes, their HTTP statuses, and the one error envelope every failure uses:
// {"error":{"code","message","requestId","param"?}}. 5xx details are logged, never sent.
export const errorStatus = {
  invalid_request: 400,
  unknown_version: 400,
  unauthorized: 401,
  webhook_rejected: 401,
  forbidden: 403,
  csrf_failed: 403,
  source_not_allowed: 403,
  not_found: 404,
  store_not_found: 404,
  customer_not_found: 404,
  invoice_not_found: 404,
  plugin_not_found: 404,
  delivery_not_found: 404,
  key_not_found: 404,
  endpoint_not_found: 404,
  event_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  invalid_transition: 409,
  version_conflict: 409,
  payload_too_large: 413,
  uri_too_long: 414,
  unsupported_media_type: 415,
  invalid_plugin: 422,
  rate_limited: 429,
  internal_error: 500,
  plugin_error: 500,
  service_unavailable: 503,
  database_unavailable: 503,
  secrets_unavailable: 503,
  plugin_timeout: 504,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; requestId: string; param?: string; [extra: string]: unknown };
}

/** An expected failure that becomes an HTTP response. Anything else thrown is a bug and becomes a 500. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly param: string | undefined;
  /** Extra, safe-to-show fields merged into the error body (e.g. `currentStatus`). */
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: { param?: string; details?: Record<string, unknown> } = {}) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.status = errorStatus[code];
    this.param = options.param;
    this.details = options.details;
  }
}

export function errorBody(code: ErrorCode, message: string, requestId: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: { ...extra, code, message, requestId } };
}
