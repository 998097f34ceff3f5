// Real service processes for tests that need more than app.inject: `storefront serve` in a child process
// on a free loopback port, stopped gracefully or killed outright.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/main.ts");

export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, "close");
  return port;
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  stop(): Promise<number | null>;
  kill9(): Promise<void>;
}

/** Starts `storefront serve`; `__CWD` in env sets its working directory, an empty value unsets a variable. */
export async function startServer(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  let output = "";
  const { __CWD: cwd, ...vars } = env;
  const childEnv: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: "warn", PORT: String(port), HOST: "127.0.0.1", ...vars };
  if (vars.PORT === "") childEnv.PORT = String(port);
  for (const [k, v] of Object.entries(childEnv)) if (v === "") delete childEnv[k];
  const child = spawn(process.execPath, [MAIN, "serve"], { env: childEnv, cwd: cwd ?? process.cwd(), stdio: ["ignore", "pipe", "pipe"] });
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const url = `http://127.0.0.1:${port}`;
  // A hang guard, not a measure: a loaded machine migrating a fresh PostgreSQL schema can take a while.
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${output}`);
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`server did not become ready: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    child,
    output: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const [code] = (await once(child, "exit")) as [number | null];
      return code;
    },
    async kill9() {
      // A process killed by a signal has no exit code, only a signal code: either means it is gone.
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGKILL");
      await once(child, "exit");
    },
  };
}
