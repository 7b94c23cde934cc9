/** What one simulated run is: validated, every field named in an error. */
import { z } from "zod";

export const FAULT_KINDS = [
  "gateway-crash",
  "leader-loss",
  "agent-crash",
  "stream-reset",
  "network",
  "log",
  "engine",
  "gpu",
  "operator",
  "clock-skew",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export const SimulationOptionsSchema = z.strictObject({
  seed: z.int().min(0).max(0xffffffff),
  /** Simulated minutes. */
  minutes: z
    .number()
    .gt(0)
    .max(7 * 24 * 60),
  nodes: z.int().min(1).max(10_000),
  faults: z.array(z.enum(FAULT_KINDS)),
  gateways: z.int().min(1).max(16).default(3),
  reconcilers: z.int().min(1).max(5).default(2),
  /** The agents' heartbeat (ms): the rhythm of most of what happens. */
  heartbeatMs: z.int().min(100).max(60_000).default(5_000),
  /** Faults stop this long before the end; the fleet must converge to the catalog within it. */
  convergeMinutes: z.number().min(1).max(120).default(15),
  /** Stored events printed with a failure. */
  lastEvents: z.int().min(0).max(1000).default(20),
});

export type SimulationOptions = z.output<typeof SimulationOptionsSchema>;
export type SimulationInput = z.input<typeof SimulationOptionsSchema>;

/** Validates `input`; a RangeError names each bad field and what it expects. */
export function parseSimulationOptions(input: SimulationInput): SimulationOptions {
  const r = SimulationOptionsSchema.safeParse(input);
  if (r.success) return r.data;
  throw new RangeError(
    r.error.issues.map((i) => `${i.path.join(".") || "options"}: ${i.message}`).join("; "),
  );
}

/** `--faults` as given: "all", "none", or a comma-separated list of kinds. */
export function parseFaultList(text: string): FaultKind[] {
  const t = text.trim();
  if (t === "all") return [...FAULT_KINDS];
  if (t === "none" || t === "") return [];
  const out: FaultKind[] = [];
  for (const raw of t.split(",")) {
    const k = raw.trim();
    if (!(FAULT_KINDS as readonly string[]).includes(k))
      throw new RangeError(
        `--faults: unknown fault kind ${JSON.stringify(k)}; expected "all", "none" or some of ${FAULT_KINDS.join(", ")}`,
      );
    if (!out.includes(k as FaultKind)) out.push(k as FaultKind);
  }
  return out;
}
