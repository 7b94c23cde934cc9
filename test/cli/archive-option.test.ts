/**
 * `--archive` and the S3 settings, parsed (a pure function: what every
 * command that takes `--archive` opens). The S3 store itself is tested
 * against a real S3 server in test/history/s3-archive.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { archiveLocation } from "../../src/cli/archive-option.js";
import { CliError } from "../../src/cli/common.js";

const refused = (flags: Parameters<typeof archiveLocation>[0], message: RegExp) =>
  assert.throws(
    () => archiveLocation(flags),
    (err: unknown) => err instanceof CliError && message.test(err.message),
  );

describe("--archive", () => {
  it("names the NATS and directory stores as before", () => {
    assert.deepEqual(archiveLocation({}), { kind: "nats" });
    assert.deepEqual(archiveLocation({ archive: "nats:hist" }), { kind: "nats", bucket: "hist" });
    assert.deepEqual(archiveLocation({ archive: "dir:/var/lib/llmgw" }), {
      kind: "directory",
      path: "/var/lib/llmgw",
    });
  });

  it("s3://BUCKET/PREFIX with the endpoint, region and path style", () => {
    assert.deepEqual(archiveLocation({ archive: "s3://fleet-history" }), {
      kind: "s3",
      s3: { bucket: "fleet-history", prefix: "", forcePathStyle: false },
    });
    assert.deepEqual(
      archiveLocation({
        archive: "s3://fleet.history/prod/eu/",
        archiveS3Endpoint: "https://minio.internal:9000",
        archiveS3Region: "eu-west-1",
        archiveS3PathStyle: true,
      }),
      {
        kind: "s3",
        s3: {
          bucket: "fleet.history",
          prefix: "prod/eu",
          endpoint: "https://minio.internal:9000",
          region: "eu-west-1",
          forcePathStyle: true,
        },
      },
    );
  });

  it("refuses what it cannot use, naming the flag", () => {
    refused({ archive: "s3://" }, /names no bucket/);
    refused({ archive: "s3:fleet" }, /--archive for S3 is s3:\/\/BUCKET\/PREFIX/);
    refused({ archive: "s3://ab" }, /"ab" is not an S3 bucket name/);
    refused({ archive: "s3://Fleet/x" }, /"Fleet" is not an S3 bucket name/);
    refused({ archive: "s3://-fleet/x" }, /is not an S3 bucket name/);
    refused(
      { archive: "s3://fleet", archiveS3Endpoint: "minio:9000" },
      /--archive-s3-endpoint must be an http/,
    );
    refused(
      { archive: "s3://fleet", archiveS3Endpoint: "ftp://minio" },
      /--archive-s3-endpoint must be an http/,
    );
    refused({ archive: "s3://fleet", archiveS3Endpoint: "" }, /--archive-s3-endpoint must be a URL/);
    refused(
      { archive: "s3://fleet", archiveS3Region: "EU West" },
      /--archive-s3-region must be a region name/,
    );
    refused(
      { archive: "dir:/x", archiveS3Region: "eu-west-1" },
      /--archive-s3-region .* is for an archive in S3/,
    );
    refused({ archiveS3PathStyle: true }, /--archive-s3-path-style .* is for an archive in S3/);
    refused(
      { archive: "gs://fleet" },
      /--archive must be nats, nats:BUCKET, dir:PATH or s3:\/\/BUCKET\/PREFIX/,
    );
  });
});
