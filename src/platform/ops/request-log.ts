// One log line per request, written when it is answered (Fastify writes two: received and completed), with
// the path but not the query (it may carry an e-mail or a cursor). The probes that load balancers and
// Prometheus ask every few seconds are written at debug, so they stay out of an info log.
import { LogController, type FastifyReply, type FastifyRequest } from "fastify";

const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

export class RequestLogController extends LogController {
  override incomingRequest(): void {
    // Nothing: the answer's line says everything the request's would.
  }

  override requestCompleted(_error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const path = request.url.split("?")[0]!;
    const line = { method: request.method, url: path, statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 };
    const message = `${request.method} ${path} ${reply.statusCode}`;
    if (PROBES.has(path)) reply.log.debug(line, message);
    else reply.log.info(line, message);
  }
}
