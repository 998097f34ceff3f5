// `storefront seed`: placeholder replaced by the seeding work (src/seed/).
import type { Command } from "commander";

export function registerSeedCommand(_program: Command): void {}
