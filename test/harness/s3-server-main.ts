/**
 * A real S3-compatible server (s3rver: the S3 REST API over a directory,
 * signatures checked with the access key S3RVER / S3RVER) as a process of
 * its own, for test/harness/s3.ts: args are the directory, the port (0:
 * one the system picks) and the buckets to create; it prints its port as
 * one JSON line once listening.
 */
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";

interface S3rverServer {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverClass = new (opts: {
  port: number;
  address: string;
  silent: boolean;
  directory: string;
  configureBuckets: Array<{ name: string }>;
}) => S3rverServer;

// s3rver is CommonJS without type declarations.
const S3rver = createRequire(import.meta.url)("s3rver") as S3rverClass;
const [directory, port, ...buckets] = process.argv.slice(2);
if (!directory || port === undefined) throw new Error("usage: s3-server-main DIR PORT [BUCKET...]");
const server = new S3rver({
  port: Number(port),
  address: "127.0.0.1",
  silent: true,
  directory,
  configureBuckets: buckets.map((name) => ({ name })),
});
const address = await server.run();
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
process.once("SIGTERM", () => void server.close().then(() => process.exit(0)));
