// The request a simulation runs: the one given, or a recorded delivery's (read on the server, so a body of
// any size the webhook accepted can be run, byte for byte, on its receipt time), optionally signed as the
// plugin's catalogue provider signs, with the store's own settings (the bench's "sign with this store's
// secret"). The secret stays here; only the signature headers go back with the run.
import { AppError } from "../errors.ts";
import { readCatalogManifest } from "../plugins/catalog.ts";
import { signForProvider } from "../plugins/catalog-signing.ts";
import type { PluginsService, RunnablePlugin } from "../plugins/plugins.service.ts";
import type { DeliveriesRepository } from "./deliveries.repository.ts";
import type { SimulationInput } from "./webhook.service.ts";

export interface SimulationRequest {
  method: string;
  headers: Record<string, string>;
  query: Record<string, string>;
  body: Buffer;
  /** The script's clock; undefined: the real time. */
  clockMs: number | undefined;
  signed: boolean;
}

export interface SimulationRequestDeps {
  deliveries: DeliveriesRepository;
  plugins: PluginsService;
  now: () => number;
}

const lowerCase = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

async function recorded(deps: SimulationRequestDeps, storeId: string, deliveryId: string, input: SimulationInput): Promise<SimulationRequest> {
  const stored = await deps.deliveries.getRequest(storeId, deliveryId);
  if (!stored) throw new AppError("delivery_not_found", `No delivery ${deliveryId} in store ${storeId}`, { param: "deliveryId" });
  if (stored.bodyBytes > stored.body.length) {
    throw new AppError("conflict", `Delivery ${deliveryId} was not verified, so only the first ${stored.body.length} of its ${stored.bodyBytes} bytes were kept; it cannot be run`, { param: "deliveryId" });
  }
  return { method: stored.method, headers: stored.headers, query: stored.query, body: stored.body, clockMs: input.receivedAt ?? stored.receivedAt, signed: false };
}

export async function simulationRequest(deps: SimulationRequestDeps, plugin: RunnablePlugin, input: SimulationInput): Promise<SimulationRequest> {
  const request: SimulationRequest =
    input.deliveryId !== undefined
      ? await recorded(deps, plugin.storeId, input.deliveryId, input)
      : { method: input.method ?? "POST", headers: lowerCase(input.headers ?? {}), query: input.query ?? {}, body: input.body, clockMs: input.receivedAt, signed: false };
  if (!input.sign) return request;
  const { catalogBase } = await deps.plugins.get(plugin.storeId, plugin.name);
  const signing = catalogBase === null ? null : readCatalogManifest(catalogBase).signing;
  if (signing === null) {
    const why = catalogBase === null ? "it was not installed from the catalogue" : `${catalogBase}'s provider cannot be signed here`;
    throw new AppError("invalid_request", `Cannot sign for plugin ${plugin.name}: ${why}`, { param: "sign" });
  }
  const clockMs = request.clockMs ?? deps.now();
  const { set, drop } = signForProvider(signing.scheme, { body: request.body, headers: request.headers, settings: plugin.secrets, nowSeconds: Math.floor(clockMs / 1000) });
  const headers = Object.fromEntries(Object.entries(request.headers).filter(([k]) => !drop.includes(k)));
  return { ...request, headers: { ...headers, ...set }, clockMs, signed: true };
}
