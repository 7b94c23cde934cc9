/**
 * The archive in an S3-compatible object store (`--archive s3://BUCKET/PREFIX`):
 * AWS S3, or MinIO, Ceph RGW and the like through `endpoint` (usually with
 * path-style addressing). One object per archive name under the prefix.
 * A PUT is atomic in S3 (an object is listed only once whole), so a writer
 * killed mid-put leaves nothing that counts, as the store interface asks.
 *
 * Through the AWS SDK's S3 client: credentials and region come from its
 * default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN,
 * AWS_PROFILE and the shared config files, a web identity token, the
 * container or instance role) unless given; it retries throttling and
 * server errors with exponential backoff. What its failures mean is
 * told in the log layer's codes (s3-errors.ts). The bucket is never
 * created here: a missing one is a configuration error.
 *
 * The client is loaded when an S3 archive is first used: it takes about
 * as long to import as the rest of a command's start, and most commands
 * never touch an S3 archive.
 */
import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { LogError } from "../errors.js";
import { type S3Place, type S3Sdk, s3Error } from "./s3-errors.js";
import type { ArchiveObject, ArchiveStore } from "./store.js";

export interface S3ArchiveConfig {
  bucket: string;
  /** Key prefix the archive lives under, without leading or trailing '/'; "" for the bucket's root. */
  prefix: string;
  /** Endpoint URL of an S3-compatible store (MinIO, Ceph…); AWS's endpoint for the region when absent. */
  endpoint?: string;
  /** Region; the SDK's chain (AWS_REGION, the profile) when absent, us-east-1 with an endpoint. */
  region?: string;
  /** Path-style addressing (endpoint/bucket/key) instead of bucket.endpoint/key. */
  forcePathStyle?: boolean;
  /** Credentials; the SDK's default chain when absent. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Attempts per request, retries backing off exponentially (default 3: the SDK's standard retry). */
  maxAttempts?: number;
}

/** How long a connection may take to open, and a request to go quiet, before it fails (and is retried). */
const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 60_000;

let loaded: Promise<S3Sdk> | undefined;
function loadSdk(): Promise<S3Sdk> {
  loaded ??= import("@aws-sdk/client-s3");
  return loaded;
}

interface Connected {
  sdk: S3Sdk;
  client: S3Client;
}

export class S3ArchiveStore implements ArchiveStore {
  readonly where: string;
  readonly #place: S3Place;
  readonly #config: S3ClientConfig;
  readonly #keyPrefix: string;
  #ready: Promise<Connected> | undefined;
  #connected: Connected | undefined;

  constructor(private readonly cfg: S3ArchiveConfig) {
    const url = `s3://${cfg.bucket}${cfg.prefix ? `/${cfg.prefix}` : ""}`;
    this.#place = { url, bucket: cfg.bucket, endpoint: cfg.endpoint };
    this.where = cfg.endpoint ? `${url} at ${cfg.endpoint}` : url;
    this.#keyPrefix = cfg.prefix ? `${cfg.prefix}/` : "";
    const region = cfg.region ?? (cfg.endpoint ? "us-east-1" : undefined);
    const config: S3ClientConfig = {
      forcePathStyle: cfg.forcePathStyle ?? false,
      maxAttempts: cfg.maxAttempts ?? 3,
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
      ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}),
      ...(region ? { region } : {}),
      ...(cfg.credentials ? { credentials: cfg.credentials } : {}),
    };
    this.#config = config;
  }

  /**
   * Loads the client and resolves the region and credentials once, before
   * the first request, so that missing ones are told as such (not as a
   * failed request).
   */
  #check(): Promise<Connected> {
    this.#ready ??= (async () => {
      const sdk = await loadSdk();
      this.#connected ??= { sdk, client: new sdk.S3Client(this.#config) };
      const { client } = this.#connected;
      try {
        await client.config.region();
      } catch (err) {
        throw new LogError(
          "invalid-argument",
          `no AWS region for the archive ${this.#place.url}: give --archive-s3-region (env LLMGW_ARCHIVE_S3_REGION) or set AWS_REGION`,
          { cause: err },
        );
      }
      try {
        await client.config.credentials();
      } catch (err) {
        throw new LogError(
          "unauthenticated",
          `no S3 credentials for the archive ${this.#place.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or give the process a role (web identity, container or instance role)`,
          { cause: err },
        );
      }
      return this.#connected;
    })();
    // A failed check is checked again next time (the environment may be fixed, a role may come up).
    this.#ready.catch(() => {
      this.#ready = undefined;
    });
    return this.#ready;
  }

  async list(dir: string): Promise<ArchiveObject[]> {
    const { sdk, client } = await this.#check();
    const prefix = `${this.#keyPrefix}${dir}/`;
    const out: ArchiveObject[] = [];
    try {
      for await (const page of sdk.paginateListObjectsV2(
        { client },
        { Bucket: this.cfg.bucket, Prefix: prefix },
      )) {
        for (const o of page.Contents ?? []) {
          if (!o.Key) continue;
          const name = o.Key.slice(this.#keyPrefix.length);
          // Only objects directly under dir/ (a deeper key is no archive name).
          if (name.slice(dir.length + 1).includes("/")) continue;
          out.push({ name, bytes: o.Size ?? 0 });
        }
      }
    } catch (err) {
      throw s3Error(sdk, err, this.#place, `listing ${dir}/`);
    }
    return out;
  }

  async get(name: string): Promise<Uint8Array | undefined> {
    const { sdk, client } = await this.#check();
    try {
      const res = await client.send(
        new sdk.GetObjectCommand({ Bucket: this.cfg.bucket, Key: `${this.#keyPrefix}${name}` }),
      );
      if (!res.Body) throw new LogError("malformed", `${name} in ${this.#place.url} came without a body`);
      return await res.Body.transformToByteArray();
    } catch (err) {
      if (err instanceof sdk.NoSuchKey) return undefined;
      throw s3Error(sdk, err, this.#place, `reading ${name}`);
    }
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    const { sdk, client } = await this.#check();
    try {
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.cfg.bucket,
          Key: `${this.#keyPrefix}${name}`,
          Body: data,
          ContentLength: data.byteLength,
          ContentType: "application/octet-stream",
        }),
      );
    } catch (err) {
      throw s3Error(sdk, err, this.#place, `writing ${name}`);
    }
  }

  async close(): Promise<void> {
    this.#connected?.client.destroy();
  }
}
