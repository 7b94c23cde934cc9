/**
 * The routing table as this router holds it: per model, its ready endpoints
 * (as the `llmgw_endpoints` bucket lists them) and the router's own count of
 * requests in flight to each. A model whose key was deleted (scaled to 0, or
 * every replica draining) is still known: its requests get a 503 with
 * Retry-After rather than a 404.
 */
import { z } from "zod";

export interface TableEndpoint {
  replicaId: string;
  url: string;
  nodeId: string;
}

/** A bucket value: the JSON list the leading reconciler writes. */
export const endpointListSchema = z.array(
  z.object({ replicaId: z.string().min(1), url: z.url(), nodeId: z.string() }),
);

export interface TableChange {
  model: string;
  before: readonly TableEndpoint[];
  after: readonly TableEndpoint[];
}

export class RoutingTable {
  readonly #models = new Map<string, readonly TableEndpoint[]>();
  readonly #listeners: Array<(c: TableChange) => void> = [];
  /** Changes applied since start. */
  changes = 0;

  /** The model's endpoints; undefined when the table never listed it. */
  endpoints(model: string): readonly TableEndpoint[] | undefined {
    return this.#models.get(model);
  }

  /** Models with at least one ready endpoint, by name. */
  servedModels(): string[] {
    return [...this.#models.entries()]
      .filter(([, l]) => l.length > 0)
      .map(([m]) => m)
      .sort();
  }

  /** Every model with its endpoints (empty lists included), by name. */
  snapshot(): Record<string, readonly TableEndpoint[]> {
    const out: Record<string, readonly TableEndpoint[]> = {};
    for (const m of [...this.#models.keys()].sort()) out[m] = this.#models.get(m) as TableEndpoint[];
    return out;
  }

  /** Replaces a model's list (an empty list: it has no ready replica now). */
  set(model: string, list: readonly TableEndpoint[]): void {
    const before = this.#models.get(model) ?? [];
    this.#models.set(model, list);
    this.changes++;
    for (const l of this.#listeners) l({ model, before, after: list });
  }

  onChange(listener: (c: TableChange) => void): void {
    this.#listeners.push(listener);
  }
}
