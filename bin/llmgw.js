#!/usr/bin/env node
// The llmgw command. TypeScript sources are loaded through tsx's loader so
// the command always runs the code in the tree, with no build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
