/**
 * The archive's pure parts and its directory and backup-file stores: the
 * segment format, object names, subject matching, the archiver's seal and
 * purge decisions, the retention flags' parsing; segments written through
 * `Archive` into a directory and read back; a backup file written and read.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  BundleFileReader,
  BundleFileWriter,
  parseRetentionAge,
  parseSize,
  purgeBound,
  sealAfterFor,
  sealDue,
} from "../../src/archiver/index.js";
import { parseSegmentName, segmentName, snapshotName, subjectMatches } from "../../src/log/archive/index.js";
import {
  Archive,
  DirectoryArchiveStore,
  decodeSegment,
  encodeSegment,
  LogError,
} from "../../src/log/index.js";
import { tempDir } from "../harness/nats.js";

const rec = (seq: number, subject = "x.evt.node.a") => ({
  seq,
  timeMs: 1_780_000_000_000 + seq,
  subject,
  data: new Uint8Array([seq & 0xff, 1, 2, 3]),
});

describe("archive units", () => {
  it("encodes and decodes a segment, and refuses damaged bytes", () => {
    const records = [rec(7), rec(8, "x.evt.session.é"), { ...rec(9), data: new Uint8Array() }];
    const bytes = encodeSegment(records);
    assert.deepEqual(decodeSegment(bytes, "s"), records);
    assert.throws(
      () => decodeSegment(bytes.subarray(0, bytes.length - 2), "s"),
      (e) => e instanceof LogError && e.code === "malformed",
    );
    assert.throws(() => decodeSegment(new Uint8Array([1, 2, 3]), "s"), /not a segment/);
  });

  it("names say what objects hold", () => {
    const s = { firstSeq: 1, lastSeq: 500, firstTimeMs: 10, lastTimeMs: 20 };
    assert.deepEqual(parseSegmentName(segmentName(s)), s);
    assert.equal(
      parseSegmentName("segments/0000000000000005-0000000000000004-0000000000000000-0000000000000000"),
      undefined,
    );
    assert.equal(parseSegmentName("segments/x.tmp-1"), undefined);
    assert.match(snapshotName({ seq: 3, timeMs: 4 }), /^snapshots\/0{15}3-0{15}4$/);
  });

  it("matches subjects with * and >", () => {
    assert.ok(subjectMatches("a.b.c", "a.b.c"));
    assert.ok(subjectMatches("a.*.c", "a.b.c"));
    assert.ok(subjectMatches("a.>", "a.b.c"));
    assert.ok(!subjectMatches("a.>", "a"));
    assert.ok(!subjectMatches("a.*", "a.b.c"));
    assert.ok(!subjectMatches("a.b", "a.b.c"));
  });

  it("seals at the size cap or the seal age, whichever first", () => {
    const cfg = { segmentBytes: 100, sealAfterMs: 1000 };
    assert.equal(sealDue({ bytes: 0, oldestTimeMs: undefined }, cfg, 5000), false);
    assert.equal(sealDue({ bytes: 100, oldestTimeMs: 4900 }, cfg, 5000), true);
    assert.equal(sealDue({ bytes: 10, oldestTimeMs: 4000 }, cfg, 5000), true);
    assert.equal(sealDue({ bytes: 10, oldestTimeMs: 4500 }, cfg, 5000), false);
    assert.equal(sealAfterFor(20_000), 5_000);
    assert.equal(sealAfterFor(0), 3_600_000);
  });

  it("purges only archived segments, past the age or while over the size", () => {
    const segs = [
      { firstSeq: 1, lastSeq: 10, lastTimeMs: 100, bytes: 50 },
      { firstSeq: 11, lastSeq: 20, lastTimeMs: 200, bytes: 50 },
      { firstSeq: 21, lastSeq: 30, lastTimeMs: 900, bytes: 50 },
    ];
    const stream = { firstSeq: 1, bytes: 200 };
    // Age 500 at time 1000: the first two are older.
    assert.equal(purgeBound(segs, stream, { maxAgeMs: 500, maxBytes: 0 }, 1000), 21);
    // Size 120: 200 → 150 → 100, two go.
    assert.equal(purgeBound(segs, stream, { maxAgeMs: 0, maxBytes: 120 }, 1000), 21);
    // Never past the archive's end, however old.
    assert.equal(purgeBound(segs, stream, { maxAgeMs: 1, maxBytes: 0 }, 1e9), 31);
    // Already purged: nothing new.
    assert.equal(purgeBound(segs, { firstSeq: 31, bytes: 0 }, { maxAgeMs: 1, maxBytes: 0 }, 1e9), 31);
    assert.equal(purgeBound([], stream, { maxAgeMs: 1, maxBytes: 1 }, 1e9), 1);
  });

  it("parses --log-max-age and --log-max-bytes, naming the form when wrong", () => {
    assert.deepEqual(parseRetentionAge("20s"), { ms: 20_000 });
    assert.deepEqual(parseRetentionAge("36h"), { ms: 36 * 3_600_000 });
    assert.deepEqual(parseRetentionAge("7d"), { ms: 7 * 86_400_000 });
    assert.deepEqual(parseRetentionAge("0"), { ms: 0 });
    assert.match((parseRetentionAge("7 days") as { error: string }).error, /20s, 90m, 36h or 7d/);
    assert.deepEqual(parseSize("16GiB"), { bytes: 16 * 2 ** 30 });
    assert.deepEqual(parseSize("500MB"), { bytes: 500e6 });
    assert.deepEqual(parseSize("1024"), { bytes: 1024 });
    assert.match((parseSize("lots") as { error: string }).error, /512MiB/);
  });

  it("keeps segments in a directory as one run, once each", async () => {
    const archive = new Archive(new DirectoryArchiveStore(tempDir("archive-dir")));
    assert.equal(await archive.extent(), undefined);
    assert.equal((await archive.writeSegment([rec(1), rec(2)])).written, true);
    // Sealed again after a restart: left as it is.
    assert.equal((await archive.writeSegment([rec(1), rec(2), rec(3)])).written, false);
    await assert.rejects(archive.writeSegment([rec(5)]), /does not follow the archive, which ends at 2/);
    await archive.writeSegment([rec(3), rec(4)]);
    assert.deepEqual(await archive.extent({ fresh: true }), {
      firstSeq: 1,
      lastSeq: 4,
      bytes: (await archive.segments()).reduce((n, s) => n + s.bytes, 0),
    });
    const read: number[] = [];
    for await (const b of archive.read({ fromSeq: 2, untilSeq: 3 })) read.push(...b.map((r) => r.seq));
    assert.deepEqual(read, [2, 3]);
    assert.equal(await archive.seqAtOrAfter(1_780_000_000_003), 3);
    assert.equal(await archive.seqAtOrAfter(1_780_000_000_099), undefined);
  });

  it("writes a backup file and reads its objects back", async () => {
    const path = join(tempDir("bundle"), "b.llmgw-backup");
    const w = new BundleFileWriter(path);
    await w.put("segments/a", new Uint8Array([1, 2, 3]));
    await w.put("backup.json", new TextEncoder().encode("{}"));
    await w.close();
    const r = new BundleFileReader(path);
    assert.deepEqual(await r.list("segments"), [{ name: "segments/a", bytes: 3 }]);
    assert.deepEqual(await r.get("segments/a"), new Uint8Array([1, 2, 3]));
    assert.equal(await r.get("missing"), undefined);
    await r.close();
  });
});
