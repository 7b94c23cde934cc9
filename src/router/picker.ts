/**
 * Choosing a replica for one request. Pure: the candidates' load and the
 * random numbers are inputs, so the rule is tested without a network.
 *
 * Power of two choices: two candidates drawn at random, the less loaded one
 * wins. Load is this router's requests in flight to the replica, plus the
 * queue depth and KV-cache use the replica last reported (weighted: a full
 * KV cache counts as `kvCacheWeight` requests). With an affinity key (a hash
 * of the prompt's start), the replica that key ranks first (rendezvous
 * hashing: a table change moves only the keys of the replicas that came or
 * went) wins while it is not overloaded: its load at most `affinitySlack`
 * above the two-choices pick's.
 */

export interface Candidate {
  replicaId: string;
  url: string;
  /** Requests this router has in flight to it now. */
  inFlight: number;
  /** Requests waiting in the engine's queue, as last reported (0: unknown). */
  queueDepth: number;
  /** Share of its KV cache in use, 0..1, as last reported (0: unknown). */
  kvCacheUse: number;
  /** Passive health: recently failed, kept out for a while. */
  ejected: boolean;
}

export interface PickWeights {
  queueDepth: number;
  kvCacheUse: number;
  /** How much more loaded than the two-choices pick the affinity replica may be and still win. */
  affinitySlack: number;
}

export const DEFAULT_WEIGHTS: PickWeights = { queueDepth: 1, kvCacheUse: 4, affinitySlack: 4 };

export interface PickInput {
  candidates: readonly Candidate[];
  /** Replicas this request already failed on (not tried again). */
  exclude?: ReadonlySet<string>;
  /** Prompt-prefix affinity key (see affinityKey); absent: none. */
  affinity?: string;
  /** Two numbers in [0, 1). */
  random: () => number;
  weights?: PickWeights;
}

export function loadScore(c: Candidate, w: PickWeights = DEFAULT_WEIGHTS): number {
  return c.inFlight + w.queueDepth * c.queueDepth + w.kvCacheUse * c.kvCacheUse;
}

/**
 * The replica to send to, or undefined when every candidate is excluded.
 * Ejected replicas are chosen only when nothing else is left (better a
 * replica that may have recovered than no answer).
 */
export function pickReplica(input: PickInput): Candidate | undefined {
  const w = input.weights ?? DEFAULT_WEIGHTS;
  const open = input.candidates.filter((c) => !input.exclude?.has(c.replicaId));
  const healthy = open.filter((c) => !c.ejected);
  const pool = healthy.length > 0 ? healthy : open;
  if (pool.length === 0) return undefined;
  const best = twoChoices(pool, input.random, w);
  if (input.affinity === undefined) return best;
  const preferred = rendezvous(pool, input.affinity);
  return loadScore(preferred, w) <= loadScore(best, w) + w.affinitySlack ? preferred : best;
}

function twoChoices(pool: readonly Candidate[], random: () => number, w: PickWeights): Candidate {
  if (pool.length === 1) return pool[0] as Candidate;
  const i = Math.min(pool.length - 1, Math.floor(random() * pool.length));
  // The second draw skips the first: two distinct candidates.
  let j = Math.min(pool.length - 2, Math.floor(random() * (pool.length - 1)));
  if (j >= i) j++;
  const a = pool[i] as Candidate;
  const b = pool[j] as Candidate;
  return loadScore(b, w) < loadScore(a, w) ? b : a;
}

/** The candidate whose hash with `key` is highest. */
function rendezvous(pool: readonly Candidate[], key: string): Candidate {
  let best = pool[0] as Candidate;
  let top = -1;
  for (const c of pool) {
    const h = fnv1a(`${key}\u0000${c.replicaId}`);
    if (h > top) {
      top = h;
      best = c;
    }
  }
  return best;
}

/** 32-bit FNV-1a of a string's UTF-16 units: fast, stable across processes (every router agrees). */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The affinity key of a request body: the first `chars` characters of its
 * prompt (a completion's `prompt`, a chat's messages' contents in order), or
 * undefined when it has none. Characters stand in for tokens: the router has
 * no tokenizer, and a shared prefix of characters is a shared prefix of tokens.
 */
export function affinityKey(body: unknown, chars: number): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const b = body as { prompt?: unknown; messages?: unknown; input?: unknown };
  let text = "";
  if (typeof b.prompt === "string") text = b.prompt;
  else if (Array.isArray(b.prompt) && typeof b.prompt[0] === "string") text = b.prompt[0];
  else if (Array.isArray(b.messages)) {
    for (const m of b.messages) {
      if (text.length >= chars) break;
      const content = (m as { content?: unknown } | null)?.content;
      if (typeof content === "string") text += content;
      else if (Array.isArray(content))
        for (const part of content) {
          const t = (part as { text?: unknown } | null)?.text;
          if (typeof t === "string") text += t;
        }
    }
  } else if (typeof b.input === "string") text = b.input;
  return text === "" ? undefined : text.slice(0, chars);
}
