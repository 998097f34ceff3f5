// Outbound endpoints under the address policy, on SQLite and PostgreSQL: a name is resolved and every
// address checked before any connection is opened (a listener on 127.0.0.1 sees nothing at all, no TCP
// handshake, no TLS ClientHello), every refused address gives one error text (an open port and a closed
// one look the same), and ENDPOINT_ALLOW entries bound to a port allow that port at save time.
import assert from "node:assert/strict";
import { once } from "node:events";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { ENDPOINT_REFUSED } from "../../src/events/endpoint-target.ts";
import { createHarness, DIALECTS, expectStatus, type Harness } from "../helpers/harness.ts";
import { freePort } from "../helpers/server.ts";
import { startReceiver } from "../helpers/receiver.ts";

type Attempt = { outcome: string; responseStatus: number | null; error: string | null };

/** A TCP listener that only counts the connections it is offered. */
async function countingListener() {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.destroy();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function addEndpoint(h: Harness, storeId: string, url: string) {
  const r = await h.admin("POST", `/api/admin/stores/${storeId}/endpoints`, { url });
  expectStatus(r, 201);
  return r.json<{ id: string }>();
}

async function attemptErrors(h: Harness, storeId: string, endpointId: string): Promise<Attempt[]> {
  const r = await h.admin("GET", `/api/admin/stores/${storeId}/endpoints/${endpointId}/attempts`);
  expectStatus(r, 200);
  return r.json<{ data: Attempt[] }>().data;
}

/** One event (invoice.created) for every endpoint of the store, dispatched now. */
async function oneEvent(h: Harness, storeId: string) {
  const customer = await h.customer(storeId);
  await h.checkout(storeId, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 1 }] });
  await h.services.dispatcher.runDue();
}

for (const { name: dialect, skip } of DIALECTS) {
  describe(`endpoint connections checked before they are made, on ${dialect}`, { skip }, () => {
    let h: Harness;
    let listener: Awaited<ReturnType<typeof countingListener>>;
    before(async () => {
      h = await createHarness(dialect, {}, { dispatch: { timeoutMs: 2000 } });
      listener = await countingListener();
    });
    after(async () => {
      await listener.close();
      await h.close();
    });

    test("a name resolving to loopback is refused before connecting: the listener on 127.0.0.1 sees no connection, over http or https", async () => {
      const store = await h.store();
      const plain = await addEndpoint(h, store.id, `http://localhost:${listener.port}/hook`);
      const tls = await addEndpoint(h, store.id, `https://localhost:${listener.port}/hook`);
      await oneEvent(h, store.id);
      for (const ep of [plain, tls]) {
        const [a] = await attemptErrors(h, store.id, ep.id);
        assert.equal(a!.outcome, "failed");
        assert.equal(a!.error, ENDPOINT_REFUSED);
      }
      assert.equal(listener.connections(), 0, "no TCP connection, no ClientHello");
    });

    test("an open port and a closed port give the same error text (no port scan through the attempts)", async () => {
      const store = await h.store();
      const closed = await freePort();
      const open = await addEndpoint(h, store.id, `http://localhost:${listener.port}/`);
      const shut = await addEndpoint(h, store.id, `http://localhost:${closed}/`);
      const metadata = await addEndpoint(h, store.id, `http://localhost/latest/meta-data`);
      await oneEvent(h, store.id);
      const errors = await Promise.all([open, shut, metadata].map(async (ep) => (await attemptErrors(h, store.id, ep.id))[0]!.error));
      assert.deepEqual(errors, [ENDPOINT_REFUSED, ENDPOINT_REFUSED, ENDPOINT_REFUSED]);
      assert.equal(listener.connections(), 0);
    });

    test("refused addresses written as IP literals are refused at save with that one text, whatever the spelling", async () => {
      const store = await h.store();
      const messages = new Set<string>();
      for (const url of [`http://127.0.0.1:${listener.port}/`, "http://10.0.0.1/", "http://[::1]:22/", "http://0x7f.1/", "http://169.254.169.254/", "http://[::ffff:127.0.0.1]:8080/"]) {
        const r = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url });
        expectStatus(r, 400);
        messages.add(r.json<{ error: { message: string } }>().error.message);
      }
      assert.deepEqual([...messages], [`url is refused: ${ENDPOINT_REFUSED}`]);
      assert.equal(listener.connections(), 0);
    });
  });

  describe(`ENDPOINT_ALLOW entries with a port, on ${dialect}`, { skip }, () => {
    test("127.0.0.1:PORT allows that port at save and delivery, and no other port", async () => {
      const receiver = await startReceiver();
      const h = await createHarness(dialect, { ENDPOINT_ALLOW: `127.0.0.1:${receiver.port},localhost:${receiver.port}` }, { dispatch: { timeoutMs: 2000 } });
      try {
        const store = await h.store();
        const byAddress = await addEndpoint(h, store.id, `http://127.0.0.1:${receiver.port}/a`);
        const byName = await addEndpoint(h, store.id, `http://localhost:${receiver.port}/b`);
        const other = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: `http://127.0.0.1:${receiver.port + 1}/` });
        expectStatus(other, 400);
        await oneEvent(h, store.id);
        for (const ep of [byAddress, byName]) assert.equal((await attemptErrors(h, store.id, ep.id))[0]!.responseStatus, 200);
        assert.equal(receiver.received.length, 2);
      } finally {
        await h.close();
        await receiver.close();
      }
    });
  });
}
