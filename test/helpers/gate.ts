// A local endpoint a test's plugin fetches: it counts the deliveries that reached the sandbox and holds
// each answer until released, so "in flight" is a fact when a test acts on it, not a guess about timing.
import { once } from "node:events";
import http from "node:http";
import type net from "node:net";

export interface Gate {
  url: string;
  /** Deliveries waiting at the gate. */
  arrived: () => number;
  /** Answers every waiting delivery, and every later one at once. */
  release: () => void;
  close: () => Promise<void>;
}

export async function gate(): Promise<Gate> {
  const held: http.ServerResponse[] = [];
  let released = false;
  const server = http.createServer((_req, res) => {
    if (released) res.end("ok");
    else held.push(res);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hold`,
    arrived: () => held.length,
    release: () => {
      released = true;
      for (const res of held.splice(0)) res.end("ok");
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Waits (polling, bounded) until `n` deliveries wait at the gate. */
export async function arrivedAtGate(g: Gate, n: number, output: () => string): Promise<void> {
  for (let i = 0; g.arrived() < n; i++) {
    if (i >= 600) throw new Error(`the deliveries did not reach the plugin: ${output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits (polling, bounded) until the server at `url` answers its liveness probe with 503: it is shutting down. */
export async function shuttingDown(url: string): Promise<void> {
  for (let i = 0; await fetch(`${url}/healthz`).then((r) => r.status !== 503, () => false); i++) {
    if (i >= 600) throw new Error("the server never began to shut down");
    await new Promise((r) => setTimeout(r, 50));
  }
}
