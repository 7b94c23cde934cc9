// The reconciler: decide (pure), placement (pure), explanations (pure).
export * from "./decide/index.js";
export * from "./explain/index.js";
