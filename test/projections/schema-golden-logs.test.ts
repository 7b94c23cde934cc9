/**
 * The golden log of every fleet-schema version, recorded by that version's
 * own code (test/fixtures/golden-logs, test/support/record-schema-golden-logs.ts),
 * folded by the current code through the real `llmgw replay` on a real
 * nats-server: every recording decodes, folds to the state recorded for it,
 * and the event of a kind from a future version each one holds is passed
 * over and counted, not fatal (docs/upgrades.md).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { decodeEvent, type LogRecord, openLog } from "../../src/log/index.js";
import { canonicalJson, FLEET_SCHEMA_VERSION, foldFleet } from "../../src/projections/index.js";
import { type NatsServer, startServer, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { rand } from "../support/gateway.js";
import { appendRaw, decodeFixture, maskStreamTimes } from "../support/golden-log.js";
import { SCHEMA_COMMITS } from "../support/old-release.js";
import { schemaGoldenLog, schemaGoldenReplay } from "../support/schema-golden-logs.js";

describe("the golden log of every fleet-schema version, folded by this version", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("keeps a recording of every schema version from 2 to the current one", () => {
    const schemas = SCHEMA_COMMITS.map((s) => s.schema);
    assert.deepEqual(
      schemas,
      Array.from({ length: FLEET_SCHEMA_VERSION - 1 }, (_, i) => i + 2),
      "a new FLEET_SCHEMA_VERSION needs its golden log (test/fixtures/README.md)",
    );
  });

  for (const { schema, commit } of SCHEMA_COMMITS) {
    it(`fleet schema ${schema} (written by ${commit.slice(0, 12)}) replays to its recorded state`, async () => {
      const records = decodeFixture(readFileSync(schemaGoldenLog(schema)));
      const unknown = records.filter((r) => decodeEvent(r.data).body.case === undefined).length;
      assert.ok(unknown >= 1, "each recording holds an event of a kind from a future version");
      const prefix = `g${schema}${rand()}.evt`;
      const log = await openLog({
        url: server.url,
        clientName: "schema-golden",
        name: uniqueStream(`G${schema}`),
        prefix,
      });
      try {
        const last = await appendRaw(log, records);
        assert.equal(last, records.length);
        const r = await runCli([
          "replay",
          "--json",
          ...["--nats", server.url, "--stream", log.stream, "--subject-prefix", prefix],
        ]);
        assert.equal(r.code, 0, r.stderr);
        const got = JSON.parse(r.stdout) as { seq: number; state: unknown };
        assert.equal(got.seq, records.length);
        assert.equal(
          canonicalJson(maskStreamTimes(got)),
          canonicalJson(JSON.parse(readFileSync(schemaGoldenReplay(schema), "utf8"))),
          `fleet schema ${schema}'s golden log no longer replays to its recorded state (test/fixtures/README.md)`,
        );
        assert.match(
          r.stderr,
          new RegExp(`passed over ${unknown} event\\(s\\) of a kind this version does not know`),
        );
        assert.doesNotMatch(r.stderr, /malformed/);
        // The command's fold is the library's.
        const read: LogRecord[] = [];
        for await (const x of log.read()) read.push(x);
        assert.equal(canonicalJson(got.state), canonicalJson(foldFleet(read)));
      } finally {
        await log.jsm.streams.delete(log.stream).catch(() => {});
        await log.close();
      }
    });
  }
});
