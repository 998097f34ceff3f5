// The console's live view of deliveries (Server-Sent Events over the deliveries poller): what the stream
// carries (new deliveries only, on the log's filters, a heartbeat comment), that it ends when the client
// goes or the server closes, and who may open it (a signed-in session; a login only for its own stores).
import assert from "node:assert/strict";
import type { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { createDeliveryStreams } from "../../src/console/deliveries.stream.ts";
import { CONSOLE_CSP } from "../../src/console/console.routes.ts";
import { ADMIN_TOKEN, createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

/** Collects a stream's text; `until` resolves when the text matches. */
function collect(stream: Readable) {
  let text = "";
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    text += chunk;
    for (const w of [...waiters]) if (w.re.test(text)) w.resolve();
  });
  const ended = new Promise<void>((resolve) => stream.once("end", () => resolve()));
  return {
    text: () => text,
    ended,
    until(re: RegExp, ms = 5_000): Promise<void> {
      if (re.test(text)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`stream did not show ${re} in ${ms} ms: ${JSON.stringify(text)}`)), ms);
        waiters.push({ re, resolve: () => (clearTimeout(timer), resolve()) });
      });
    },
  };
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`console delivery stream on ${dialect}`, { skip }, () => {
    let h: Harness;
    let store: { id: string };
    before(async () => {
      h = await createHarness(dialect);
      store = await h.store();
      await installPlugin(h, store.id, "ok", `log("seen", "info") return { status = "ignore" }`);
      await installPlugin(h, store.id, "other", `return { status = "ignore" }`);
    });
    after(() => h.close());

    test("sends each new delivery once as a `delivery` event with its summary, not what was there before, and a heartbeat comment", async () => {
      expectStatus(await deliver(h, store.id, "ok", "{}"), 200);
      const streams = createDeliveryStreams(h.services, { intervalMs: 20, heartbeatMs: 60 });
      const gone = new AbortController();
      const s = collect(streams.open(store.id, {}, gone.signal, h.app.log));
      await s.until(/^retry: 3000\n/);
      await new Promise((r) => setTimeout(r, 60)); // the first poll has marked what was already there
      const fresh = await deliver(h, store.id, "ok", "{}");
      expectStatus(fresh, 200);
      const id = String(fresh.headers["x-delivery-id"]);
      await s.until(/event: delivery\n/);
      await s.until(/: heartbeat\n\n/);
      const events = s.text().split("\n\n").filter((e) => e.startsWith("event: delivery"));
      assert.equal(events.length, 1, "the older delivery is not news");
      const [, idLine, dataLine] = events[0]!.split("\n");
      assert.equal(idLine, `id: ${id}`);
      const d = JSON.parse(dataLine!.replace(/^data: /, "")) as { id: string; pluginName: string; outcome: string };
      assert.deepEqual([d.id, d.pluginName, d.outcome], [id, "ok", "ignored"]);
      assert.equal(streams.size, 1);
      gone.abort();
      await s.ended;
      assert.equal(streams.size, 0, "the client went: the poller stopped");
    });

    test("follows the log's filters, and closeAll ends every stream", async () => {
      const streams = createDeliveryStreams(h.services, { intervalMs: 20 });
      const a = collect(streams.open(store.id, { pluginName: "other" }, new AbortController().signal, h.app.log));
      const b = collect(streams.open(store.id, {}, new AbortController().signal, h.app.log));
      await new Promise((r) => setTimeout(r, 60));
      expectStatus(await deliver(h, store.id, "ok", "{}"), 200);
      const other = await deliver(h, store.id, "other", "{}");
      await a.until(new RegExp(`id: ${String(other.headers["x-delivery-id"])}`));
      await b.until(/event: delivery[^]*event: delivery/);
      assert.equal(a.text().match(/event: delivery/g)!.length, 1, "only the filtered plugin's delivery");
      streams.closeAll();
      await Promise.all([a.ended, b.ended]);
      assert.equal(streams.size, 0);
    });

    test("ends at a heartbeat once the session no longer allows it", async () => {
      const streams = createDeliveryStreams(h.services, { intervalMs: 20, heartbeatMs: 30 });
      let allowed = true;
      const s = collect(streams.open(store.id, {}, new AbortController().signal, h.app.log, async () => allowed));
      await s.until(/: heartbeat\n\n: heartbeat\n\n/);
      allowed = false;
      await s.ended;
      assert.equal(streams.size, 0);
    });

    describe("over HTTP", () => {
      let base: string;
      let admin: string;
      let login: string;
      let theirs: { id: string };
      before(async () => {
        theirs = await h.store("Theirs");
        await h.services.console.addUser("ann@example.com", "correct horse battery", [store.id]);
        await h.app.listen({ host: "127.0.0.1", port: 0 });
        base = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`;
        const signIn = async (body: Record<string, string>) => {
          const r = await h.app.inject({ method: "POST", url: "/console/api/session", payload: body });
          expectStatus(r, 200);
          return /storefront_session=([^;]*)/.exec(String(r.headers["set-cookie"]))![1]!;
        };
        admin = await signIn({ token: ADMIN_TOKEN });
        login = await signIn({ email: "ann@example.com", password: "correct horse battery" });
      });

      const open = (storeId: string, cookie: string | null, query = "", signal?: AbortSignal) =>
        fetch(`${base}/console/api/stores/${storeId}/deliveries/stream${query}`, { headers: cookie === null ? {} : { cookie: `storefront_session=${cookie}` }, ...(signal ? { signal } : {}) });

      test("a signed-in session gets an event stream with the console's CSP, and a new delivery on it", async () => {
        const gone = new AbortController();
        const r = await open(store.id, admin, "?outcome=ignored", gone.signal);
        assert.equal(r.status, 200);
        assert.match(r.headers.get("content-type")!, /^text\/event-stream/);
        assert.equal(r.headers.get("cache-control"), "no-store");
        assert.equal(r.headers.get("content-security-policy"), CONSOLE_CSP);
        assert.equal(r.headers.get("x-content-type-options"), "nosniff");
        const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
        let text = "";
        const posted = (async () => {
          await new Promise((res) => setTimeout(res, 1_300)); // after the stream's first poll (1 s)
          return String((await deliver(h, store.id, "ok", "{}")).headers["x-delivery-id"]);
        })();
        const deadline = Date.now() + 6_000;
        while (!/event: delivery/.test(text) && Date.now() < deadline) {
          const { value, done } = await reader.read();
          if (done) break;
          text += value;
        }
        assert.match(text, new RegExp(`id: ${await posted}\n`));
        gone.abort();
      });

      test("no session: 401; a login opening another store's stream: 404 as if it did not exist; a bad filter: 400", async () => {
        const none = await open(store.id, null);
        assert.equal(none.status, 401);
        const foreign = await open(theirs.id, login);
        assert.equal(foreign.status, 404);
        assert.equal(((await foreign.json()) as { error: { code: string } }).error.code, "store_not_found");
        assert.equal((await open("st_nope", admin)).status, 404);
        assert.equal((await open(store.id, admin, "?outcome=paid")).status, 400);
        const own = new AbortController();
        const mine = await open(store.id, login, "", own.signal);
        assert.equal(mine.status, 200);
        own.abort();
      });

      test("closing the server ends open streams instead of waiting for the browsers to leave", async () => {
        const r = await open(store.id, admin);
        assert.equal(r.status, 200);
        const ended = r.body!.pipeTo(new WritableStream()).then(() => "ended", () => "ended");
        await h.app.close();
        // app.close() returned: it did not wait for the browser to leave, and the stream ended with it.
        assert.equal(await ended, "ended");
      });
    });
  });
}
