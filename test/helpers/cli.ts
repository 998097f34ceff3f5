// The `storefront` command as a user runs it: bin/storefront.js in a child process, with its own
// environment and standard input; exit code and both outputs come back.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BIN = path.join(REPO, "bin/storefront.js");
/** The command runs the sources, not the install's bundle (test/cli/bundle.test.ts tests that); STOREFRONT_SOURCES=0 runs the bundle. */
const SOURCES = process.env.STOREFRONT_SOURCES ?? "1";

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `timeoutMs` bounds a command that should have stopped (a `serve` that should have refused): killed past it. */
export function runCli(args: string[], options: { env?: Record<string, string>; input?: string; cwd?: string; timeoutMs?: number } = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? REPO,
      env: { ...process.env, LOG_LEVEL: "silent", STOREFRONT_SOURCES: SOURCES, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    const timer = options.timeoutMs === undefined ? null : setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}

/** stdout as JSON, or a failure that shows what the command printed. */
export function jsonOf<T = Record<string, unknown>>(run: CliRun): T {
  if (run.code !== 0) throw new Error(`command failed (${run.code}): ${run.stderr}${run.stdout}`);
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`not JSON: ${run.stdout}`);
  }
}

/**
 * A command that runs until stopped (`deliveries tail`): started like runCli, sent SIGINT once its output
 * satisfies `ready`, and its whole run returned.
 */
export function runCliUntil(args: string[], ready: (stdout: string) => boolean, options: { env?: Record<string, string>; cwd?: string } = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? REPO,
      env: { ...process.env, LOG_LEVEL: "silent", STOREFRONT_SOURCES: SOURCES, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let signalled = false;
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (!signalled && ready(stdout)) {
        signalled = true;
        child.kill("SIGINT");
      }
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
