// Schema pieces shared by several routes: the list query, pagination, the error envelope.
import { Type, type Static } from "typebox";
import { DEFAULT_LIMIT, MAX_LIMIT } from "../lib/list-query.ts";

export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const DateTime = Type.String({ format: "date-time", examples: ["2023-06-15T14:30:00.000Z"] });

export const ListQuerySchema = Type.Object(
  {
    id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "Exact match on any identifier related to the element (see the list operation's description).",
      }),
    ),
    createdAtFrom: Type.Optional(
      Type.String({
        description: "Earliest creation time, inclusive. ISO 8601 date-time with Z or an offset, or YYYY-MM-DD (start of that UTC day).",
        examples: ["2023-06-01T00:00:00Z", "2023-06-01"],
      }),
    ),
    createdAtTo: Type.Optional(
      Type.String({
        description: "Latest creation time, inclusive. ISO 8601 date-time with Z or an offset, or YYYY-MM-DD (end of that UTC day).",
        examples: ["2023-06-30T23:59:59Z", "2023-06-30"],
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: "Page size." })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: "Opaque: nextCursor of the previous page." })),
  },
  { additionalProperties: false },
);
export type ListQueryParams = Static<typeof ListQuerySchema>;

export const PaginationSchema = Type.Object({
  limit: Type.Integer(),
  nextCursor: Nullable(Type.String({ description: "Pass as cursor for the next page; null on the last page." })),
});

export const ErrorSchema = Type.Object(
  {
    error: Type.Object(
      {
        code: Type.String(),
        message: Type.String(),
        requestId: Type.String(),
        param: Type.Optional(Type.String()),
      },
      { additionalProperties: true },
    ),
  },
  { $id: "Error" },
);

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [s, Type.Ref("Error")])) as Record<number, ReturnType<typeof Type.Ref>>;
