// The local HTTP server of a plugin test run: plays each fixture's recorded `http` answers for plugins
// that call their provider's API; `{{mock}}` in a fixture's secrets becomes its address.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Fixture, FixtureHttpAnswer } from "../../src/plugins/fixtures.ts";

const MOCK_PLACEHOLDER = "{{mock}}";

export interface MockServer {
  /** http://127.0.0.1:<port> */
  base: string;
  /** The answers of the next run. */
  use(answers: FixtureHttpAnswer[]): void;
  close(): Promise<void>;
}

/** Whether any fixture needs the server: HTTP answers, or a secret naming `{{mock}}`. */
export const needsMockServer = (fixtures: readonly Fixture[]): boolean => fixtures.some((f) => f.http.length > 0 || Object.values(f.secrets).some((v) => v.includes(MOCK_PLACEHOLDER)));

/** The fixture's secrets with `{{mock}}` replaced by the server's address (left as they are without one). */
export function secretsFor(fixture: Fixture, mock: MockServer | null): Record<string, string> {
  const secrets: Record<string, string> = {};
  for (const [k, v] of Object.entries(fixture.secrets)) secrets[k] = mock ? v.split(MOCK_PLACEHOLDER).join(mock.base) : v;
  return secrets;
}

/** A loopback HTTP server answering each run's `http` fixtures; unknown requests get 404. */
export async function startMockServer(): Promise<MockServer> {
  let answers: FixtureHttpAnswer[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const match = answers.find((a) => (a.method === null || a.method === req.method) && (a.path === url.pathname || a.path === `${url.pathname}${url.search}`));
      if (!match) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: `no http fixture for ${req.method} ${url.pathname}` }));
        return;
      }
      res.writeHead(match.status, match.headers);
      res.end(match.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    use(next) {
      answers = next;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
