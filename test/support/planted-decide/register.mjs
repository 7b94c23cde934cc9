// Loaded with `node --import` (through NODE_OPTIONS) into a test's child
// process: swaps the reconciler's decide for the counting copy beside this
// file (hooks.mjs). Nothing in src changes; a process started without it
// runs the real decide.
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);
