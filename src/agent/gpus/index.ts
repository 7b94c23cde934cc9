/** The node's GPUs: discovery and periodic samples through nvidia-smi, or from a file. */
export { type HardwareConfig, hardwareConfigSchema } from "./config.js";
export {
  discoverFromFile,
  discoverWithNvidiaSmi,
  fileSource,
  GpuDiscoveryError,
  type NvidiaSmiOptions,
  nvidiaSmiSource,
} from "./discover.js";
export { discoveredGpu, type GpuFound } from "./discovered-gpu.js";
export { type KernelLog, type KernelLogOptions, openKernelLog } from "./kernel-log.js";
export { GpuOutputError, parseQueryGpu, parseTopology, rowProblems } from "./parse.js";
export {
  APPLICATION_XIDS,
  normalisePciBusId,
  parseXidLines,
  type XidEvent,
  xidMessage,
  xidProblems,
} from "./xid.js";
