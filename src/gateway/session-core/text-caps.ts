/**
 * Caps on the free text an agent sends: an engine's last output, error
 * messages, labels, GPU names, problem texts, names in a registration.
 * Text over its cap is cut and ends with a marker saying so (the rest of
 * the message is kept: a long error is still an error worth recording);
 * nothing is refused for its length. The message's ids are not text and
 * are not touched here. Pure; a message with nothing over its caps is
 * returned as it came (no copy on the hot path).
 */
import type { CommandResult, Heartbeat, Register, ShardStatus } from "../../gen/llmgw/v1/agent_pb.js";

export interface TextCaps {
  /** Characters of a shard's `last_output` (the tail of an engine's log). */
  readonly outputChars: number;
  /** Characters of every other free-text field. */
  readonly textChars: number;
}

/** Which field was cut, for the metric (`field` label): a short, fixed set. */
export type CappedField =
  | "last_output"
  | "error"
  | "labels"
  | "gpu"
  | "fabric"
  | "problem"
  | "agent_version"
  | "running_shard";

/** The shortest cap the configuration allows: the marker must fit with room for text. */
export const MIN_TEXT_CAP = 64;

/** What replaces the cut part: it says that it was cut and how long the text was. */
export function truncationMarker(length: number): string {
  return `…[truncated by the gateway: ${length} characters]`;
}

/** `text` within `max` characters: as it is, or cut with the marker at its end. */
export function capText(text: string, max: number): string {
  if (text.length <= max) return text;
  const marker = truncationMarker(text.length);
  let keep = Math.max(0, max - marker.length);
  // Never half a surrogate pair.
  const last = text.charCodeAt(keep - 1);
  if (keep > 0 && last >= 0xd800 && last <= 0xdbff) keep--;
  return text.slice(0, keep) + marker;
}

/** Collects the fields cut while capping one message. */
class Cutter {
  readonly fields = new Set<CappedField>();
  constructor(readonly caps: TextCaps) {}
  text(s: string, field: CappedField): string {
    const max = field === "last_output" ? this.caps.outputChars : this.caps.textChars;
    if (s.length <= max) return s;
    this.fields.add(field);
    return capText(s, max);
  }
  list(xs: readonly string[], field: CappedField): string[] | undefined {
    const max = this.caps.textChars;
    if (!xs.some((x) => x.length > max)) return undefined;
    return xs.map((x) => this.text(x, field));
  }
}

export interface Capped<T> {
  readonly value: T;
  /** Fields that were cut (empty: `value` is the message as it came). */
  readonly fields: readonly CappedField[];
}

const same = <T>(value: T): Capped<T> => ({ value, fields: [] });

export function capShardStatus(st: ShardStatus, caps: TextCaps): Capped<ShardStatus> {
  if (st.lastOutput.length <= caps.outputChars && st.error.length <= caps.textChars) return same(st);
  const c = new Cutter(caps);
  const value = { ...st, lastOutput: c.text(st.lastOutput, "last_output"), error: c.text(st.error, "error") };
  return { value, fields: [...c.fields] };
}

export function capCommandResult(r: CommandResult, caps: TextCaps): Capped<CommandResult> {
  if (r.error.length <= caps.textChars) return same(r);
  const c = new Cutter(caps);
  return { value: { ...r, error: c.text(r.error, "error") }, fields: [...c.fields] };
}

export function capHeartbeat(hb: Heartbeat, caps: TextCaps): Capped<Heartbeat> {
  const max = caps.textChars;
  if (!hb.newProblems.some((p) => p.length > max) && !hb.gpuProblems.some((p) => p.message.length > max))
    return same(hb);
  const c = new Cutter(caps);
  const value = {
    ...hb,
    newProblems: c.list(hb.newProblems, "problem") ?? hb.newProblems,
    gpuProblems: hb.gpuProblems.map((p) =>
      p.message.length > max ? { ...p, message: c.text(p.message, "problem") } : p,
    ),
  };
  return { value, fields: [...c.fields] };
}

export function capRegistration(reg: Register, caps: TextCaps): Capped<Register> {
  const max = caps.textChars;
  const long = (s: string) => s.length > max;
  const over =
    long(reg.agentVersion) ||
    Object.entries(reg.labels).some(([k, v]) => long(k) || long(v)) ||
    reg.gpus.some((g) => long(g.uuid) || long(g.product) || g.problems.some(long)) ||
    reg.fabrics.some((f) => long(f.name) || long(f.kind)) ||
    reg.runningShards.some((s) => long(s.model) || long(s.profile));
  if (!over) return same(reg);
  const c = new Cutter(caps);
  const value = {
    ...reg,
    agentVersion: c.text(reg.agentVersion, "agent_version"),
    labels: Object.fromEntries(
      Object.entries(reg.labels).map(([k, v]) => [c.text(k, "labels"), c.text(v, "labels")]),
    ),
    gpus: reg.gpus.map((g) => ({
      ...g,
      uuid: c.text(g.uuid, "gpu"),
      product: c.text(g.product, "gpu"),
      problems: c.list(g.problems, "problem") ?? g.problems,
    })),
    fabrics: reg.fabrics.map((f) => ({
      ...f,
      name: c.text(f.name, "fabric"),
      kind: c.text(f.kind, "fabric"),
    })),
    runningShards: reg.runningShards.map((s) => ({
      ...s,
      model: c.text(s.model, "running_shard"),
      profile: c.text(s.profile, "running_shard"),
    })),
  };
  return { value, fields: [...c.fields] };
}
