// Slow and greedy clients against a real `storefront serve` process: a slowloris connection (headers a
// byte at a time, never finished) is closed after the header timeout while the service keeps answering;
// a body sent a byte at a time is cut off at the request timeout; a silent kept-alive connection is
// closed after the idle timeout; connections past the cap are refused.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { startServer, type ServerProcess } from "./helpers/server.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function connect(url: string): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Resolves when the server closes the socket, with what it sent before closing. */
function closed(socket: net.Socket): Promise<string> {
  let received = "";
  socket.on("data", (d: Buffer) => (received += d.toString("latin1")));
  socket.on("error", () => {});
  return new Promise((resolve) => socket.once("close", () => resolve(received)));
}

describe("slow clients", () => {
  let cwd: string;
  let server: ServerProcess;
  before(async () => {
    cwd = mkdtempSync(path.join(os.tmpdir(), "storefront-slow-"));
    server = await startServer({
      __CWD: cwd,
      DATABASE_URL: `sqlite:${path.join(cwd, "sf.db")}`,
      SECRETS_KEY: randomBytes(32).toString("hex"),
      HTTP_HEADERS_TIMEOUT_MS: "1000",
      HTTP_REQUEST_TIMEOUT_MS: "2000",
      HTTP_IDLE_TIMEOUT_MS: "1500",
      PLUGIN_WALL_MS: "1000",
      HTTP_MAX_CONNECTIONS: "6",
    });
  });
  after(async () => {
    await server?.stop();
    rmSync(cwd, { recursive: true, force: true });
  });

  test("the settings have defaults, and a header timeout above the request timeout is refused", () => {
    assert.deepEqual(loadConfig({}).http, { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, idleTimeoutMs: 72_000, maxConnections: 1000, shutdownTimeoutMs: 30_000 });
    assert.throws(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: "5000", HTTP_REQUEST_TIMEOUT_MS: "4000" }), /HTTP_HEADERS_TIMEOUT_MS \(5000\) must not be longer than HTTP_REQUEST_TIMEOUT_MS/);
    assert.throws(() => loadConfig({ HTTP_IDLE_TIMEOUT_MS: "5000" }), /HTTP_IDLE_TIMEOUT_MS \(5000\) must be longer than PLUGIN_WALL_MS \(10000\)/);
  });

  test("a slowloris connection (headers a byte at a time, never finished) is closed; the service keeps answering", async () => {
    const socket = await connect(server.url);
    const gone = closed(socket);
    let isClosed = false;
    void gone.then(() => (isClosed = true));
    const head = `POST /api/paymentPlugins?pluginName=x&storeId=y HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${"a".repeat(500)}`;
    const started = performance.now();
    let sent = 0;
    let answered = 0;
    // One byte every 50 ms (40 bytes past the 1 s header timeout would take 2 s), and a normal request every 200 ms.
    while (!isClosed && performance.now() - started < 8_000) {
      if (sent < head.length) socket.write(head[sent++]!);
      if (sent % 4 === 0) {
        const r = await fetch(`${server.url}/healthz`);
        assert.equal(r.status, 200);
        await r.arrayBuffer();
        answered++;
      }
      await sleep(50);
    }
    const elapsed = performance.now() - started;
    if (!isClosed) socket.destroy();
    assert.ok(isClosed, "the slowloris connection was still open after 8 s");
    const received = await gone;
    assert.ok(elapsed >= 900, `closed after ${elapsed} ms, before the header timeout`);
    assert.ok(sent < head.length, "closed before the client ran out of header bytes");
    assert.ok(received === "" || received.startsWith("HTTP/1.1 408"), `answer: ${received.slice(0, 100)}`);
    assert.ok(answered >= 3, `${answered} normal requests answered meanwhile`);
  });

  test("a body sent a byte at a time is cut off at the request timeout, with 408", async () => {
    const socket = await connect(server.url);
    const gone = closed(socket);
    let isClosed = false;
    void gone.then(() => (isClosed = true));
    socket.write("POST /api/paymentPlugins?pluginName=x&storeId=y HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n");
    const started = performance.now();
    let sent = 0;
    // One byte every 50 ms: 1000 bytes would take 50 s; the request timeout is 2 s.
    while (!isClosed && performance.now() - started < 8_000) {
      socket.write("x");
      sent++;
      await sleep(50);
    }
    const elapsed = performance.now() - started;
    if (!isClosed) socket.destroy();
    assert.ok(isClosed, "the slow body's connection was still open after 8 s");
    const received = await gone;
    assert.ok(elapsed >= 1_900, `closed after ${elapsed} ms, before the request timeout`);
    assert.ok(sent < 1000);
    assert.match(received, /^HTTP\/1.1 408/);
  });

  test("a connection that sends nothing at all is closed", async () => {
    const socket = await connect(server.url);
    const started = performance.now();
    const received = await Promise.race([closed(socket), sleep(8_000).then(() => "still open")]);
    assert.notEqual(received, "still open");
    assert.ok(performance.now() - started >= 900);
    socket.destroy();
  });

  test("a kept-alive connection left silent is closed after the idle timeout", async () => {
    const socket = await connect(server.url);
    const gone = closed(socket);
    socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n");
    const started = performance.now();
    const received = await Promise.race([gone, sleep(8_000).then(() => "still open")]);
    socket.destroy();
    assert.match(received, /^HTTP\/1.1 200/, "answered, then closed");
    assert.ok(performance.now() - started >= 1_000, "kept alive for a while first");
  });

  test("connections past HTTP_MAX_CONNECTIONS are closed as they arrive; the service answers again when they go", async () => {
    const sockets: net.Socket[] = [];
    let refused = -1;
    for (let i = 0; i < 10 && refused < 0; i++) {
      const socket = await connect(server.url);
      sockets.push(socket);
      const reply = new Promise<string>((resolve) => {
        let data = "";
        socket.on("data", (d: Buffer) => {
          data += d.toString("latin1");
          if (data.includes("\r\n\r\n")) resolve(data);
        });
        socket.on("error", () => resolve("error"));
        socket.once("close", () => resolve(data === "" ? "closed" : data));
      });
      socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n");
      const answer = await reply;
      if (!answer.startsWith("HTTP/1.1 200")) refused = i;
    }
    // Six allowed; this test's fetch may hold one kept-alive connection of its own.
    assert.ok(refused === 5 || refused === 6, `connection ${refused} was the first refused`);
    for (const s of sockets) s.destroy();
    await sleep(100);
    const r = await fetch(`${server.url}/healthz`);
    assert.equal(r.status, 200);
  });
});
