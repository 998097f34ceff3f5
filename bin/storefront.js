#!/usr/bin/env node
// The `storefront` command: Node 24 runs the TypeScript sources directly (type stripping), no build step.
import "../src/main.ts";
