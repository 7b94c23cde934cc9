/**
 * Where archived segments and snapshots are kept. A store holds named
 * objects; a name is listed only once its object is whole, so a writer
 * killed mid-put leaves nothing that counts, and putting a name again
 * replaces it with the same bytes (names say what they hold, names.ts).
 */
export interface ArchiveObject {
  name: string;
  /** Size in bytes. */
  bytes: number;
}

export interface ArchiveStore {
  /** Where it is, for people: "nats object store llmgw-archive", "directory /var/lib/…", "s3://bucket/prefix". */
  readonly where: string;
  /** Every whole object under `dir` ("segments" or "snapshots"). */
  list(dir: string): Promise<ArchiveObject[]>;
  /** The object's bytes; undefined when there is no such object. */
  get(name: string): Promise<Uint8Array | undefined>;
  /** Stores the object whole (atomically: it is listed only once complete). */
  put(name: string, data: Uint8Array): Promise<void>;
  close(): Promise<void>;
}
