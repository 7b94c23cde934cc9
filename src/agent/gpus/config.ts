/** The agent config's `hardware` section: what nvidia-smi cannot tell. */
import { z } from "zod";
import { APPLICATION_XIDS } from "./xid.js";

export const hardwareConfigSchema = z.strictObject({
  /** InfiniBand / RoCE fabrics the node is on: nodes whose fabrics share name and kind can hold one multi-node replica. */
  fabrics: z
    .array(
      z.strictObject({
        name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "must be 1 to 64 letters, digits, '.', '_' or '-'"),
        kind: z
          .string()
          .regex(/^[a-z0-9-]{1,32}$/, "must be a lower-case kind such as infiniband or roce")
          .default("infiniband"),
        gpuIndices: z.array(z.number().int().min(0)).default([]),
      }),
    )
    .default([]),
  /** NVLink domains: "auto" reads `nvidia-smi topo -m`; or the GPU indices of each domain. */
  nvlink: z.union([z.literal("auto"), z.array(z.array(z.number().int().min(0)).min(2))]).default("auto"),
  /** At or over this temperature a GPU is reported THERMAL. */
  thermalLimitC: z.number().int().min(40).max(130).default(90),
  /** Where the kernel logs the driver's Xid errors; "off" reads none (--kernel-log overrides). */
  kernelLog: z.string().min(1).default("/dev/kmsg"),
  /** Xids not taken as GPU problems: by default those an application's own bug raises. */
  xidIgnore: z.array(z.number().int().min(1)).default([...APPLICATION_XIDS]),
  /**
   * How often the GPUs are read again (nvidia-smi's list, memory, problems),
   * in ms; a GPU gone, back or swapped leads to a re-registration. Default:
   * every heartbeat.
   */
  sampleMs: z.number().int().min(100).max(600_000).optional(),
  /** nvidia-smi failing this many samples in a row is reported as a node problem. */
  sampleFailureThreshold: z.number().int().min(1).max(1000).default(3),
});

export type HardwareConfig = z.output<typeof hardwareConfigSchema>;
