/** Listen addresses and the `GET /metrics` endpoint, shared by the control plane's processes and the node agent. */
export { isLoopback, type ListenAddress, parseListen } from "./listen-address.js";
export { type Readiness, type ReadinessCheck, serveRegistry } from "./serve.js";
export { TallyHistogram } from "./tally-histogram.js";
