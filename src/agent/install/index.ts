/** The host install of the agent (`llmgw agent install`): systemd unit, user, config skeleton, state directory. */
export {
  AGENT_SERVICE,
  AGENT_STATE_DIR,
  configSkeleton,
  type HostInstallOptions,
  hostInstallLayout,
  type LayoutEntry,
  systemdUnit,
  sysusersConf,
} from "./layout.js";
export { HostInstallError, type WrittenEntry, writeHostInstall } from "./write.js";
