/**
 * Xid errors from the kernel log: the NVIDIA driver's way of saying a GPU
 * failed ("NVRM: Xid (PCI:0000:3b:00): 79, pid=…, GPU has fallen off the
 * bus."). nvidia-smi has no column for them, so without reading the kernel
 * log a GPU that fell off the bus would stay in placement. Pure: text in,
 * events out.
 */
import { GpuProblem_Kind } from "../../gen/llmgw/v1/agent_pb.js";
import type { SampledProblem } from "../node-agent.js";

/** One Xid line: which PCI device, which Xid, and the driver's words. */
export interface XidEvent {
  /** The device as `dddd:bb:dd` (domain, bus, device; lower case), comparable with {@link normalisePciBusId}. */
  pciKey: string;
  xid: number;
  /** The driver's words after the Xid, without the pid and process name. */
  detail: string;
  /**
   * Which logging of it this is: the /dev/kmsg record's sequence number, or
   * dmesg's timestamp, or the line itself. The same line read again (the
   * kernel log re-read after an agent restart) is the same occurrence.
   */
  stamp: string;
}

const KMSG_SEQ = /^\d+,(\d+),/;
const DMESG_TIME = /^\[\s*([\d.]+)\]/;

// Kernels print "Xid (PCI:0000:3b:00): 79, …"; older drivers "Xid (0000:3b:00): 79, …".
const XID_LINE =
  /NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)(?:,\s*(.*))?$/;

/**
 * A PCI bus id in one form: nvidia-smi's `00000000:3B:00.0` and the
 * kernel's `0000:3b:00` both become `0000:3b:00`. Undefined for anything
 * that is not a bus id (nvidia-smi's `[N/A]`).
 */
export function normalisePciBusId(id: string): string | undefined {
  const m = /^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?$/.exec(id.trim());
  if (!m) return undefined;
  return `${m[1]!.slice(-4)}:${m[2]}:${m[3]}`.toLowerCase();
}

/** The Xid lines in a stretch of kernel log (`/dev/kmsg` records or `dmesg` lines); other lines are skipped. */
export function parseXidLines(text: string): XidEvent[] {
  const out: XidEvent[] = [];
  for (const line of text.split("\n")) {
    const m = XID_LINE.exec(line.trimEnd());
    if (!m) continue;
    const stamp = KMSG_SEQ.exec(line)?.[1] ?? DMESG_TIME.exec(line)?.[1] ?? line.trim();
    out.push({
      stamp,
      pciKey: `${m[1]!.slice(-4)}:${m[2]}:${m[3]}`.toLowerCase(),
      xid: Number(m[4]),
      // The process that met the error varies from line to line; the error does not.
      detail: (m[5] ?? "").replace(/^pid=[^,]*,\s*(name=[^,]*,\s*)?/, "").trim(),
    });
  }
  return out;
}

/** What NVIDIA's Xid catalogue says the common ones mean. */
const XID_MEANING: Record<number, string> = {
  13: "graphics engine exception",
  31: "GPU memory page fault",
  43: "GPU stopped processing",
  45: "preemptive cleanup",
  48: "double-bit ECC error",
  61: "internal micro-controller breakpoint",
  62: "internal micro-controller halt",
  63: "ECC page retirement or row remapping recorded",
  64: "ECC page retirement or row remapper recording failure",
  74: "NVLink error",
  79: "GPU has fallen off the bus",
  92: "high single-bit ECC error rate",
  94: "contained ECC error",
  95: "uncontained ECC error",
  119: "GSP RPC timeout",
  120: "GSP error",
};

/**
 * Xids an application's own bug raises (a bad kernel, a page fault in user
 * code): worth a log line, not taking a GPU out of service.
 */
export const APPLICATION_XIDS: readonly number[] = [13, 31, 43, 45];

/** The problem's message: "Xid 79: GPU has fallen off the bus (pid=…)". */
export function xidMessage(e: XidEvent): string {
  const meaning = XID_MEANING[e.xid] ?? "see NVIDIA's Xid catalogue";
  return `Xid ${e.xid}: ${meaning}${e.detail ? ` (${e.detail.slice(0, 200)})` : ""}`;
}

/**
 * The GPU problems Xid events make: each on the GPU whose bus id it names,
 * application Xids and devices not in the list left out.
 */
export function xidProblems(
  events: readonly XidEvent[],
  gpus: readonly { index: number; pciBusId: string }[],
  ignore: readonly number[],
): SampledProblem[] {
  const byBus = new Map<string, number>();
  for (const g of gpus) {
    const key = normalisePciBusId(g.pciBusId);
    if (key) byBus.set(key, g.index);
  }
  const out: SampledProblem[] = [];
  for (const e of events) {
    const gpuIndex = byBus.get(e.pciKey);
    if (gpuIndex === undefined || ignore.includes(e.xid)) continue;
    out.push({
      gpuIndex,
      kind: GpuProblem_Kind.XID,
      message: xidMessage(e),
      // Each logging is an occurrence: one Xid logged twice is reported twice.
      occurrence: { type: "event", signal: `xid ${e.xid} ${e.stamp}`, level: 1 },
    });
  }
  return out;
}
