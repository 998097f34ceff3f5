// The service's logger (pino): JSON lines for machines, or pino's own pretty printer for a person at a
// terminal. LOG_FORMAT decides when set; otherwise a terminal that is not production gets pretty output
// and everything else (a pipe, a file, a container's log driver, NODE_ENV=production) gets JSON.
// JSON lines carry ISO 8601 times in UTC: read as they are during an incident, and parsed by every log
// shipper as well as epoch milliseconds are.
import { createRequire } from "node:module";
import pino, { type Logger } from "pino";
import type PinoPretty from "pino-pretty";

// pino-pretty (about 30 modules) is loaded only for pretty output: a service writing JSON never loads it.
const require = createRequire(import.meta.url);
const pinoPretty = (): typeof PinoPretty => require("pino-pretty") as typeof PinoPretty;

export type LogFormat = "pretty" | "json";

export interface LogTarget {
  /** LOG_FORMAT; null: decided by the terminal and NODE_ENV. */
  format: LogFormat | null;
  isTTY: boolean;
  nodeEnv: string | undefined;
}

/** Pretty only for a person: an explicit LOG_FORMAT, else a terminal outside production. */
export function chooseLogFormat(target: LogTarget): LogFormat {
  if (target.format !== null) return target.format;
  return target.isTTY && target.nodeEnv !== "production" ? "pretty" : "json";
}

export interface LoggerOptions {
  level: string;
  format: LogFormat | null;
  /** Where lines go: standard output by default (tests pass a stream). */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
  nodeEnv?: string | undefined;
}

export function createLogger(options: LoggerOptions): Logger {
  const destination = options.destination ?? process.stdout;
  const format = chooseLogFormat({ format: options.format, isTTY: destination.isTTY === true, nodeEnv: options.nodeEnv ?? process.env.NODE_ENV });
  if (format === "pretty") {
    // In this thread (a stream, not a transport's worker thread): nothing more to start or to stop.
    const pretty = pinoPretty()({ destination, colorize: destination.isTTY === true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname", sync: true });
    return pino({ level: options.level }, pretty);
  }
  const json = { level: options.level, timestamp: pino.stdTimeFunctions.isoTime };
  return options.destination ? pino(json, options.destination) : pino(json);
}
