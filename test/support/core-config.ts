/**
 * The session core's configuration as the pure core tests drive it: the
 * gateway's defaults (src/gateway/config.ts) for gateway gw-1, with the
 * fields a test is about overridden.
 */
import type { CoreConfig } from "../../src/gateway/session-core/index.js";

export function coreConfig(overrides: Partial<CoreConfig> = {}): CoreConfig {
  return {
    gatewayId: "gw-1",
    insecureDev: false,
    usageThresholdMb: 1024,
    registrationTimeoutMs: 10_000,
    heartbeatTimeoutMs: 15_000,
    usageIntervalMs: 3_000,
    eventBudget: { perMinute: 600, burst: 600 },
    byteBudget: { perMinute: 1024 * 1024, burst: 2 * 1024 * 1024 },
    textCaps: { outputChars: 4096, textChars: 1024 },
    ackEvery: 16,
    ackDelayMs: 20,
    ...overrides,
  };
}
