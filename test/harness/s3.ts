/**
 * A real S3-compatible server for tests and benchmarks (s3rver, through
 * s3-server-main.ts) on a loopback port it picks itself, over a temporary
 * directory. It can be stopped and started again on the same port and
 * data (an S3 outage); `close()` and the harness's exit hooks remove it.
 */
import { join } from "node:path";
import { tempDir } from "./nats.js";
import { type Child, spawnScript } from "./proc.js";

/** s3rver's one access key. */
const ACCESS_KEY = "S3RVER";

/**
 * The environment of a process that reaches this server with the SDK's
 * default chain: its key in AWS_* variables, and nothing else the chain
 * could find (no shared files, no instance metadata: nothing leaves loopback).
 */
export function s3Env(credentials = true): Record<string, string> {
  const dir = tempDir("s3-home");
  return {
    ...(credentials ? { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: ACCESS_KEY } : {}),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, "credentials"),
    AWS_CONFIG_FILE: join(dir, "config"),
    AWS_EC2_METADATA_DISABLED: "true",
  };
}

export interface S3Server {
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly endpoint: string;
  readonly dir: string;
  /** The credentials of the server's key, for an in-process client. */
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
  /** `--archive s3://BUCKET/PREFIX` and the endpoint flags for an llmgw command. */
  archiveFlags(bucket: string, prefix?: string): string[];
  /** Stops it (SIGTERM); the data stays. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  close(): Promise<void>;
  output(): string;
}

const SCRIPT = join(import.meta.dirname, "s3-server-main.ts");

export async function startS3Server(opts: { buckets?: string[] } = {}): Promise<S3Server> {
  const dir = tempDir("s3");
  let child: Child | undefined;
  let port = 0;
  const start = async () => {
    child = spawnScript(SCRIPT, [dir, String(port), ...(opts.buckets ?? [])]);
    const line = await child.waitForLine(/^\{"port":\d+\}$/, 30_000);
    port = (JSON.parse(line) as { port: number }).port;
  };
  await start();
  const stop = async () => {
    await child?.stop();
    child = undefined;
  };
  return {
    get port() {
      return port;
    },
    get endpoint() {
      return `http://127.0.0.1:${port}`;
    },
    dir,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: ACCESS_KEY },
    archiveFlags(bucket, prefix) {
      return [
        "--archive",
        `s3://${bucket}${prefix ? `/${prefix}` : ""}`,
        "--archive-s3-endpoint",
        `http://127.0.0.1:${port}`,
        "--archive-s3-path-style",
      ];
    },
    stop,
    start,
    close: stop,
    output: () => child?.output() ?? "",
  };
}
