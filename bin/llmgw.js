#!/usr/bin/env node
// The llmgw command. An installed package or image runs the JavaScript
// compiled into dist/src (`npm run build`); a source checkout runs the
// TypeScript in the tree through tsx's loader, so development needs no build
// step and never runs stale compiled code.
import { existsSync } from "node:fs";

const sources = new URL("../src/cli/main.ts", import.meta.url);
if (existsSync(sources)) {
  const { register } = await import("tsx/esm/api");
  register();
  await import(sources.href);
} else {
  await import("../dist/src/cli/main.js");
}
