// Secret names follow the documented pattern (a Lua identifier of at most 64 characters, so a plugin
// reads `secrets.name`), through the admin API and the service the command line uses, on SQLite and
// PostgreSQL. A name outside it is a 400 naming `secrets`; nothing is stored.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AppError } from "../../src/errors.ts";
import { DIALECTS, createHarness, expectStatus, type Harness } from "../helpers/harness.ts";

const SOURCE = 'return { status = "ignore" }';
const BAD_NAMES = ["a-b", "has space", "x".repeat(20_000), "9lives", "", "dot.ted"];

for (const dialect of DIALECTS) {
  describe(`secret names on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await createHarness(dialect.name);
    });
    after(async () => {
      await h?.close();
    });

    for (const name of BAD_NAMES) {
      test(`the admin API refuses the secret name "${name.slice(0, 12)}" (${name.length} characters) with 400 naming secrets`, async () => {
        const store = await h.store();
        const r = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { source: SOURCE, secrets: { [name]: "v", ok_name: "w" } });
        expectStatus(r, 400);
        const error = r.json<{ error: { code: string; param: string } }>().error;
        assert.equal(error.code, "invalid_request");
        assert.equal(error.param, "secrets");
        expectStatus(await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p`), 404);
      });
    }

    test("the service (the command line's path) refuses a name with a space, and lists good names whole", async () => {
      const store = await h.store();
      await assert.rejects(
        h.services.plugins.install(store.id, "p", { source: SOURCE, secrets: { "two words": "v" } }),
        (err: unknown) => err instanceof AppError && err.code === "invalid_request" && err.param === "secrets",
      );
      await h.services.plugins.install(store.id, "p", { source: SOURCE, secrets: { signingSecret: "v", _under_score9: "w" } });
      const view = await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p`);
      assert.deepEqual(view.json<{ secretNames: string[] }>().secretNames, ["_under_score9", "signingSecret"]);
    });

    test("a null value still deletes a secret of a valid name", async () => {
      const store = await h.store();
      await h.services.plugins.install(store.id, "p", { source: SOURCE, secrets: { a: "1", b: "2" } });
      const r = await h.admin("PUT", `/api/admin/stores/${store.id}/plugins/p`, { secrets: { a: null } });
      expectStatus(r, 200);
      assert.deepEqual((await h.admin("GET", `/api/admin/stores/${store.id}/plugins/p`)).json<{ secretNames: string[] }>().secretNames, ["b"]);
    });
  });
}
