/**
 * What the router knows of each replica beyond the table: its requests in
 * flight from this router, when passive health lets it back in, and the load
 * it last reported. Keyed by replica id (a replica's URL never changes).
 */
import type { Candidate } from "./picker.js";
import type { TableEndpoint } from "./table.js";

export interface ReplicaLoad {
  queueDepth: number;
  kvCacheUse: number;
}

interface ReplicaRuntime {
  inFlight: number;
  ejectedUntilMs: number;
}

export class ReplicaBook {
  readonly #runtime = new Map<string, ReplicaRuntime>();
  readonly #load = new Map<string, ReplicaLoad>();

  #of(replicaId: string): ReplicaRuntime {
    let r = this.#runtime.get(replicaId);
    if (!r) {
      r = { inFlight: 0, ejectedUntilMs: 0 };
      this.#runtime.set(replicaId, r);
    }
    return r;
  }

  candidates(list: readonly TableEndpoint[], nowMs: number): Candidate[] {
    return list.map((e) => {
      const r = this.#runtime.get(e.replicaId);
      const l = this.#load.get(e.replicaId);
      return {
        replicaId: e.replicaId,
        url: e.url,
        inFlight: r?.inFlight ?? 0,
        queueDepth: l?.queueDepth ?? 0,
        kvCacheUse: l?.kvCacheUse ?? 0,
        ejected: (r?.ejectedUntilMs ?? 0) > nowMs,
      };
    });
  }

  started(replicaId: string): void {
    this.#of(replicaId).inFlight++;
  }

  finished(replicaId: string): void {
    const r = this.#of(replicaId);
    r.inFlight = Math.max(0, r.inFlight - 1);
  }

  inFlight(replicaId: string): number {
    return this.#runtime.get(replicaId)?.inFlight ?? 0;
  }

  eject(replicaId: string, untilMs: number): void {
    this.#of(replicaId).ejectedUntilMs = untilMs;
  }

  setLoad(replicaId: string, load: ReplicaLoad): void {
    this.#load.set(replicaId, load);
  }

  /** Forgets replicas that left the table and hold no request of this router. */
  forget(keep: ReadonlySet<string>): void {
    for (const [id, r] of this.#runtime) if (!keep.has(id) && r.inFlight === 0) this.#runtime.delete(id);
    for (const id of this.#load.keys()) if (!keep.has(id)) this.#load.delete(id);
  }
}
