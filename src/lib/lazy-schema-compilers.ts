// Fastify's own schema compilers (Ajv for requests, fast-json-stringify for responses), each route's
// validator and serializer compiled on the route's first request instead of all of them at start-up. Most
// of the admin API's routes are rarely used; compiling all of them took most of start-up (0.8 s of 1.6 s)
// and kept every compiled function in memory. A route's first request pays its own compile once (a few ms).
import AjvCompiler from "@fastify/ajv-compiler";
import SerializerCompiler from "@fastify/fast-json-stringify-compiler";
import type { FastifyServerOptions } from "fastify";

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]>;
type Validate = ((data: unknown, context?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown };

/** Defers `compile()` to the first call (or the first look at the compiled function's `errors` or `schemaEnv`). */
function lazyValidator(compile: () => Validate): Validate {
  let compiled: Validate | null = null;
  const get = () => (compiled ??= compile());
  const validate: Validate = (data, context) => (context === undefined ? get()(data) : get()(data, context));
  // Fastify reads `schemaEnv` before each call (to let Ajv coerce a root value) and `errors` after it.
  Object.defineProperty(validate, "schemaEnv", { get: () => get().schemaEnv });
  Object.defineProperty(validate, "errors", { get: () => get().errors });
  return validate;
}

export function lazySchemaCompilers(): CompilersFactory {
  const buildValidator = AjvCompiler();
  const buildSerializer = SerializerCompiler();
  return {
    // The compilers themselves too: Ajv compiles its meta-schema when it is made (about 0.1 s at start-up).
    buildValidator: (externalSchemas: unknown, options: unknown) => {
      let compiler: ReturnType<typeof buildValidator> | null = null;
      const compile = (route: unknown) => (compiler ??= buildValidator(externalSchemas as never, options as never))(route as never) as Validate;
      return (route: unknown) => lazyValidator(() => compile(route));
    },
    buildSerializer: (externalSchemas: unknown, options: unknown) => {
      let compiler: ReturnType<typeof buildSerializer> | null = null;
      const compile = (route: unknown) => (compiler ??= buildSerializer(externalSchemas as never, options as never))(route as never) as (data: unknown) => string;
      return (route: unknown) => {
        let serialize: ((data: unknown) => string) | null = null;
        return (data: unknown) => (serialize ??= compile(route))(data);
      };
    },
  } as CompilersFactory;
}
