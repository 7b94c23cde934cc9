// The nats-server harness is shared with the benchmarks, which start their own servers.
export * from "../../bench/support/nats.js";
