// The service's log lines (pino, JSON): the HTTP server's logger and the start-up logger `serve` uses
// before the server exists (migrations) are made from the same options, so every line has one shape.
import { pino, type Logger } from "pino";
import type { Config } from "../config.ts";

export function loggerOptions(config: Pick<Config, "logLevel">): { level: string } {
  return { level: config.logLevel };
}

/** A logger for what happens before the HTTP server (and its logger) exists. */
export function createStartupLogger(config: Pick<Config, "logLevel">): Logger {
  // Written at once, so its lines come before the server's, which are logged later.
  return pino(loggerOptions(config), pino.destination({ dest: 1, sync: true }));
}
